"""Env-info slots (float64 unless declared, checked writes naming the key),
TrajInfo.extra, the control-row path for episodes, and reset info."""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import numpy as np
import pytest

from parllel import fields
from parllel.cages import CageOptions, ProcessCage, ProcessLayout, SerialCage, TrajInfo
from parllel.cages.env_group import EnvGroup
from parllel.cages.env_info import numeric_info_example
from parllel.cages.process import channel
from parllel.errors import EnvError
from parllel.tree import ArrayDict, buffer_from_example
from tests.helpers.cage_helpers import allocate, run, slots
from tests.helpers.space_envs import SpaceEnv

T = 10
BOX = gym.spaces.Box(-1, 1, (2,), np.float32)
DISCRETE = gym.spaces.Discrete(3)


def info_env(info, **kwargs):
    """A SpaceEnv factory whose step info is ``info(t, episode)``."""
    return partial(SpaceEnv, BOX, DISCRETE, info=info, **kwargs)


def cages(factory, n_envs=2, options=CageOptions(seed=0)):
    """A serial cage and process cages (workers only; main share + worker)."""
    yield SerialCage(factory, n_envs, options=options)
    for layout in (
        ProcessLayout(n_workers=1),
        ProcessLayout(main_process_envs=1, n_workers=1),
    ):
        yield ProcessCage(
            factory, n_envs, layout=layout, options=options, start_method="fork"
        )


def run_closing(cage):
    """Like ``run``, closing the buffers also when a step raises."""
    tree = allocate(cage, T)
    try:
        cage.reset(tree.observation[0])
        for t in range(T):
            tree.action[t] = 0
            cage.step(tree.action[t], slots(tree, t))
    finally:
        tree.close()


def int_then_float(t, episode):
    return {"x": 1 if t == 1 else t + 0.5, "flag": t % 2 == 0}


def test_numeric_info_is_float64_unless_declared():
    info = {"a": 1, "b": np.int8(2), "c": True, "d": np.zeros(3, np.int32), "s": "x"}
    example = numeric_info_example(info)
    assert set(example) == {"a", "b", "c", "d"}
    assert all(np.asarray(v).dtype == np.float64 for v in example.values())
    assert example["d"].shape == (3,)
    declared = numeric_info_example(info, dtypes={"a": np.int32})
    assert np.asarray(declared["a"]).dtype == np.int32
    with pytest.raises(KeyError, match="'zz'"):
        numeric_info_example(info, dtypes={"zz": np.int32})


def test_int_then_float_info_is_kept_exactly():
    for cage in cages(info_env(int_then_float)):
        with cage:
            arrays, trajs = run(cage, T)
        x = arrays["env_info.x"]
        assert x.dtype == np.float64
        fractions = x - np.floor(x)
        assert (fractions == 0.5).sum() > 0  # would be truncated in an int slot
        assert set(np.unique(arrays["env_info.flag"]).tolist()) <= {0.0, 1.0}
        assert all(traj.extra == {} for traj in trajs)  # everything was stored


@pytest.mark.parametrize(
    ("later", "match"),
    [
        ("text", r"'x' = 'text' \(str\) is not a number"),
        (None, r"'x' = None"),
        (np.zeros(2), r"'x' .* has shape \(2,\)"),
        (2**60 + 1, r"'x' = 1152921504606846977 \(int\) would not be stored exactly"),
        (1 + 2j, r"'x' = \(1\+2j\) \(complex\) is not a number"),
        (np.complex64(1), r"'x' .* has dtype complex64"),
    ],
    ids=["string", "none", "shape", "huge-int", "complex", "numpy-complex"],
)
def test_info_value_that_does_not_fit_names_the_key(later, match):
    factory = info_env(lambda t, episode: {"x": 1.0 if t == 1 else later})
    for cage in cages(factory):
        with cage, pytest.raises(EnvError, match=match) as info:
            run_closing(cage)
        assert "env " in str(info.value) and "slot of dtype float64" in str(info.value)
        if isinstance(cage, SerialCage):
            assert isinstance(info.value, EnvError)
            assert info.value.env_index in (0, 1)


def _run_declared(cage, dtypes):
    example = cage.example
    tree = allocate(cage, T)
    tree[fields.ENV_INFO].close()
    tree[fields.ENV_INFO] = buffer_from_example(
        numeric_info_example(example[fields.ENV_INFO], dtypes=dtypes),
        (T, cage.n_envs),
        "shared",
    )
    try:
        cage.reset(tree.observation[0])
        for t in range(T):
            tree.action[t] = 0
            cage.step(tree.action[t], slots(tree, t))
        return np.array(tree.env_info.x.to_ndarray())
    finally:
        tree.close()


def test_declared_integer_slot_takes_integral_values_only():
    factory = info_env(lambda t, episode: {"x": float(t)})
    for cage in cages(factory):
        with cage:
            x = _run_declared(cage, {"x": np.int16})
        assert x.dtype == np.int16 and x.max() >= 2
    factory = info_env(lambda t, episode: {"x": 1 if t == 1 else 2.5})
    for cage in cages(factory):
        with cage, pytest.raises(EnvError, match=r"'x' = 2.5 .* dtype int16"):
            _run_declared(cage, {"x": np.int16})


def test_declared_float32_slot_rounds_floats():
    factory = info_env(lambda t, episode: {"x": 0.1 * t})
    with SerialCage(factory, 1, options=CageOptions(seed=0)) as cage:
        x = _run_declared(cage, {"x": np.float32})
    assert x.dtype == np.float32 and np.isclose(x.max(), 0.1 * x.max() / 0.1)


def test_missing_key_writes_zero_and_late_keys_reach_extra():
    def info(t, episode):
        return {"x": 5.0} if t == 1 else {"late": t, "note": "n"}

    with SerialCage(info_env(info), 2, options=CageOptions(seed=0)) as cage:
        arrays, trajs = run(cage, T)
    assert set(np.unique(arrays["env_info.x"]).tolist()) <= {0.0, 5.0}
    assert trajs and all(set(traj.extra) == {"late", "note"} for traj in trajs)


def test_without_info_slots_extra_holds_the_whole_last_info():
    with SerialCage(info_env(int_then_float), 1, options=CageOptions(seed=0)) as cage:
        tree = allocate(cage, T)
        cage.reset(tree.observation[0])
        trajs = []
        for t in range(T):
            tree.action[t] = 0
            step_slots = slots(tree, t)
            del step_slots[fields.ENV_INFO]
            trajs += cage.step(tree.action[t], step_slots)
        tree.close()
    assert trajs and all(set(traj.extra) == {"x", "flag"} for traj in trajs)


def test_finished_episodes_with_stored_info_fit_the_control_row():
    group = EnvGroup(
        info_env(int_then_float, max_length=2), {}, (0, 1), None, CageOptions()
    )
    info_example = numeric_info_example(group.example_step()[fields.ENV_INFO])
    tree = ArrayDict(
        {
            fields.OBSERVATION: buffer_from_example(BOX.sample(), (2,)),
            fields.REWARD: buffer_from_example(np.float32(0), (2,)),
            fields.TERMINATED: buffer_from_example(False, (2,)),
            fields.TRUNCATED: buffer_from_example(False, (2,)),
            fields.ENV_INFO: buffer_from_example(info_example, (2,)),
        }
    ).to_ndarray()
    group.reset(tree[fields.OBSERVATION])
    completed = []
    for _ in range(3):
        completed += group.step(np.zeros(2, np.int64), tree)
    group.close()
    assert completed
    for traj in completed:
        assert traj.extra == {}
        traj.reset_info = {}  # SpaceEnv has reset info (tested below); this one not
    row = np.zeros(channel.CONTROL_WIDTH, np.int64)
    assert channel.record_episodes(row, completed)
    assert [t.to_dict() for t in channel.read_episodes(row, lambda i: TrajInfo(i))] == [
        t.to_dict() for t in completed
    ]
    # a partial episode (a life lost under episodic life) keeps its flag: pickled
    completed[0].partial = True
    assert not channel.record_episodes(row, completed)


@pytest.mark.parametrize("reset_mode", ["auto", "wait"])
def test_reset_info_reaches_the_episodes_traj_info(reset_mode):
    for cage in cages(
        info_env(None), n_envs=3, options=CageOptions(seed=0, reset_mode=reset_mode)
    ):
        with cage:
            tree = allocate(cage, T)
            cage.reset(tree.observation[0])
            trajs = []
            for t in range(T):
                tree.action[t] = 0
                trajs += cage.step(tree.action[t], slots(tree, t))
                if reset_mode == "wait" and cage.waiting_envs():
                    cage.reset(tree.observation[t + 1], env_indices=cage.waiting_envs())
            tree.close()
        assert len(trajs) > 3
        for env in range(3):
            episodes = [tr.reset_info["episode"] for tr in trajs if tr.env_index == env]
            # the probe step used a probe env: every env's resets count from 0
            assert episodes == list(range(len(episodes)))
