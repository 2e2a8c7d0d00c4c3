"""VectorEnvCage: a gymnasium vector env as a cage gives a SerialCage's batches.

Each parity test runs the same env factory, seeds and actions through a
:class:`~parllel.cages.SerialCage` and through a ``VectorEnvCage`` over a
gymnasium vector env, and asserts that every leaf of the sample tree
(observations, final observations, rewards, flags, env info, actions,
values, GAE advantages and returns) and every TrajInfo are equal.
"""

from __future__ import annotations

import multiprocessing
from functools import partial

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from parllel import fields
from parllel.agents import NumpyHandler, ScriptedAgent
from parllel.agents.scripted import sample_actions
from parllel.arrays import Array
from parllel.cages import CageOptions, SerialCage, TrajInfo
from parllel.cages.cage import CageState
from parllel.errors import (
    ArrayClosedError,
    CageStateError,
    ClosedCageError,
    ConfigError,
    EnvAttributeError,
    EnvError,
    InvalidActionError,
)
from parllel.interop import VectorEnvCage
from parllel.samplers import (
    AlternatingSampler,
    FeedForwardSampler,
    sample_tree_from_examples,
)
from parllel.transforms import EstimateAdvantage
from tests.cages.test_cage_kept_infos import _script as kept_infos_script
from tests.helpers.cage_helpers import allocate, run, slots
from tests.helpers.envs import CountingEnv
from tests.helpers.interop_envs import make_count_env
from tests.helpers.space_envs import Interval, SpaceEnv

SAME, DISABLED = AutoresetMode.SAME_STEP, AutoresetMode.DISABLED
T, B, SEED = 16, 4, 11


class SeededCountingEnv(CountingEnv):
    """CountingEnv whose seeded reset restarts its counters.

    gymnasium's contract (a seeded reset determines the env's state), which
    the VectorEnvCage relies on for a wrapped vector env: without ``env_fns``
    to build a probe env from, it resets and steps the vector env itself.
    """

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.episode, self.total_steps = -1, 0
        return super().reset(seed=seed, options=options)


def make_cartpole():
    return gym.make("CartPole-v1", max_episode_steps=15)


def make_counting_dict():
    """Dict observations and actions; terminations and TimeLimit truncations."""
    env = CountingEnv(min_length=3, max_length=8, observation="dict", action="dict")
    return gym.wrappers.TimeLimit(env, max_episode_steps=6)


def vector(factory, n=B, mode=SAME, **kwargs):
    return SyncVectorEnv([factory] * n, autoreset_mode=mode, **kwargs)


# -- comparing -------------------------------------------------------------------


def leaves(tree) -> dict[str, np.ndarray]:
    """A copy of every leaf, padding included."""
    return {
        path: np.array(leaf.padded_ndarray() if isinstance(leaf, Array) else leaf)
        for path, leaf in tree.items_flat()
    }


def assert_same_arrays(got: dict, expected: dict) -> None:
    assert got.keys() == expected.keys()
    for key in expected:
        assert got[key].dtype == expected[key].dtype, key
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)


def assert_same_trajs(got: list[TrajInfo], expected: list[TrajInfo]) -> None:
    assert [t.to_dict() for t in got] == [t.to_dict() for t in expected]


def state_value(observation):
    """A value that depends on the observation (so truncations bootstrap)."""
    state = (
        observation["state"]
        if "state" in getattr(observation, "keys", list)()
        else observation
    )
    return 10.0 * state[:, 0] + state[:, 2]


def collect(cages, n_batches=4, decorrelation_steps=0, alternating=False):
    """Batches of a sampler with seeded random actions and GAE."""
    cages = cages if isinstance(cages, list) else [cages]
    space, rng = cages[0].spaces.action, np.random.default_rng(7)
    n_envs = sum(cage.n_envs for cage in cages)
    agent = ScriptedAgent(
        lambda obs, prev_action, prev_reward: sample_actions(
            space, len(state_value(obs)), rng
        ),
        value_fn=state_value,
    )
    handler = NumpyHandler(agent, n_envs)
    example = handler.example_outputs(cages[0].example[fields.OBSERVATION])
    tree = sample_tree_from_examples(
        cages[0].example, example, T, n_envs, "local", previous=True
    )
    gae = EstimateAdvantage(tree, gamma=0.9, gae_lambda=0.8)
    if alternating:
        sampler = AlternatingSampler(cages, handler, tree, transform=gae)
    else:
        sampler = FeedForwardSampler(
            cages,
            handler,
            tree,
            transform=gae,
            decorrelation_steps=decorrelation_steps,
            seed=3,
        )
    batches, trajs = [], []
    for _ in range(n_batches):
        batch, completed = sampler.collect_batch()
        batches.append(leaves(batch))
        trajs += completed
    tree.close()
    return batches, trajs


def assert_collect_equal(factory, vector_env, n_batches=4, decorrelation_steps=0):
    with SerialCage(
        factory, vector_env.num_envs, options=CageOptions(seed=SEED)
    ) as cage:
        expected = collect(cage, n_batches, decorrelation_steps)
    with VectorEnvCage(vector_env, options=CageOptions(seed=SEED)) as cage:
        got = collect(cage, n_batches, decorrelation_steps)
    for got_batch, expected_batch in zip(got[0], expected[0]):
        assert_same_arrays(got_batch, expected_batch)
    assert_same_trajs(got[1], expected[1])
    return expected


# -- parity with SerialCage ------------------------------------------------------------


@pytest.mark.parametrize("mode", [SAME, DISABLED], ids=["same_step", "disabled"])
@pytest.mark.parametrize("decorrelation_steps", [0, 5])
def test_cartpole_batches_equal_serial_cage(mode, decorrelation_steps):
    batches, trajs = assert_collect_equal(
        make_cartpole, vector(make_cartpole, mode=mode), 4, decorrelation_steps
    )
    truncated = np.concatenate([b["truncated"] for b in batches])
    terminated = np.concatenate([b["terminated"] for b in batches])
    assert truncated.sum() >= 4 and terminated.sum() >= 1  # both kinds of ends
    assert len(trajs) >= 8
    # truncations bootstrap from the final observation's value
    final_value = np.concatenate([b["final_value"] for b in batches])
    assert (final_value[truncated & ~terminated] != 0).all()


@pytest.mark.parametrize("mode", [SAME, DISABLED], ids=["same_step", "disabled"])
def test_dict_spaces_and_infos_equal_serial_cage(mode):
    # copy=False: the vector env reuses its observation buffers between calls
    batches, trajs = assert_collect_equal(
        make_counting_dict,
        vector(make_counting_dict, mode=mode, copy=False),
        3,
        decorrelation_steps=4,
    )
    assert {
        "observation.state",
        "observation.count",
        "action.move",
        "action.force",
    } <= set(batches[0])
    assert {"env_info.t", "env_info.ale.lives"} <= set(batches[0])
    assert batches[0]["env_info.t"].max() > 0
    # TrajInfo: the unstored info entry ("note") and the reset info
    assert trajs and all(t.extra == {"note": "text"} for t in trajs)
    assert all(t.reset_info == {"t": 0} for t in trajs)
    assert any(t.terminated for t in trajs) and any(t.truncated for t in trajs)


@pytest.mark.parametrize("mode", [SAME, DISABLED], ids=["same_step", "disabled"])
def test_async_vector_env_equals_serial_cage_and_its_workers_end_on_close(mode):
    venv = AsyncVectorEnv([make_cartpole] * 2, autoreset_mode=mode, context="fork")
    processes = list(venv.processes)
    with SerialCage(make_cartpole, 2, options=CageOptions(seed=SEED)) as cage:
        expected = collect(cage, 2, decorrelation_steps=3)
    cage = VectorEnvCage(venv, options=CageOptions(seed=SEED))
    try:
        got = collect(cage, 2, decorrelation_steps=3)
        assert cage.get_attr("gravity") == [9.8, 9.8]
        with pytest.raises(ConfigError, match="env_indices"):
            cage.get_attr("gravity", env_indices=[1])
        with pytest.raises(ConfigError, match="apply.*SyncVectorEnv"):
            cage.apply(lambda env: env.unwrapped.gravity)
    finally:
        cage.close()
    for got_batch, expected_batch in zip(got[0], expected[0]):
        assert_same_arrays(got_batch, expected_batch)
    assert_same_trajs(got[1], expected[1])
    assert venv.closed
    for process in processes:
        process.join(timeout=10)
        assert not process.is_alive()
    assert not set(multiprocessing.active_children()) & set(processes)
    cage.close()  # idempotent


def test_alternating_sampler_over_two_vector_env_cages_equals_serial_cages():
    def two(make):
        return [make(0), make(2)]

    serial = two(
        lambda offset: SerialCage(
            make_cartpole, 2, options=CageOptions(seed=SEED, env_offset=offset)
        )
    )
    expected = collect(serial, 3, alternating=True)
    for cage in serial:
        cage.close()
    cages = two(
        lambda offset: VectorEnvCage(
            vector(make_cartpole, 2), options=CageOptions(seed=SEED, env_offset=offset)
        )
    )
    got = collect(cages, 3, alternating=True)
    for cage in cages:
        cage.close()
    for got_batch, expected_batch in zip(got[0], expected[0]):
        assert_same_arrays(got_batch, expected_batch)
    assert_same_trajs(got[1], expected[1])
    assert {t.env_index for t in got[1]} == {0, 1, 2, 3}


class StepRecordingTrajInfo(TrajInfo):
    """Overrides step: the cage then reports every env's step to it."""

    def step(self, observation, action, reward, terminated, truncated, env_info):
        super().step(observation, action, reward, terminated, truncated, env_info)
        self.extra.setdefault("seen", []).append(
            (float(np.sum(observation, dtype=np.float64)), int(action), reward,
             terminated, truncated, int(env_info.get("t", -1)))
        )  # fmt: skip


class InfoEnv(CountingEnv):
    """Infos with ints, bools, floats, keys that come and go, and nested dicts.

    A key keeps its type: gymnasium batches each key into an array of the
    type of the first env's value in that step (an int key that is sometimes
    a float would lose its fraction inside the vector env).
    """

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        info = {"t": self.t, "odd": self.t % 2 == 1, "nested": {"e": self.episode}}
        if self.t % 3:
            info["sometimes"] = 0.5 * self.t
        return observation, reward, terminated, truncated, info


@pytest.mark.parametrize("mode", [SAME, DISABLED], ids=["same_step", "disabled"])
@pytest.mark.parametrize("traj_info_type", [TrajInfo, StepRecordingTrajInfo])
def test_raw_steps_infos_and_traj_infos_equal_serial_cage(mode, traj_info_type):
    factory = partial(InfoEnv, min_length=2, max_length=6, terminal=False)
    options = CageOptions(seed=SEED, traj_info_type=traj_info_type)
    with SerialCage(factory, 3, options=options) as cage:
        expected = run(cage, 20)
    with VectorEnvCage(vector(factory, 3, mode), options=options) as cage:
        got = run(cage, 20)
    assert_same_arrays(got[0], expected[0])
    assert_same_trajs(got[1], expected[1])
    assert {"env_info.t", "env_info.odd", "env_info.sometimes"} <= set(got[0])
    assert any("nested" in t.extra for t in got[1])
    if traj_info_type is StepRecordingTrajInfo:
        assert all(len(t.extra["seen"]) == t.length for t in got[1])


def test_custom_and_tuple_spaces_equal_serial_cage():
    space = Interval(-2.0, 3.0)
    observation = gym.spaces.Dict(
        {
            "i": space,
            "pair": gym.spaces.Tuple(
                (gym.spaces.Discrete(4), gym.spaces.MultiBinary(2))
            ),
        }
    )
    factory = partial(
        SpaceEnv, observation, gym.spaces.Tuple((space, gym.spaces.Discrete(3)))
    )
    with SerialCage(factory, 3, options=CageOptions(seed=SEED)) as cage:
        expected = run(cage, 12)
    with VectorEnvCage(vector(factory, 3), options=CageOptions(seed=SEED)) as cage:
        got = run(cage, 12)
    assert_same_arrays(got[0], expected[0])
    assert_same_trajs(got[1], expected[1])
    assert "observation.i.1" in got[0] and "action.0.1" in got[0]


class EditedInfos(gym.vector.VectorWrapper):
    """Rewrites the infos of the vector env it wraps, as other libraries shape them."""

    def __init__(self, env, edit):
        super().__init__(env)
        self.edit = edit

    def reset(self, *, seed=None, options=None):
        observation, infos = self.env.reset(seed=seed, options=options)
        return observation, self.edit(infos)

    def step(self, actions):
        *results, infos = self.env.step(actions)
        return (*results, self.edit(infos))


def without_masks(infos):
    """Every key for every env, no ``_key`` masks (as EnvPool returns infos)."""
    return {
        key: without_masks(value) if isinstance(value, dict) else value
        for key, value in infos.items()
        if not (key.startswith("_") and key[1:] in infos)
    }


def test_infos_without_masks_fill_the_same_slots():
    factory = partial(SeededCountingEnv, terminal=False)
    with SerialCage(factory, 3, options=CageOptions(seed=SEED)) as cage:
        expected = run(cage, 20)
    venv = EditedInfos(vector(factory, 3), without_masks)
    with VectorEnvCage(venv, options=CageOptions(seed=SEED)) as cage:
        got = run(cage, 20)
        assert cage.get_attr("min_length") == [3] * 3  # through the wrapper
    assert_same_arrays(got[0], expected[0])
    assert [t.extra for t in got[1]] == [t.extra for t in expected[1]]
    assert [t.length for t in got[1]] == [t.length for t in expected[1]]


def test_wrapped_vector_env_equals_serial_cage():
    venv = gym.wrappers.vector.RecordEpisodeStatistics(vector(make_cartpole, 3))
    with SerialCage(make_cartpole, 3, options=CageOptions(seed=SEED)) as cage:
        expected = run(cage, 40)
    with VectorEnvCage(venv, options=CageOptions(seed=SEED)) as cage:
        got = run(cage, 40)
        assert cage.get_attr("gravity") == [9.8] * 3
    assert_same_arrays(got[0], expected[0])
    stats = [(t.length, t.return_, t.discounted_return, t.truncated) for t in got[1]]
    assert stats == [
        (t.length, t.return_, t.discounted_return, t.truncated) for t in expected[1]
    ]
    assert len(venv.length_queue) == len(got[1])  # the wrapper saw the same episodes


def test_same_step_vector_env_without_final_observations_is_an_env_error():
    def drop_final_obs(infos):
        return {k: v for k, v in infos.items() if k not in ("final_obs", "_final_obs")}

    factory = partial(CountingEnv, min_length=2, max_length=2)
    venv = EditedInfos(vector(factory, 2), drop_final_obs)
    with VectorEnvCage(venv, options=CageOptions(seed=0, env_offset=3)) as cage:
        tree = allocate(cage, 2, storage="local")
        try:
            cage.reset(tree.observation[0])
            cage.step(tree.action[0], slots(tree, 0))
            with pytest.raises(EnvError, match=r"envs \[3, 4\].*final_obs"):
                cage.step(tree.action[1], slots(tree, 1))
        finally:
            tree.close()


@pytest.mark.parametrize("mode", [SAME, DISABLED], ids=["same_step", "disabled"])
def test_reset_seeds_options_and_kept_infos_equal_serial_cage(mode):
    serial = SerialCage(make_count_env, 4, options=CageOptions(keep_infos=True))
    expected = kept_infos_script(serial)
    serial.close()
    with VectorEnvCage(
        vector(make_count_env, 4, mode), options=CageOptions(keep_infos=True)
    ) as cage:
        got = kept_infos_script(cage)
    assert got == expected
    assert got[0][2].reset[0] == {"options": {"o": 1}}  # the reset info, kept


# -- refusals --------------------------------------------------------------------------


def test_next_step_vector_env_is_refused_and_left_open():
    venv = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
    assert venv.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    with pytest.raises(ConfigError, match="NEXT_STEP") as caught:
        VectorEnvCage(venv)
    message = str(caught.value)
    assert (
        "SAME_STEP" in message and "vector_kwargs" in message and "make_vec" in message
    )
    assert not venv.closed  # still the caller's
    venv.reset(seed=0)
    venv.close()


def test_missing_autoreset_mode_and_wait_mode_and_non_vector_envs_are_refused():
    venv = vector(make_cartpole, 2)
    try:
        with pytest.raises(ConfigError, match="wait.*every env"):
            VectorEnvCage(venv, options=CageOptions(reset_mode="wait"))
        with pytest.raises(ConfigError, match="next_step.*'auto'"):
            VectorEnvCage(venv, options=CageOptions(reset_mode="next_step"))
        del venv.metadata["autoreset_mode"]
        with pytest.raises(ConfigError, match="no metadata"):
            VectorEnvCage(venv)
    finally:
        venv.close()
    with pytest.raises(ConfigError, match="closed"):
        VectorEnvCage(venv)
    with pytest.raises(ConfigError, match="VectorEnv.*SerialCage"):
        VectorEnvCage(make_cartpole())
    with pytest.raises(ConfigError, match="env_factory must be a callable"):
        SerialCage("not a factory", 2)  # the check moved from Cage to SerialCage


def test_bad_actions_call_order_and_closed_cage():
    cage = VectorEnvCage(vector(make_counting_dict, 2), options=CageOptions(seed=0))
    tree = allocate(cage, 2, storage="local")
    try:
        assert cage.waiting_envs() == [0, 1]
        with pytest.raises(CageStateError, match="before its first reset"):
            cage.step(tree.action[0], slots(tree, 0))
        cage.reset(tree.observation[0], env_indices=[1])
        assert cage.waiting_envs() == [0]
        with pytest.raises(CageStateError, match="env 0 was stepped before"):
            cage.step(tree.action[0], slots(tree, 0))
        cage.reset(tree.observation[0])
        assert cage.waiting_envs() == []
        wrong_shape = {
            "move": np.zeros(3, np.int64),
            "force": np.zeros((3, 1), np.float32),
        }
        with pytest.raises(InvalidActionError, match="shape"):
            cage.step(wrong_shape, slots(tree, 0))
        wrong_kind = {
            "move": np.zeros(2, np.float32),
            "force": np.zeros((2, 1), np.float32),
        }
        with pytest.raises(InvalidActionError, match="dtype"):
            cage.step(wrong_kind, slots(tree, 0))
        cage.step_async(tree.action[0], slots(tree, 0))
        with pytest.raises(CageStateError, match="await_step"):
            cage.step_async(tree.action[0], slots(tree, 0))
        cage.await_step()
        with pytest.raises(CageStateError, match="nothing is pending"):
            cage.await_step()
    finally:
        cage.close()
        tree.close()
    assert cage.vector_env.closed
    cage.close()  # idempotent
    with pytest.raises(ClosedCageError):
        cage.step(tree.action[0], slots(tree, 0))
    with pytest.raises(ClosedCageError):
        cage.reset(tree.observation[0])
    with pytest.raises(ClosedCageError):
        cage.get_attr("t")


@pytest.mark.parametrize(
    "bad", ["text", 2**60 + 1], ids=["string", "int_beyond_float64"]
)
def test_info_value_that_does_not_fit_its_slot_raises_env_info_error(bad):
    def info(t, episode):
        return {"x": bad if t == 3 else 1.0}

    factory = partial(
        SpaceEnv, gym.spaces.Discrete(3), gym.spaces.Discrete(2), 5, 5, info
    )
    cage = VectorEnvCage(vector(factory, 2), options=CageOptions(seed=0, env_offset=10))
    tree = allocate(cage, 4, storage="local")
    try:
        cage.reset(tree.observation[0])
        for t in range(2):
            cage.step(tree.action[t], slots(tree, t))
        with pytest.raises(EnvError, match="env 10: info key 'x'") as caught:
            cage.step(tree.action[2], slots(tree, 2))
        assert caught.value.env_index == 10
    finally:
        cage.close()
        tree.close()


# -- env access ---------------------------------------------------------------------------


def test_get_attr_set_attr_call_and_render_reach_the_envs():
    # the attributes live on the CountingEnv, behind a TimeLimit wrapper
    with VectorEnvCage(
        vector(make_counting_dict, 3), options=CageOptions(seed=0, env_offset=5)
    ) as cage:
        assert cage.get_attr("min_length") == [3] * 3
        cage.set_attr("min_length", [1, 2, 3])
        assert cage.get_attr("min_length") == [1, 2, 3]
        cage.set_attr("min_length", 7, env_indices=[2])  # SyncVectorEnv: a subset
        assert cage.get_attr("min_length", env_indices=[2, 0]) == [7, 1]
        assert cage.call("get_wrapper_attr", "min_length", env_indices=[1]) == [2]
        assert cage.get_attr("_max_episode_steps") == [6] * 3  # the TimeLimit's
        assert cage.apply(lambda env, k: env.unwrapped.min_length * k, 10) == [
            10,
            20,
            70,
        ]
        assert cage.apply(type, env_indices=[1]) == [gym.wrappers.TimeLimit]
        with pytest.raises(EnvAttributeError, match="env 6"):
            cage.get_attr("no_such_thing", env_indices=[1])
        with pytest.raises(EnvAttributeError, match="no_such_thing"):
            cage.get_attr("no_such_thing")
        with pytest.raises(ConfigError, match="out of range"):
            cage.get_attr("min_length", env_indices=[3])
        tree = allocate(cage, 1, storage="local")
        cage.reset(tree.observation[0])
        cage.step(tree.action[0], slots(tree, 0))
        tree.close()
        frames = cage.render()
        assert [frame.shape for frame in frames] == [(2, 2, 3)] * 3
        assert all((frame == 1).all() for frame in frames)  # t = 1 everywhere


def test_slots_of_a_closed_tree_are_an_array_closed_error():
    with VectorEnvCage(vector(make_cartpole, 2), options=CageOptions(seed=0)) as cage:
        tree = allocate(cage, 4)  # shared memory: views taken after close are read-only
        cage.reset(tree.observation[0])
        cage.step(tree.action[0], slots(tree, 0))
        tree.close()
        with pytest.raises(ArrayClosedError, match="slot '(action|observation|reward)"):
            cage.step(tree.action[1], slots(tree, 1))
        with pytest.raises(ArrayClosedError, match="'observation'"):
            cage.reset(tree.observation[0])
        assert cage.state is CageState.IDLE
