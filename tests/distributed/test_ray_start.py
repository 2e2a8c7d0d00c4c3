"""A RaySampler with no Ray running starts its own (actors at the learner's
priority) and shuts it down on close, also when the learner raises inside its
``with`` block."""

from __future__ import annotations

import os
import signal

import pytest

from parllel.distributed import RaySampler
from tests.helpers.ray_helpers import build_linear_sampler

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.timeout(120)


class LearnerFailed(Exception):
    pass


def test_the_sampler_starts_ray_and_stops_it_when_the_learner_raises():
    assert not ray.is_initialized()
    handlers = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]
    with pytest.raises(LearnerFailed):
        with RaySampler(build_linear_sampler, 1, (2, 1), n_actors=2) as sampler:
            assert ray.is_initialized()
            assert ray.cluster_resources()["CPU"] == 2  # n_actors * 1 CPU
            sampler.collect_batch()
            # the actors are not niced below the learner (Ray's default is 15)
            learner = os.getpriority(os.PRIO_PROCESS, 0)
            assert [
                os.getpriority(os.PRIO_PROCESS, pid) for pid in sampler.actor_pids
            ] == [learner, learner]
            raise LearnerFailed
    assert not ray.is_initialized()
    # ray.init's SIGTERM handler does not outlive it (runners install their own)
    assert [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)] == handlers
