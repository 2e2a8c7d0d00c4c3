"""Load balancing: the balancer's decisions, and env moves that change nothing."""

from __future__ import annotations

import warnings
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from gymnasium.utils import EzPickle
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel.cages import (
    CageOptions,
    LoadBalancer,
    ProcessCage,
    ProcessLayout,
    SerialCage,
)
from parllel.errors import ConfigError, ParllelWarning
from tests.helpers.cage_helpers import allocate, run, slots
from tests.helpers.envs import CountingEnv

ROOT = Path(__file__).resolve().parents[2]

T = 20


# -- the balancer's decisions ---------------------------------------------------
def simulate(per_env: list[float], counts: list[int], steps: int, balancer):
    """Step times proportional to env counts; apply the balancer's moves."""
    counts = list(counts)
    moves = []
    for step in range(steps):
        seconds = [c * s for c, s in zip(counts, per_env)]
        move = balancer.propose(seconds, counts)
        if move is not None:
            giver, taker, count = move
            assert abs(giver - taker) == 1
            assert 0 < count < counts[giver]
            counts[giver] -= count
            counts[taker] += count
            moves.append(step)
    return counts, moves


@settings(max_examples=60, deadline=None)
@given(
    per_env=st.lists(st.floats(1.0, 3.0), min_size=2, max_size=4),
    total=st.integers(4, 64),
)
def test_balancer_converges_near_the_best_split_and_stops(per_env, total):
    processes = len(per_env)
    if total < processes:
        total = processes
    counts = [total // processes] * processes
    counts[-1] += total - sum(counts)
    balancer = LoadBalancer(interval=2, margin=2.0)
    final, moves = simulate(per_env, counts, 400, balancer)
    assert sum(final) == total and min(final) >= 1
    assert not [m for m in moves if m >= 300]  # settled: no ping-pong
    # neighbours end within the margin of each other (unless the slower has one env)
    for p in range(processes - 1):
        a, b = final[p] * per_env[p], final[p + 1] * per_env[p + 1]
        if (final[p] if a > b else final[p + 1]) >= 2:
            assert abs(a - b) <= per_env[p] + per_env[p + 1] + 1e-9


def test_balancer_moves_from_slow_to_fast_and_leaves_even_split_alone():
    balancer = LoadBalancer(interval=1)
    assert balancer.propose([1.0, 1.0], [8, 8]) is None
    # 8 envs at 2/8 against 8 at 1/8: moving 3 gives 1.25 against 1.375
    assert balancer.propose([2.0, 1.0], [8, 8]) == (0, 1, 3)
    assert balancer.propose([1.0, 3.0, 1.0], [8, 8, 8]) in ((1, 0, 4), (1, 2, 4))
    assert balancer.propose([9.0, 1.0], [1, 8]) is None  # keeps its last env
    assert balancer.propose([9.0, 1.0], [2, 8]) == (0, 1, 1)


def test_balancer_averages_over_its_interval():
    balancer = LoadBalancer(interval=4)
    moves = [balancer.propose(s, [2, 2]) for s in ([3, 1], [1, 1], [1, 1], [1, 1])]
    assert moves == [None, None, None, None]  # one slow step is noise
    moves = [balancer.propose(s, [2, 2]) for s in ([4, 1], [4, 1], [4, 1], [4, 1])]
    assert moves[:3] == [None] * 3 and moves[3] is not None


def test_bad_rebalance_argument_is_refused():
    with pytest.raises(ConfigError, match="rebalance"):
        ProcessCage(CountingEnv, 2, layout=ProcessLayout(rebalance="yes"))


def test_balancer_rejects_bad_settings():
    with pytest.raises(ValueError):
        LoadBalancer(interval=0)
    with pytest.raises(ValueError):
        LoadBalancer(margin=0.5)


# -- moves inside a ProcessCage -----------------------------------------------------
class ScriptedBalancer:
    """Proposes the given moves at the given steps (test stand-in)."""

    def __init__(self, plan: dict[int, tuple[int, int]]) -> None:
        self.plan = plan
        self.step = 0
        self.seen: list[list[int]] = []

    def propose(self, seconds, counts):
        self.seen.append(list(counts))
        self.step += 1
        return self.plan.get(self.step)


def run_batch(cage, steps: int = T):
    """:func:`cage_helpers.run`, with episodes as sortable tuples."""
    arrays, trajs = run(cage, steps)
    return arrays, sorted((t.env_index, t.length, t.return_) for t in trajs)


@pytest.mark.parametrize("reset_mode", ["auto", "wait"])
def test_moved_envs_continue_exactly_where_they_were(reset_mode):
    factory = partial(CountingEnv, terminal=False)
    with SerialCage(
        factory, 7, options=CageOptions(seed=5, reset_mode=reset_mode)
    ) as cage:
        reference = run_batch(cage)
    # processes: main [0,2), worker 0 [2,4), worker 1 [4,7); moves both ways
    plan = {1: (1, 0, 1), 3: (2, 1, 2), 6: (0, 1, 1), 9: (1, 2, 1), 12: (2, 1, 1)}
    balancer = ScriptedBalancer(plan)
    with ProcessCage(
        factory,
        7,
        options=CageOptions(seed=5, reset_mode=reset_mode),
        layout=ProcessLayout(main_process_envs=2, n_workers=2, rebalance=balancer),
        start_method="fork",
    ) as cage:
        result = run_batch(cage)
        assert cage.main_process_envs == 2
        assert [w.env_slice for w in cage._resources.workers] == [(2, 6), (6, 7)]
        # env access follows the envs to their new processes
        assert cage.get_attr("max_length") == [7] * 7
        cage.set_attr("max_length", 9, env_indices=[3])
        assert cage.get_attr("max_length") == [7, 7, 7, 9, 7, 7, 7]
        assert cage.call("_action_value", 1.5, env_indices=[2, 3]) == [1.5, 1.5]
    assert balancer.seen[1] == [3, 1, 3] and balancer.seen[-1] == [2, 4, 1]
    for key in reference[0]:
        np.testing.assert_array_equal(result[0][key], reference[0][key], err_msg=key)
    assert result[1] == reference[1]


def test_a_move_leaving_a_process_empty_is_refused():
    with ProcessCage(
        CountingEnv,
        3,
        options=CageOptions(seed=0),
        layout=ProcessLayout(
            main_process_envs=1, n_workers=1, rebalance=ScriptedBalancer({1: (0, 1, 1)})
        ),
        start_method="fork",
    ) as cage:
        with pytest.raises(ConfigError, match="keeps at least one"):
            run_batch(cage, 2)


class _EzCountingEnv(CountingEnv, EzPickle):
    """A CountingEnv that pickles by re-construction (like MuJoCo envs)."""

    def __init__(self, **kwargs) -> None:
        CountingEnv.__init__(self, **kwargs)
        EzPickle.__init__(self, **kwargs)


def test_envs_that_pickle_by_reconstruction_switch_balancing_off():
    with SerialCage(_EzCountingEnv, 4, options=CageOptions(seed=1)) as cage:
        reference = run_batch(cage, 8)
    with ProcessCage(
        _EzCountingEnv,
        4,
        options=CageOptions(seed=1),
        layout=ProcessLayout(
            main_process_envs=2,
            n_workers=1,
            rebalance=ScriptedBalancer({2: (1, 0, 1), 3: (0, 1, 1)}),
        ),
        start_method="fork",
    ) as cage:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = run_batch(cage, 8)
        (warning,) = [w for w in caught if "EzPickle" in str(w.message)]
        assert warning.category is ParllelWarning
        # at the test's code that stepped the cage, not at parllel's
        assert warning.filename.startswith(str(ROOT / "tests")), warning.filename
        assert cage._balancer is None and cage.main_process_envs == 2
        assert "EzPickle" in cage.rebalance_refusal
    for key in reference[0]:
        np.testing.assert_array_equal(result[0][key], reference[0][key], err_msg=key)


def test_restart_after_moves_recreates_the_current_ranges():
    # each env's process dies at the env's 4th step (the probe step was a
    # probe env's); balancing is asked only after steps without a death
    factory = partial(CountingEnv, die_at_step=4)
    balancer = ScriptedBalancer({1: (0, 1, 1), 4: (1, 0, 2)})
    with ProcessCage(
        factory,
        4,
        options=CageOptions(seed=0),
        layout=ProcessLayout(envs_per_worker=2, rebalance=balancer),
        on_worker_death="restart",
        start_method="fork",
    ) as cage:
        with allocate(cage, 8) as tree:
            cage.reset(tree.observation[0])
            lost = []
            for t in range(8):
                completed = cage.step(tree.action[t], slots(tree, t))
                lost += [tr.env_index for tr in completed if tr.lost]
                if t == 3:  # restarts recreated the moved ranges
                    assert [w.env_slice for w in cage._resources.workers] == [
                        (0, 1),
                        (1, 4),
                    ]
        # envs 1 and 2 moved back after the restarts; worker 0 then died with them
        assert sorted(lost) == [0, 0, 1, 1, 2, 2, 3, 3]
        assert [w.env_slice for w in cage._resources.workers] == [(0, 3), (3, 4)]
        assert cage.get_attr("max_length") == [7] * 4


class RandomBalancer:
    """Proposes a random valid move at random steps (for the property test)."""

    def __init__(self, seed: int, rate: float) -> None:
        self.rng = np.random.default_rng(seed)
        self.rate = rate

    def propose(self, seconds, counts):
        if self.rng.random() > self.rate:
            return None
        p = int(self.rng.integers(len(counts) - 1))
        giver, taker = (p, p + 1) if self.rng.random() < 0.5 else (p + 1, p)
        if counts[giver] < 2:
            return None
        return giver, taker, int(self.rng.integers(1, counts[giver]))


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    layout=st.sampled_from(
        [
            ProcessLayout(main_process_envs=2, n_workers=1),
            ProcessLayout(envs_per_worker=2),
            ProcessLayout(main_process_envs=1, n_workers=2),
        ]
    ),
)
def test_any_sequence_of_moves_gives_the_serial_batches(seed, layout):
    factory = partial(CountingEnv, min_length=2, max_length=5, terminal=False)
    with SerialCage(factory, 6, options=CageOptions(seed=seed)) as cage:
        reference = run_batch(cage, 16)
    balancer = RandomBalancer(seed, rate=0.5)
    with ProcessCage(
        factory,
        6,
        options=CageOptions(seed=seed),
        layout=replace(layout, rebalance=balancer),
        start_method="fork",
    ) as cage:
        result = run_batch(cage, 16)
        ranges = [(0, cage.main_process_envs)] * bool(cage.main_process_envs) + [
            w.env_slice for w in cage._resources.workers
        ]
        assert ranges[0][0] == 0 and ranges[-1][1] == 6
        assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(ranges, ranges[1:]))
    for key in reference[0]:
        np.testing.assert_array_equal(result[0][key], reference[0][key], err_msg=key)
    assert result[1] == reference[1]
