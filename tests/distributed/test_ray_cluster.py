"""RaySampler on a simulated two-node cluster: node affinity places each actor."""

from __future__ import annotations

import pytest

from parllel.distributed import RaySampler
from parllel.distributed.ray_runtime import (
    SAMPLER_SYSTEM_CONFIG,
    init_ray,
    kept_signal_handlers,
)
from tests.helpers.background_helpers import T
from tests.helpers.ray_helpers import build_linear_sampler

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

SEED, WIDTHS = 5, (2, 3)


@pytest.fixture(scope="module")
def two_nodes():
    """A head node and one more node, 1 CPU each; this process connected."""
    with kept_signal_handlers():  # the head node installs a SIGTERM handler
        cluster = cluster_utils.Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "include_dashboard": False,
                "_system_config": SAMPLER_SYSTEM_CONFIG,
            },
        )
        cluster.add_node(num_cpus=1)
    init_ray(address=cluster.address)
    cluster.wait_for_nodes()
    try:
        yield [node["NodeID"] for node in ray.nodes() if node["Alive"]]
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_node_ids_place_each_actor_on_its_node(two_nodes):
    assert len(two_nodes) == 2
    placement = list(reversed(two_nodes))
    with RaySampler(
        build_linear_sampler, SEED, WIDTHS, n_actors=2, node_ids=placement
    ) as sampler:
        assert sampler.node_ids == placement
        batch = sampler.collect_batch()
        assert batch.sample_tree["reward"].shape == (T, sum(WIDTHS))
        assert ray.is_initialized()  # joined the running Ray: not its to stop
    assert ray.is_initialized()
    # both on the node the driver is not on, half a CPU each
    other = [
        node for node in two_nodes if node != ray.get_runtime_context().get_node_id()
    ]
    with RaySampler(
        build_linear_sampler,
        SEED,
        WIDTHS,
        n_actors=2,
        node_ids=other * 2,
        num_cpus_per_actor=0.5,
    ) as sampler:
        assert sampler.node_ids == other * 2
