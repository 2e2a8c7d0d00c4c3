"""Box actions are clipped to the action space before the env sees them; the
sample tree keeps the unclipped action (SB3's ``collect_rollouts`` does the
same: the env gets ``np.clip(actions, low, high)``, the buffer ``actions``)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from parllel.cages import CageOptions, build_cage
from parllel.cages.spaces import env_action_reader
from parllel.interop import VectorEnvCage
from tests.helpers.cage_helpers import allocate, slots


class ShowAction(gym.Wrapper):
    """Pendulum-v1 (Box(-2, 2, (1,))) that reports the action it received in
    its info (Pendulum clips torques itself, so its outcome cannot tell)."""

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        info["received"] = np.array(action, dtype=np.float64)
        return observation, reward, terminated, truncated, info

    def reset(self, **kwargs):
        observation, info = self.env.reset(**kwargs)
        info["received"] = np.zeros(1)
        return observation, info


def make_pendulum() -> gym.Env:
    return ShowAction(gym.make("Pendulum-v1"))


ACTIONS = np.array([[[5.0], [-3.0]], [[1.5], [-2.5]], [[0.0], [2.0]]], np.float32)


def received_and_stored(
    parallel: str, clip_actions: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Step two Pendulums with :data:`ACTIONS`; the actions the envs received
    and the tree's actions afterwards."""
    T = len(ACTIONS)
    with build_cage(
        make_pendulum,
        2,
        parallel=parallel,
        options=CageOptions(seed=0, clip_actions=clip_actions),
    ) as cage:
        tree = allocate(cage, T, storage="shared" if parallel == "process" else "local")
        try:
            tree.action[:] = ACTIONS
            cage.reset(tree.observation[0])
            for t in range(T):
                cage.step(tree.action[t], slots(tree, t))
            return np.array(tree.env_info.received), np.array(tree.action)
        finally:
            tree.close()


@pytest.mark.parametrize("parallel", ["serial", "process"])
def test_box_actions_are_clipped_for_the_env_and_stored_unclipped(parallel):
    received, stored = received_and_stored(parallel)
    np.testing.assert_array_equal(received, np.clip(ACTIONS, -2.0, 2.0))
    np.testing.assert_array_equal(stored, ACTIONS)  # for the loss's log-prob


@pytest.mark.parametrize("parallel", ["serial", "process"])
def test_clip_actions_false_passes_actions_as_given(parallel):
    received, stored = received_and_stored(parallel, clip_actions=False)
    np.testing.assert_array_equal(received, ACTIONS)
    np.testing.assert_array_equal(stored, ACTIONS)


def test_only_box_spaces_are_clipped():
    discrete = env_action_reader(gym.spaces.Discrete(3), clip_actions=True)
    assert [int(a) for a in discrete(np.array([0, 2]))] == [0, 2]
    box = env_action_reader(gym.spaces.Box(-1, 1, ()), clip_actions=True)
    read = box(np.array([3.0, -0.5], np.float32))
    assert [float(a) for a in read] == [1.0, -0.5]
    assert all(a.shape == () for a in read)  # 0-d arrays, as the space samples


@pytest.mark.parametrize("clip", [True, False])
def test_the_vector_env_cage_clips_as_its_options_say(clip):
    """VectorEnvCage takes the same CageOptions: Box actions reach the vector
    env clipped (the default) or as given; the tree keeps them unclipped."""
    venv = gym.vector.SyncVectorEnv(
        [make_pendulum] * 2, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )
    options = CageOptions(seed=0, clip_actions=clip)
    with VectorEnvCage(venv, options=options) as cage:
        tree = allocate(cage, len(ACTIONS), storage="local")
        try:
            tree.action[:] = ACTIONS
            cage.reset(tree.observation[0])
            for t in range(len(ACTIONS)):
                cage.step(tree.action[t], slots(tree, t))
            received = np.array(tree.env_info.received)
            np.testing.assert_array_equal(np.array(tree.action), ACTIONS)
        finally:
            tree.close()
    expected = np.clip(ACTIONS, -2.0, 2.0) if clip else ACTIONS
    np.testing.assert_array_equal(received, expected)
