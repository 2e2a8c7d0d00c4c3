"""SelfPlay on a toy two-player turn-based game with scripted numpy agents.

The learner always plays 2; the opponent of snapshot ``s`` always plays
``s`` (snapshots are ints): against 0 and 1 the learner wins, against 2 it
draws, against 3 it loses, whatever the seats.
"""

from __future__ import annotations

import numpy as np
import pytest

from parllel import fields
from parllel.agents import AgentStep, NumpyHandler, ScriptedAgent
from parllel.cages import TrajInfo
from parllel.errors import ConfigError, ParllelError
from parllel.multiagent.opponent_pool import OpponentPool
from parllel.multiagent.selfplay import MIRROR, SelfPlay, game_outcome
from tests.helpers.selfplay_envs import A, SelfPlayDriver

B = 6


class ConstantAgent:
    """Plays ``number`` in every row; records the rows of each call."""

    def __init__(self, number: int, calls: list) -> None:
        self.number, self.calls = number, calls

    def initial_state(self, n_envs: int) -> None:
        return None

    def step(self, observation, prev_action, prev_reward, state) -> AgentStep:
        self.calls.append((self.number, len(observation)))
        n = len(observation)
        return AgentStep(
            np.full(n, self.number, np.int64), {fields.VALUE: np.zeros(n, np.float32)}
        )

    def value(self, observation, prev_action, prev_reward, state):
        return np.full(len(observation), -1.0, np.float32)

    def set_mode(self, mode: str) -> None:
        pass


def make_selfplay(strategy="uniform", snapshots=(0, 1, 2, 3), seed=0, **kwargs):
    calls: list = []
    pool = OpponentPool(max_size=8, strategy=strategy, seed=seed)
    for snapshot in snapshots:
        pool.add(snapshot)
    learner = NumpyHandler(
        ScriptedAgent(
            lambda obs, a, r: np.full(len(obs), 2, np.int64),
            value_fn=lambda obs: np.full(len(obs), 5.0),
        ),
        n_envs=B * A,
    )
    built: list = []

    def factory(snapshot, n_rows):
        built.append(snapshot)
        return NumpyHandler(ConstantAgent(snapshot, calls), n_envs=n_rows)

    selfplay = SelfPlay(
        learner, factory, pool, n_envs=B, n_agents=A, seed=seed, **kwargs
    )
    return selfplay, calls, built


def test_game_outcome():
    assert game_outcome([1.0, -1.0], 0) == "win"
    assert game_outcome([1.0, -1.0], 1) == "loss"
    assert game_outcome([0.0, 0.0], 1) == "draw"
    assert game_outcome([0.0, 1.0, 1.0], 1) == "draw"  # best of the others


def test_learner_rows_have_policy_index_0_and_the_learners_actions():
    selfplay, _, _ = make_selfplay()
    driver = SelfPlayDriver(selfplay, B)
    for _ in range(40):
        driver.step()
    for entry in driver.log:
        learner = entry["policy_index"] == 0
        seats = np.zeros((B, A), bool)
        seats[np.arange(B), entry["seat"]] = True
        np.testing.assert_array_equal(learner, seats)
        assert (entry["action"][learner] == 2).all()
        opponents = np.broadcast_to(entry["opponent"][:, None], (B, A))
        np.testing.assert_array_equal(entry["action"][~learner], opponents[~learner])


def test_seats_are_uniform_and_opponents_follow_the_strategy():
    selfplay, _, _ = make_selfplay()
    driver = SelfPlayDriver(selfplay, B)
    seats, opponents = [], []
    for _ in range(1200):  # 4 steps per game: 1800 games
        previous = (driver.handler.seat.copy(), driver.handler.opponent.copy())
        for game in driver.step():
            seats.append(previous[0][game.env_index])
            opponents.append(previous[1][game.env_index])
    assert len(seats) == 1800
    assert abs(np.mean(seats) - 0.5) < 0.05
    np.testing.assert_allclose(
        np.bincount(opponents, minlength=4) / 1800, 0.25, atol=0.04
    )


def test_a_per_seat_fixed_share_follows_the_learners_seat():
    selfplay, _, _ = make_selfplay(snapshots=(0,))
    bot = selfplay.pool.add_fixed(1, share=(0.8, 0.1))  # snapshot "1": the bot
    driver = SelfPlayDriver(selfplay, B)
    seats, opponents = [], []
    for _ in range(1200):
        previous = (driver.handler.seat.copy(), driver.handler.opponent.copy())
        for game in driver.step():
            seats.append(previous[0][game.env_index])
            opponents.append(previous[1][game.env_index])
    seats, opponents = np.array(seats), np.array(opponents)
    assert abs(np.mean(opponents[seats == 0] == bot) - 0.8) < 0.06
    assert abs(np.mean(opponents[seats == 1] == bot) - 0.1) < 0.06


def test_per_seat_shares_for_another_seat_count_are_refused():
    selfplay, _, _ = make_selfplay(snapshots=(0,))
    selfplay.pool.add_fixed(1, share=(0.5, 0.2, 0.1))
    with pytest.raises(ConfigError, match=r"3 per-seat shares.*n_agents=2"):
        selfplay.start_games()


def test_outcomes_are_attributed_to_the_right_opponent():
    selfplay, _, _ = make_selfplay()
    driver = SelfPlayDriver(selfplay, B)
    for _ in range(200):
        driver.step()
    pool = selfplay.pool
    games = [pool.info(s).games for s in range(4)]
    assert (
        all(games) and sum(games) == sum(selfplay.total.values()) == pool.learner_games
    )
    # beaten opponents lose rating, the one that always wins gains, draws stay near
    assert pool.info(0).mu < 25 and pool.info(1).mu < 25 and pool.info(3).mu > 25
    assert selfplay.total == {
        "win": games[0] + games[1],
        "draw": games[2],
        "loss": games[3],
    }
    metrics = selfplay.metrics()
    assert metrics["selfplay/games"] == sum(games)
    assert metrics["selfplay/pool_size"] == 4
    rates = [metrics[f"selfplay/{o}_rate"] for o in ("win", "draw", "loss")]
    assert abs(sum(rates) - 1) < 1e-9 and rates[0] > rates[1] > 0 and rates[2] > 0
    recent = list(selfplay.recent)
    assert rates[0] == recent.count("win") / len(recent)


def test_opponents_of_one_snapshot_are_one_batch():
    selfplay, calls, built = make_selfplay(handler_cache_size=4)
    driver = SelfPlayDriver(selfplay, B)
    while len(built) < 4:  # every handler built
        driver.step()
    driver.step()  # and probed once for its agent-info keys
    for _ in range(60):
        calls.clear()
        entry_before = selfplay.opponent.copy()
        driver.step()
        numbers = [number for number, _ in calls]
        assert len(numbers) == len(set(numbers))  # one call per snapshot
        expected = {
            s: int((entry_before == s).sum()) * (A - 1) for s in set(entry_before)
        }
        assert dict(calls) == expected
    assert sorted(built) == [0, 1, 2, 3]  # cached: never rebuilt


def test_idle_handlers_beyond_the_cache_size_are_dropped():
    selfplay, _, built = make_selfplay(handler_cache_size=0)
    driver = SelfPlayDriver(selfplay, B)
    for _ in range(80):
        driver.step()
        in_use = set(selfplay.opponent.tolist())
        assert set(selfplay._handlers) == in_use
    assert len(built) > 4  # snapshots that came back into play were rebuilt


def test_an_evicted_snapshot_plays_until_its_game_ends():
    selfplay, calls, _ = make_selfplay(strategy="latest", snapshots=(3,))
    driver = SelfPlayDriver(selfplay, B)
    driver.step()
    selfplay.pool.max_size  # noqa: B018
    for snapshot in (10, 11, 12, 13, 14, 15, 16, 17):  # evicts snapshot 3's entry
        selfplay.pool.add(snapshot)
    assert 0 not in selfplay.pool
    calls.clear()
    for _ in range(3):  # the rest of the running games
        driver.step()
    assert {number for number, _ in calls} == {3}
    assert selfplay.total["loss"] == B  # recorded against the evicted snapshot
    calls.clear()
    driver.step()
    assert {number for number, _ in calls} == {17}


def test_value_is_the_learners_at_its_seat_and_zero_elsewhere():
    selfplay, _, _ = make_selfplay()
    driver = SelfPlayDriver(selfplay, B)
    values = selfplay.value(driver.observation, None, None)
    learner = np.zeros((B, A), bool)
    learner[np.arange(B), selfplay.seat] = True
    assert (values[learner] == 5).all() and (values[~learner] == 0).all()


def test_example_outputs_have_policy_index():
    selfplay, _, _ = make_selfplay()
    example = selfplay.example_outputs(np.zeros((A, 3), np.float32))
    assert example.agent_info[fields.POLICY_INDEX].shape == (A,)


def test_state_dict_round_trip_continues_identically():
    selfplay, _, _ = make_selfplay(strategy="mostly_latest")
    driver = SelfPlayDriver(selfplay, B)
    for _ in range(30):
        driver.step()
    state = selfplay.state_dict()

    def continue_run(handler):
        driver = SelfPlayDriver(handler, B)  # resets every env, as a resume does
        for _ in range(40):
            driver.step()
        return [(e["seat"].tolist(), e["opponent"].tolist()) for e in driver.log], (
            handler.total,
            handler.pool.learner_mu,
        )

    expected = continue_run(selfplay)
    restored, _, _ = make_selfplay(strategy="mostly_latest", snapshots=(), seed=123)
    restored.load_state_dict(state)
    assert continue_run(restored) == expected


def test_empty_pool_and_bad_configuration():
    with pytest.raises(ParllelError):
        make_selfplay(snapshots=())[0].reset()
    selfplay, _, _ = make_selfplay(snapshots=(), snapshot_learner=lambda: 1)
    selfplay.reset()
    assert selfplay.pool.ids == [0] and (selfplay.opponent == 0).all()
    with pytest.raises(ConfigError, match="n_agents"):
        SelfPlay(selfplay.learner, None, selfplay.pool, n_envs=B * 2, n_agents=1)
    with pytest.raises(ConfigError, match="window"):
        make_selfplay(window=0)


def test_episodes_without_agent_returns_name_multiagent_traj_info():
    selfplay, _, _ = make_selfplay()
    selfplay.reset()
    with pytest.raises(ConfigError, match="traj_info_type=MultiAgentTrajInfo"):
        selfplay.episodes_ended([TrajInfo(env_index=0)])


def test_handlers_with_the_wrong_row_count_name_n_envs_times_n_agents():
    selfplay, _, _ = make_selfplay()
    with pytest.raises(ConfigError, match=rf"n_envs \* n_agents = {B + 1} \* {A}"):
        SelfPlay(selfplay.learner, None, selfplay.pool, n_envs=B + 1, n_agents=A)

    def one_row_per_env(snapshot, n_rows):
        return NumpyHandler(ConstantAgent(snapshot, []), n_envs=B)

    wrong = SelfPlay(selfplay.learner, one_row_per_env, selfplay.pool, B, A)
    with pytest.raises(ConfigError, match=r"opponent_factory\(snapshot, n_rows\)"):
        wrong.reset()


def test_mirror_games_seat_the_learner_everywhere_and_are_not_rated():
    selfplay, _, _ = make_selfplay(mirror_share=0.5)
    driver = SelfPlayDriver(selfplay, B)
    mirrored_steps = 0
    for _ in range(300):
        previous = selfplay.opponent.copy()
        ended = driver.step()
        entry = driver.log[-1]
        mirror = previous == MIRROR
        mirrored_steps += int(mirror.sum())
        # every seat of a mirror game is the learner's (and trained on)
        assert (entry["policy_index"][mirror] == 0).all()
        assert (entry["action"][mirror] == 2).all()
        assert (entry["policy_index"][~mirror] == 0).sum() == (~mirror).sum()
        for game in ended:
            assert previous[game.env_index] != -1
    assert 0.4 < mirrored_steps / (300 * B) < 0.6
    pool = selfplay.pool
    rated = sum(pool.info(s).games for s in range(4))
    assert rated == sum(selfplay.total.values()) > 0
    assert selfplay.mirror_games > 0
    assert selfplay.metrics()["selfplay/mirror_games"] == selfplay.mirror_games
    state = selfplay.state_dict()
    restored, _, _ = make_selfplay(mirror_share=0.5)
    restored.load_state_dict(state)
    assert restored.mirror_games == selfplay.mirror_games
    with pytest.raises(ConfigError, match="mirror_share"):
        make_selfplay(mirror_share=1.0)
