"""RaySampler on a local Ray: exact round trips, version stamps, back-pressure,
bitwise equality with the local sampler, errors and bad configs."""

from __future__ import annotations

import threading
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from parllel.distributed import RaySampler
from parllel.errors import (
    ConfigError,
    DistributedSamplerError,
    ParllelWarning,
    PolicyLagError,
)
from tests.helpers.background_helpers import LinearAgent, T, learner_update, snapshot
from tests.helpers.ray_helpers import (
    build_dict_sampler,
    build_failing_sampler,
    build_gated_sampler,
    build_linear_sampler,
    build_local_linear_sampler,
    build_normalizing_sampler,
    build_raising,
    columns_equal,
)

pytest.importorskip("ray")
pytestmark = pytest.mark.timeout(120)

SEED, WIDTHS = 7, (2, 3)


def padded_columns(tree, columns: slice) -> dict[str, np.ndarray]:
    """Every leaf with its padding rows, restricted to ``columns``."""
    return {
        path: (
            leaf.padded_ndarray()[:, columns]
            if len(leaf.batch_shape) >= 2
            else leaf.padded_ndarray()[columns]
        ).copy()
        for path, leaf in tree.items_flat()
    }


def learner_agent() -> LinearAgent:
    torch.manual_seed(SEED)  # the actors' agents start from the same weights
    return LinearAgent()


def test_dict_trees_of_process_cages_round_trip_exactly(local_ray):
    """Dict observations and actions (float32, int64, bool leaves), padding
    rows, ProcessCages in the actors: each actor's columns equal what the same
    sampler collects in this process (with SerialCages: the same batches)."""
    batches = 3
    with RaySampler(build_dict_sampler, SEED, WIDTHS, True, n_actors=2) as sampler:
        assert sampler.sample_tree["reward"].shape == (T, sum(WIDTHS))
        got = []
        for n in range(batches):
            batch = sampler.collect_batch()
            assert batch.batch_index == n and batch.policy_version == 0
            got.append(
                [padded_columns(batch.sample_tree, cols) for cols in sampler.columns]
            )
        actors = sampler.actors
        dtypes = {leaf.dtype for _, leaf in sampler.sample_tree.items_flat()}
    assert {np.dtype(np.float32), np.dtype(np.int64), np.dtype(bool)} <= dtypes
    for index, width in enumerate(WIDTHS):
        local = build_dict_sampler(index, SEED, WIDTHS)
        try:
            for n in range(batches):
                local.collect_batch()
                expected = padded_columns(local.sample_tree, slice(0, width))
                assert not columns_equal(expected, got[n][index]), (index, n)
        finally:
            local.cages[0].close()
    # close() killed the actors
    with pytest.raises(local_ray.exceptions.RayActorError):
        local_ray.get(actors[0].describe.remote(), timeout=30)


def test_synchronous_batches_equal_the_local_sampler_bitwise(local_ray):
    """max_lag=0, same seeds: batch n of 2 actors over 2 + 3 envs equals batch
    n of one local sampler over the 5 envs, every leaf, every bit; batch n is
    collected with version n (the learner publishes once per batch)."""
    batches = 4
    agent = learner_agent()
    with RaySampler(
        build_linear_sampler,
        SEED,
        WIDTHS,
        n_actors=2,
        max_lag=0,
        modules={"model": agent.model},
    ) as sampler:
        got = []
        for n in range(batches):
            batch = sampler.collect_batch(learner_version=sampler.policy_version)
            assert (batch.policy_version, batch.lag) == (n, 0)
            got.append(snapshot(batch.sample_tree))
            with torch.no_grad():  # the learner's update (as learner_update)
                for k, param in enumerate(agent.model.parameters()):
                    param.add_(
                        torch.sin(torch.arange(param.numel()).view_as(param) + n + k)
                    )
            assert sampler.in_flight() == [0, 0]  # synchronous: nothing ahead
            assert sampler.publish_weights() == n + 1
            assert sampler.in_flight() == [1, 1]  # sent with the new weights
        # the actors' phase times came with the batches: one per actor batch
        times = sampler.phase_times.take()
        assert times["count"] == 2 * batches
        assert {"batch", "env_step", "inference"} <= set(times["seconds"])
    local = build_local_linear_sampler(SEED, WIDTHS)
    try:
        for n in range(batches):
            local.collect_batch()
            assert not columns_equal(snapshot(local.sample_tree), got[n]), n
            learner_update(local.handler, n)
    finally:
        for cage in local.cages:
            cage.close()


def test_version_stamps_and_bounded_requests_with_lag(local_ray):
    """max_lag=1: batch n carries version max(0, n - 1), its lag is at most 1,
    and at most 2 requests wait at each actor; max_lag=None with max_in_flight=2
    never sends a third request although no weights are published."""
    agent = learner_agent()
    with RaySampler(
        build_linear_sampler,
        SEED,
        WIDTHS,
        n_actors=2,
        max_lag=1,
        modules={"model": agent.model},
    ) as sampler:
        for n in range(4):
            batch = sampler.collect_batch(learner_version=sampler.policy_version)
            assert batch.policy_version == max(0, n - 1)
            assert batch.lag == min(n, 1) and batch.lag_mean == batch.lag
            assert all(count <= 2 for count in sampler.in_flight())
            sampler.publish_weights()
        assert sampler.in_flight() == [2, 2]
        with pytest.raises(PolicyLagError, match="behind the learner"):
            sampler.collect_batch(learner_version=sampler.policy_version + 5)
    with RaySampler(
        build_linear_sampler, SEED, WIDTHS, n_actors=2, max_lag=None, max_in_flight=2
    ) as sampler:
        for _ in range(3):
            batch = sampler.collect_batch()
            assert batch.policy_version == 0
            assert sampler.in_flight() == [2, 2]
        assert sampler.state_dict()["actors"][1]["transform"] is not None


def test_a_batch_waiting_for_unpublished_weights_is_a_lag_error(local_ray):
    agent = learner_agent()
    with RaySampler(
        build_linear_sampler, SEED, WIDTHS, n_actors=2, modules={"model": agent.model}
    ) as sampler:
        sampler.collect_batch(learner_version=0)
        with pytest.raises(PolicyLagError, match="deadlock"):
            sampler.collect_batch(learner_version=0)  # never published version 1


def test_a_runner_refuses_any_publisher_but_the_ray_sampler_itself(local_ray):
    """The learner's handler as publisher would publish into shared memory the
    actors never read: they would keep the first weights."""
    from parllel.runners import OnPolicyRunner
    from parllel.torch import TorchHandler

    agent = learner_agent()
    handler = TorchHandler(agent, sum(WIDTHS))
    weights = handler.share_weights()
    try:
        with RaySampler(
            build_linear_sampler,
            SEED,
            WIDTHS,
            n_actors=2,
            modules={"model": agent.model},
        ) as sampler:
            with pytest.raises(ConfigError, match="publisher=sampler"):
                OnPolicyRunner(sampler, object(), 100, publisher=handler)
            with pytest.raises(ConfigError, match="publisher="):
                OnPolicyRunner(sampler, object(), 100)
    finally:
        weights.close()


def test_an_error_in_an_actor_comes_back_with_its_traceback(local_ray):
    with RaySampler(build_failing_sampler, SEED, WIDTHS, n_actors=2) as sampler:
        sampler.collect_batch()
        with pytest.raises(DistributedSamplerError, match="sampler actor 1") as info:
            sampler.collect_batch()
    assert info.value.actor_index == 1
    assert "env failed on purpose" in info.value.worker_traceback
    assert "\x1b[" not in str(info.value)  # no terminal colour codes
    with pytest.raises(DistributedSamplerError, match="cannot build sampler 0"):
        RaySampler(build_raising, SEED, WIDTHS, n_actors=2)


def batch_timeouts(caught: list) -> list[str]:
    return [
        str(w.message)
        for w in list(caught)
        if w.category is ParllelWarning and "returned batch" in str(w.message)
    ]


def test_a_slow_actor_is_reported_by_name(local_ray, tmp_path):
    """Actor 1's envs block until the gate file exists; the gate opens only
    once the timeout warning was issued (no wall-clock race)."""
    gate = tmp_path / "gate"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        def open_gate_when_warned() -> None:
            while not batch_timeouts(caught):
                threading.Event().wait(0.01)
            Path(gate).touch()

        opener = threading.Thread(target=open_gate_when_warned, daemon=True)
        with RaySampler(
            build_gated_sampler,
            SEED,
            WIDTHS,
            str(gate),
            2,  # the cage's first step (its example) passes
            n_actors=2,
            timeout_seconds=0.2,
        ) as sampler:
            opener.start()
            sampler.collect_batch()
            assert sampler.timeouts >= 1
        opener.join(10)
    messages = batch_timeouts(caught)  # (building the samplers may be reported too)
    assert messages and all(m.startswith("sampler actor 1 ") for m in messages)
    assert "timeout_seconds=0.2" in messages[0]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_actors": 0}, "n_actors"),
        ({"max_lag": -1}, "max_lag"),
        ({"max_restarts": -2}, "max_restarts"),
        ({"timeout_seconds": 0}, "timeout_seconds"),
        ({"start_timeout": -1}, "start_timeout"),
        ({"node_ids": ["a"]}, "node_ids"),
        ({"max_in_flight": 0}, "max_in_flight"),
    ],
)
def test_bad_config_is_refused_before_any_actor_starts(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        RaySampler(build_linear_sampler, SEED, WIDTHS, **{"n_actors": 2, **kwargs})


def test_state_of_another_number_of_actors_is_refused(local_ray):
    with RaySampler(build_linear_sampler, SEED, WIDTHS, n_actors=2) as sampler:
        with pytest.raises(ConfigError, match="2 actors"):
            sampler.load_state_dict({"actors": [{}]})
        with pytest.raises(ConfigError, match="publish_weights needs"):
            sampler.publish_weights()


class UpdateModel:
    def __init__(self, model) -> None:
        self.model = model

    def optimize(self, batch, progress=None):
        with torch.no_grad():
            for param in self.model.parameters():
                param.add_(0.01)
        return {}


def test_runner_checkpoints_and_resumes_the_actors_state(local_ray, tmp_path):
    """The runner saves the RaySampler's state as "sampler" and gives it back
    to a new RaySampler's actors on load."""
    from parllel.runners import OnPolicyRunner

    def runner_for(sampler, agent, batches):
        return OnPolicyRunner(
            sampler,
            UpdateModel(agent.model),
            batches * T * sum(WIDTHS),
            checkpoint_dir=tmp_path,
            checkpoint_objects={"model": agent.model},
            publisher=sampler,
            handle_interrupt=False,
        )

    agent = learner_agent()
    with RaySampler(
        build_normalizing_sampler,
        SEED,
        WIDTHS,
        n_actors=2,
        modules={"model": agent.model},
    ) as sampler:
        runner_for(sampler, agent, 2).run()
        saved = sampler.state_dict()
    assert len(saved["actors"]) == 2 and saved["actors"][0]["observation_normalizer"]
    agent = learner_agent()
    with RaySampler(
        build_normalizing_sampler,
        SEED,
        WIDTHS,
        n_actors=2,
        modules={"model": agent.model},
    ) as sampler:
        runner = runner_for(sampler, agent, 3)
        with pytest.warns(ParllelWarning):  # 3 batches instead of 2
            runner.load(tmp_path)
        restored = sampler.state_dict()["actors"]
        for got, expected in zip(restored, saved["actors"]):
            for a, b in zip(
                flatten(got["observation_normalizer"]),
                flatten(expected["observation_normalizer"]),
            ):
                assert np.array_equal(np.asarray(a), np.asarray(b))
        runner.run()
        assert runner.env_steps == 3 * T * sum(WIDTHS)


def flatten(state):
    if isinstance(state, dict):
        return [leaf for key in sorted(state) for leaf in flatten(state[key])]
    return [state]
