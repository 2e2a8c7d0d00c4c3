"""step_aec_cycle equals PettingZoo's own aec_to_parallel step, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from parllel.multiagent.aec_cycle import aec_cycle_of, step_aec_cycle
from parllel.multiagent.parallel_env import ParallelEnvAdapter


def spread():
    pytest.importorskip("mpe2")
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env(N=3, max_cycles=7)


def adversary():
    pytest.importorskip("mpe2")
    from mpe2 import simple_adversary_v3

    return simple_adversary_v3.parallel_env(max_cycles=5)


def rps():
    pytest.importorskip("pettingzoo")
    from pettingzoo.classic import rps_v2

    return rps_v2.parallel_env(num_actions=3, max_cycles=4)


def assert_same(left, right):
    if isinstance(left, tuple):
        assert len(left) == len(right)
        for one, other in zip(left, right):
            assert_same(one, other)
    elif isinstance(left, dict):
        assert list(left) == list(right)
        for key in left:
            assert_same(left[key], right[key])
    else:
        np.testing.assert_array_equal(np.asarray(left), np.asarray(right))


@pytest.mark.parametrize("make_env", [spread, adversary, rps])
@pytest.mark.parametrize("seed", [0, 5])
def test_the_cycle_equals_the_conversions_step_across_episodes(make_env, seed):
    plain, fast = make_env(), make_env()
    aec_env = aec_cycle_of(fast)
    assert aec_env is not None
    rng = np.random.default_rng(seed)
    for episode in range(3):
        assert_same(plain.reset(seed=seed + episode), fast.reset(seed=seed + episode))
        while plain.agents:
            actions = {
                a: int(rng.integers(0, plain.action_space(a).n)) for a in plain.agents
            }
            expected = plain.step(actions)
            got = step_aec_cycle(fast, aec_env, actions)
            for left, right in zip(expected, got):
                assert_same(dict(left), right)
            assert fast.agents == plain.agents
    plain.close()
    fast.close()


def test_only_pettingzoos_conversion_takes_the_cycle():
    class NativeParallel:
        aec_env = object()

    assert aec_cycle_of(NativeParallel()) is None
    assert aec_cycle_of(spread().aec_env) is None  # an AEC env itself


def test_the_adapter_gives_the_same_steps_with_and_without_the_cycle():
    fast, plain = ParallelEnvAdapter(spread()), ParallelEnvAdapter(spread())
    assert fast._aec_cycle is not None
    plain._aec_cycle = None
    assert_same(fast.reset(seed=3)[0], plain.reset(seed=3)[0])
    rng = np.random.default_rng(1)
    for _ in range(20):
        action = rng.integers(0, 5, 3)
        for left, right in zip(fast.step(action), plain.step(action)):
            assert_same(left, right)
        if not fast.env.agents:
            fast.reset(), plain.reset()
