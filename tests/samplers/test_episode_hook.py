"""FeedForwardSampler tells a handler with ``episodes_ended`` which episodes ended, at once."""

from __future__ import annotations

import numpy as np
import pytest

from parllel import fields
from parllel.agents import NumpyHandler
from parllel.cages import CageOptions, SerialCage
from parllel.samplers import FeedForwardSampler, sample_tree_from_examples
from tests.helpers.envs import CountingEnv
from tests.samplers.test_samplers_alignment import CountingAgent


class RecordingHandler(NumpyHandler):
    """A NumpyHandler that logs each call to ``episodes_ended`` and each step's observations."""

    def __init__(self, agent, n_envs):
        super().__init__(agent, n_envs)
        self.events: list[tuple[str, object]] = []

    def episodes_ended(self, traj_infos):
        self.events.append(("ended", sorted(t.env_index for t in traj_infos)))

    def step(self, observation, *args, **kwargs):
        self.events.append(("step", np.array(observation[:, 2])))  # time in episode
        super().step(observation, *args, **kwargs)


@pytest.mark.timeout(30)
def test_episodes_ended_names_each_ended_env_before_its_next_action():
    T, B = 12, 3
    with SerialCage(CountingEnv, B, options=CageOptions(seed=0)) as cage:
        handler = RecordingHandler(CountingAgent(), B)
        example = handler.example_outputs(cage.example[fields.OBSERVATION])
        with sample_tree_from_examples(cage.example, example, T, B) as tree:
            sampler = FeedForwardSampler(cage, handler, tree)
            _, completed = sampler.collect_batch()
            _, more = sampler.collect_batch()
    reported = [env for kind, envs in handler.events if kind == "ended" for env in envs]
    assert sorted(reported) == sorted(t.env_index for t in completed + more)
    assert reported, "CountingEnv episodes last 3 to 7 steps"
    # every report is followed by a step whose observation of those envs is step 0
    for i, (kind, envs) in enumerate(handler.events):
        if kind == "ended" and i + 1 < len(handler.events):
            next_kind, times = handler.events[i + 1]
            assert next_kind == "step"
            assert all(times[env] == 0 for env in envs)
