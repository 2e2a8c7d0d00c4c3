"""Batched gymnasium infos into env-info slots: the vectorized writes of
``write_info_slots`` equal a serial cage's per-env writes (or raise alike)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel.cages.env_info import info_slots, write_info_value
from parllel.errors import EnvError
from parllel.interop.batched_infos import StepInfos, info_row, write_info_slots

N = 5
_batcher = gym.vector.SyncVectorEnv.__new__(gym.vector.SyncVectorEnv)
_batcher.num_envs = N

values = st.one_of(
    st.none(),  # the key is absent from this env's info
    st.integers(-(2**62), 2**62),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.booleans(),
    st.sampled_from(["text", (1, 2)]),
    st.builds(np.int64, st.integers(-(2**62), 2**62)),
    st.builds(np.float32, st.floats(-1e6, 1e6, width=32)),
)


def batched(infos: list[dict]) -> dict:
    """Infos of N envs, batched by gymnasium's own ``_add_info``."""
    out: dict = {}
    for i, info in enumerate(infos):
        out = _batcher._add_info(out, info, i)
    return out


def reference(batch: dict, dtype: np.dtype):
    """A serial cage's writes of each env's (unbatched) value of key ``x``."""
    view = np.zeros(N, dtype)
    ((_, _, exact, zero),) = info_slots({"x": view})
    with np.errstate(over="ignore"):  # a float64 beyond float32: inf, by policy
        for i in range(N):
            value = info_row(batch, i, N).get("x", zero)
            if type(value) in exact:
                view[i] = value
            else:
                write_info_value(view, i, value, "x", i)
    return view


def outcome(write):
    try:
        return "ok", write()
    except EnvError as exc:
        return "error", exc.env_index


@settings(max_examples=150, deadline=None)
@given(
    st.lists(values, min_size=N, max_size=N),
    st.sampled_from([np.float64, np.float32, np.int8, np.int64, np.bool_]),
)
def test_vectorized_info_writes_equal_per_env_writes(per_env, dtype):
    infos = [{} if value is None else {"x": value} for value in per_env]
    try:
        batch = batched(infos)
    except (ValueError, TypeError, OverflowError):
        return  # gymnasium itself cannot batch these values together
    dtype = np.dtype(dtype)

    def vectorized():
        view = np.zeros(N, dtype)
        view[:] = 99  # every row is written, absent keys as 0
        write_info_slots(info_slots({"x": view}), [(batch, np.ones(N, bool))], N, 0)
        return view

    got, expected = outcome(vectorized), outcome(lambda: reference(batch, dtype))
    assert got[0] == expected[0]
    if got[0] == "ok":
        np.testing.assert_array_equal(got[1], expected[1])
    else:
        assert got[1] == expected[1]  # the same env is named


def test_same_step_infos_take_finished_envs_from_final_info():
    step = [{"x": 1.0}, {"x": 2.0}, {"x": 3.0}]
    infos = batched(step[:1] + [{"r": 0}, {"r": 0}] + [{}, {}])  # envs 1, 2: reset info
    infos = _batcher._add_info(
        infos, {"final_info": step[1], "final_obs": np.zeros(2)}, 1
    )
    infos = _batcher._add_info(
        infos, {"final_info": step[2], "final_obs": np.ones(2)}, 2
    )
    done = np.array([False, True, True, False, False])
    step_infos = StepInfos(infos, done, gym.vector.AutoresetMode.SAME_STEP, N)
    assert [step_infos.row(i) for i in range(3)] == step
    assert step_infos.row(3) == {}
    view = np.zeros(N)
    write_info_slots(info_slots({"x": view}), step_infos.sources, N, 0)
    assert view.tolist() == [1.0, 2.0, 3.0, 0.0, 0.0]
    assert info_row(infos, 1, N, skip=("final_obs", "final_info")) == {"r": 0}


@pytest.mark.parametrize("mode", list(gym.vector.AutoresetMode))
def test_without_episode_ends_every_mode_reads_the_top_level(mode):
    infos = batched([{"x": 1}, {}, {"x": 3}, {}, {}])
    step_infos = StepInfos(infos, np.zeros(N, bool), mode, N)
    assert [step_infos.row(i) for i in range(N)] == [{"x": 1}, {}, {"x": 3}, {}, {}]
