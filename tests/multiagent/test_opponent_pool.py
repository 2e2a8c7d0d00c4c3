"""OpponentPool: strategies' distributions, ratings, eviction, save/restore."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from parllel.errors import ConfigError, ParllelError
from parllel.multiagent.opponent_pool import OpponentPool

N = 4000


def filled(strategy: str, n: int = 4, **kwargs) -> OpponentPool:
    pool = OpponentPool(max_size=10, strategy=strategy, seed=3, **kwargs)
    for step in range(n):
        pool.add({"weights": np.full(2, step)}, step=step * 100)
    return pool


def counts(pool: OpponentPool) -> np.ndarray:
    return np.bincount(pool.sample(N), minlength=len(pool)) / N


def test_latest_always_picks_the_newest():
    assert (filled("latest").sample(50) == 3).all()


def test_mostly_latest_picks_the_newest_with_p_latest_and_others_uniformly():
    frequency = counts(filled("mostly_latest", p_latest=0.7))
    expected_other = 0.3 / 3
    assert abs(frequency[3] - 0.7) < 0.03
    np.testing.assert_allclose(frequency[:3], expected_other, atol=0.03)


def test_mostly_latest_with_one_snapshot_picks_it():
    assert (filled("mostly_latest", n=1).sample(20) == 0).all()


def test_uniform_picks_every_snapshot_alike():
    np.testing.assert_allclose(counts(filled("uniform")), 0.25, atol=0.03)


def test_rating_prefers_opponents_close_to_the_learner():
    pool = filled("rating", n=3)
    # snapshot 0: beaten again and again; 1: the learner loses to it; 2: even
    for _ in range(15):
        pool.record(0, "win")
    for _ in range(15):
        pool.record(1, "loss")
    for _ in range(6):
        pool.record(2, "win")
        pool.record(2, "loss")
    weights = pool.rating_weights()
    frequency = counts(pool)
    probability = weights / weights.sum()
    np.testing.assert_allclose(frequency, probability, atol=0.03)
    assert frequency[2] > frequency[0] and frequency[2] > frequency[1]


def test_ratings_move_the_right_way():
    pool = filled("uniform", n=2)
    start = pool.learner_rating
    before = pool.info(0)
    pool.record(0, "win")
    after = pool.info(0)
    assert pool.learner_mu > 25.0 and after.mu < before.mu and after.games == 1
    mu = pool.learner_mu
    pool.record(1, "loss")
    assert pool.learner_mu < mu and pool.info(1).mu > 25.0
    mu_draw = pool.learner_mu
    pool.record(1, "draw")
    assert pool.learner_sigma < 25.0 / 3 and pool.learner_games == 3
    assert abs(pool.learner_mu - mu_draw) < abs(mu - mu_draw) + 1.0
    assert pool.learner_rating > start  # uncertainty shrinks with games


def test_a_new_snapshot_starts_with_the_learners_rating():
    pool = filled("uniform", n=1)
    for _ in range(5):
        pool.record(0, "win")
    new = pool.add("weights", step=7)
    info = pool.info(new)
    assert (info.mu, info.sigma, info.step, info.games) == (
        pool.learner_mu,
        pool.learner_sigma,
        7,
        0,
    )


def test_eviction_drops_the_oldest_and_remembers_its_rating():
    pool = OpponentPool(max_size=2, strategy="uniform", seed=0)
    ids = [pool.add(f"s{i}") for i in range(3)]
    assert ids == [0, 1, 2] and pool.ids == [1, 2] and pool.latest_id == 2
    with pytest.raises(ConfigError, match="no snapshot 0"):
        pool.get(0)
    pool.record(0, "win")  # a game against an evicted snapshot still counts
    assert pool.learner_games == 1
    pool.add("s3")
    pool.add("s4")
    pool.add("s5")
    with pytest.raises(ConfigError):
        pool.record(0, "win")  # forgotten after max_size more evictions
    with pytest.raises(ConfigError):
        pool.record(17, "win")


def test_max_size_one_keeps_the_latest():
    pool = OpponentPool(max_size=1, strategy="mostly_latest", seed=0)
    pool.add("a")
    pool.add("b")
    assert pool.ids == [1] and pool.get(1) == "b"


def test_save_restore_continues_identically():
    pool = filled("rating")
    pool.record(1, "win")
    pool.sample(5)
    saved = pickle.loads(pickle.dumps(pool.state_dict()))
    expected = [pool.sample(7).tolist()]
    pool.record(2, "loss")
    pool.add("new", step=9)
    expected.append(pool.sample(7).tolist())
    expected.append((pool.learner_mu, pool.ids))

    restored = OpponentPool(max_size=10, strategy="rating", seed=999)
    restored.load_state_dict(saved)
    got = [restored.sample(7).tolist()]
    restored.record(2, "loss")
    restored.add("new", step=9)
    got.append(restored.sample(7).tolist())
    got.append((restored.learner_mu, restored.ids))
    assert got == expected
    np.testing.assert_array_equal(restored.get(0)["weights"], [0, 0])


def test_state_dict_is_a_snapshot_not_a_live_view():
    pool = filled("uniform", n=2)
    state = copy.deepcopy(pool.state_dict())
    pool.record(0, "win")
    assert state["learner"][2] == 0


def test_bad_configuration_and_input():
    with pytest.raises(ConfigError, match="strategy"):
        OpponentPool(4, strategy="best")
    with pytest.raises(ConfigError, match="max_size"):
        OpponentPool(0)
    with pytest.raises(ConfigError, match="p_latest"):
        OpponentPool(4, p_latest=1.5)
    with pytest.raises(ParllelError, match="empty"):
        OpponentPool(4).sample(1)
    pool = filled("uniform", n=2)
    with pytest.raises(ConfigError, match="outcome"):
        pool.record(0, "won")
    with pytest.raises(ConfigError, match="max_size=1"):
        OpponentPool(1).load_state_dict(pool.state_dict())


@pytest.mark.parametrize("strategy", ["latest", "mostly_latest", "uniform", "rating"])
def test_fixed_opponents_get_their_share_and_are_never_evicted(strategy):
    pool = OpponentPool(max_size=3, strategy=strategy, seed=0)
    random_player = pool.add_fixed("random", share=0.3)
    bot = pool.add_fixed("bot", share=0.1)
    for step in range(6):  # evicts three snapshots, never a fixed opponent
        pool.add({"w": step}, step=step)
    assert len(pool) == 3 and pool.fixed_ids == [random_player, bot]
    assert pool.get(random_player) == "random" and pool.latest_id == 7
    drawn = pool.sample(20_000)
    assert abs(np.mean(drawn == random_player) - 0.3) < 0.02
    assert abs(np.mean(drawn == bot) - 0.1) < 0.015
    snapshots = drawn[(drawn != random_player) & (drawn != bot)]
    assert set(snapshots.tolist()) <= {5, 6, 7}
    if strategy == "latest":
        assert set(snapshots.tolist()) == {7}


def test_fixed_opponents_are_rated_and_survive_a_round_trip():
    pool = OpponentPool(max_size=2, seed=1)
    random_player = pool.add_fixed("random", share=0.5)
    pool.add("first")
    pool.record(random_player, "win")
    assert pool.info(random_player).mu < 25.0 and pool.info(random_player).games == 1
    restored = OpponentPool(max_size=2, seed=99)
    restored.load_state_dict(copy.deepcopy(pool.state_dict()))
    assert restored.fixed_ids == [random_player] and len(restored) == 1
    assert (restored.sample(50) == pool.sample(50)).all()


def test_per_seat_shares_draw_a_fixed_opponent_by_the_learners_seat():
    pool = OpponentPool(max_size=4, strategy="latest", seed=5)
    pool.add("first")
    random_player = pool.add_fixed("random", share=(0.9, 0.2))
    bot = pool.add_fixed("bot", share=0.05)
    seats = np.repeat([0, 1], 20_000)
    drawn = pool.sample(len(seats), seats=seats)
    for seat, expected in ((0, 0.9), (1, 0.2)):
        in_seat = drawn[seats == seat]
        assert abs(np.mean(in_seat == random_player) - expected) < 0.015
        assert abs(np.mean(in_seat == bot) - 0.05) < 0.01
    snapshots = drawn[(drawn != random_player) & (drawn != bot)]
    assert set(snapshots.tolist()) == {0}


def test_a_single_share_draws_as_before_with_or_without_seats():
    one, other = OpponentPool(max_size=2, seed=8), OpponentPool(max_size=2, seed=8)
    for pool in (one, other):
        pool.add("first")
        pool.add_fixed("random", share=0.4)
    np.testing.assert_array_equal(
        one.sample(500), other.sample(500, seats=np.zeros(500, np.int64))
    )


def test_per_seat_shares_survive_save_and_restore():
    pool = OpponentPool(max_size=2, seed=4)
    pool.add("first")
    pool.add_fixed("random", share=(0.7, 0.1))
    restored = OpponentPool(max_size=2, seed=0)
    restored.load_state_dict(pickle.loads(pickle.dumps(pool.state_dict())))
    seats = np.arange(100) % 2
    np.testing.assert_array_equal(
        restored.sample(100, seats=seats), pool.sample(100, seats=seats)
    )


def test_bad_per_seat_shares_name_the_problem():
    pool = OpponentPool(max_size=2)
    pool.add("first")
    with pytest.raises(ConfigError, match=r"\[0, 1\)"):
        pool.add_fixed("random", share=(0.5, 1.0))
    pool.add_fixed("random", share=(0.5, 0.8))
    with pytest.raises(ConfigError, match="one entry per seat"):
        pool.add_fixed("bot", share=(0.1, 0.1, 0.1))
    with pytest.raises(ConfigError, match=r"below 1 together in every seat"):
        pool.add_fixed("bot", share=0.2)
    with pytest.raises(ConfigError, match="pass the learner's seats"):
        pool.sample(4)
    with pytest.raises(ConfigError, match=r"seats must be 2 ints in \[0, 2\)"):
        pool.sample(2, seats=[0, 2])


def test_fixed_shares_must_leave_room_for_snapshots():
    pool = OpponentPool(max_size=2)
    with pytest.raises(ConfigError, match="share"):
        pool.add_fixed("random", share=1.0)
    pool.add_fixed("random", share=0.6)
    with pytest.raises(ConfigError, match="below 1"):
        pool.add_fixed("bot", share=0.4)
    with pytest.raises(ParllelError):  # only fixed opponents: no learner yet
        pool.sample(1)
