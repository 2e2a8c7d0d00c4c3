"""RaySampler faults: an actor killed mid-batch is restarted, its batch dropped
and counted, and training goes on; without restarts left it is an error."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch

from parllel.distributed import RaySampler
from parllel.errors import (
    DistributedSamplerError,
    ParllelWarning,
)
from parllel.runners import Callback, OnPolicyRunner
from tests.helpers.background_helpers import LinearAgent, T
from tests.helpers.ray_helpers import (
    build_hanging_restart_sampler,
    build_hanging_sampler,
    build_stuck_once_sampler,
)

pytest.importorskip("ray")
pytestmark = pytest.mark.timeout(120)

SEED, WIDTHS = 3, (2, 3)
# actor 1's envs take one step for the cage's example, then T per batch:
# the first to reach this step (in batch 2) hangs until its actor is killed
STUCK_FROM = 2 + 2 * T


class UpdateModel:
    """A deterministic stand-in for an algorithm: changes the model each update."""

    def __init__(self, model) -> None:
        self.model, self.calls = model, 0

    def optimize(self, batch, progress=None):
        with torch.no_grad():
            for param in self.model.parameters():
                param.add_(0.01 * (self.calls + 1))
        self.calls += 1
        return {"calls": self.calls}


class KillActor(Callback):
    """After batch ``after`` (batch ``after + 1`` is in flight), kill actor 1
    once its env hangs (the ``stuck`` marker exists): killed before, its
    restarted envs would hang there instead, for good."""

    def __init__(self, ray, sampler, after: int, stuck: Path) -> None:
        self.ray, self.sampler, self.after, self.stuck = ray, sampler, after, stuck
        self.batches = 0
        self.metrics: list[dict] = []

    def on_collect_end(self, runner, batch, traj_infos):
        if self.batches == self.after:
            assert self.sampler.in_flight() == [1, 1]
            while not self.stuck.exists():
                threading.Event().wait(0.01)
            self.ray.kill(self.sampler.actors[1], no_restart=False)
        self.batches += 1

    def on_update_end(self, runner, metrics):
        self.metrics.append(dict(metrics))


# three actor processes start here (two, then a restarted one), each importing
# torch: on a 2-core machine another test worker keeps busy this can take
# minutes; a hang still fails
@pytest.mark.timeout(300)
def test_a_killed_actor_is_replaced_and_training_goes_on(local_ray, tmp_path):
    torch.manual_seed(SEED)
    agent = LinearAgent()
    batches = 5
    with RaySampler(
        build_stuck_once_sampler,
        SEED,
        WIDTHS,
        str(tmp_path / "stuck"),
        STUCK_FROM,
        n_actors=2,
        max_lag=1,
        max_restarts=1,
        modules={"model": agent.model},
    ) as sampler:
        kill = KillActor(local_ray, sampler, after=1, stuck=tmp_path / "stuck")
        runner = OnPolicyRunner(
            sampler,
            UpdateModel(agent.model),
            batches * T * sum(WIDTHS),
            callbacks=[kill],
            handle_interrupt=False,
            publisher=sampler,
        )
        with pytest.warns(ParllelWarning, match="sampler actor 1"):
            runner.run()
        assert runner.env_steps == batches * T * sum(WIDTHS)
        assert (sampler.restarts, sampler.dropped_batches) == (1, 1)
        last = kill.metrics[-1]
        assert last["async/restarts"] == 1 and last["async/dropped_batches"] == 1
        assert last["async/timeouts"] == 0 and last["async/lag_max"] <= 1
        assert last["async/policy_version"] == batches


def test_an_actor_dead_beyond_its_restarts_is_an_error(local_ray, tmp_path):
    torch.manual_seed(SEED)
    agent = LinearAgent()
    with RaySampler(
        build_stuck_once_sampler,
        SEED,
        WIDTHS,
        str(tmp_path / "stuck"),
        STUCK_FROM,
        n_actors=2,
        max_lag=1,
        max_restarts=0,
        modules={"model": agent.model},
    ) as sampler:
        for _ in range(2):
            sampler.collect_batch(learner_version=sampler.policy_version)
            sampler.publish_weights()
        local_ray.kill(sampler.actors[1], no_restart=False)
        with pytest.raises(DistributedSamplerError, match="sampler actor 1") as info:
            sampler.collect_batch(learner_version=sampler.policy_version)
    assert info.value.actor_index == 1


def test_a_restart_that_never_builds_its_sampler_is_an_error(local_ray, tmp_path):
    """Restarted, actor 1 hangs in its builder: once ``start_timeout`` has
    passed, collecting raises naming it instead of waiting for ever."""
    with RaySampler(
        build_hanging_restart_sampler,
        SEED,
        WIDTHS,
        str(tmp_path / "built"),
        n_actors=2,
        max_restarts=1,
        close_timeout=1,
    ) as sampler:
        sampler.collect_batch()
        sampler.start_timeout = 0.5  # (the first start had the default)
        local_ray.kill(sampler.actors[1], no_restart=False)
        with pytest.raises(DistributedSamplerError) as info:
            while True:
                sampler.collect_batch()
    message = str(info.value)
    assert message.startswith("sampler actor 1 ")
    assert "after Ray restarted it within start_timeout=0.5 s" in message
    assert info.value.actor_index == 1 and sampler.dropped_batches == 1


def test_an_actor_that_never_builds_its_sampler_is_an_error(local_ray):
    with pytest.raises(DistributedSamplerError) as info:
        RaySampler(
            build_hanging_sampler,
            SEED,
            WIDTHS,
            n_actors=2,
            start_timeout=0.5,
            close_timeout=1,
        )
    assert str(info.value).startswith("sampler actor 0 has not built its sampler")
    assert "within start_timeout=0.5 s" in str(info.value)
    assert info.value.actor_index == 0


def test_a_killed_actor_with_process_cages_leaves_no_shared_memory(local_ray):
    """The killed actor's tree (shared memory: process cages) is unlinked
    once the restarted actor answers; closing unlinks the others'."""
    from parllel.arrays.shared_memory import list_segments
    from tests.helpers.ray_helpers import build_dict_sampler

    with RaySampler(
        build_dict_sampler, SEED, WIDTHS, True, n_actors=2, max_restarts=1
    ) as sampler:
        sampler.collect_batch()
        pids = sampler.actor_pids
        assert all(list_segments(pid) for pid in pids)  # the actors' trees
        local_ray.kill(sampler.actors[1], no_restart=False)
        with pytest.warns(ParllelWarning):
            while sampler.restarts == 0:
                sampler.collect_batch()
        assert list_segments(pids[1]) == []
        assert sampler.actor_pids[1] != pids[1]
    assert list_segments(pids[0]) == []
