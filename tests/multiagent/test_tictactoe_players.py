"""The tic-tac-toe example's judges: minimax is perfect, exact results match played games."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "selfplay"))
from tictactoe_players import (  # noqa: E402
    MinimaxPlayer,
    RandomPlayer,
    best_moves,
    board_from_observation,
    exact_results,
    observation_of,
    play_matches,
)


def first_best(observation):
    return best_moves(board_from_observation(observation["observation"]))[0]


def first_free(observation):
    return int(np.flatnonzero(observation["action_mask"])[0])


@pytest.mark.parametrize("seat", [0, 1])
def test_a_perfect_policy_never_loses(seat):
    assert exact_results(first_best, "random", seat)["loss"] == 0
    assert exact_results(first_best, "minimax", seat)["draw"] == pytest.approx(1.0)
    played = play_matches(first_best, MinimaxPlayer(seat), 40, seat)
    assert played["draw"] == 1.0


@pytest.mark.parametrize("seat", [0, 1])
@pytest.mark.parametrize("opponent", ["random", "minimax"])
def test_exact_results_are_what_played_games_converge_to(seat, opponent):
    exact = exact_results(first_free, opponent, seat)
    assert sum(exact.values()) == pytest.approx(1.0)
    player = RandomPlayer(7) if opponent == "random" else MinimaxPlayer(7)
    played = play_matches(first_free, player, 1500, seat, seed=3)
    for outcome in ("win", "draw", "loss"):
        assert played[outcome] == pytest.approx(exact[outcome], abs=0.05)


def test_observation_of_round_trips_the_board():
    board = (1, 0, 2, 0, 1, 0, 2, 0, 0)
    observation = observation_of(board)
    assert board_from_observation(observation["observation"]) == board
    assert observation["action_mask"].tolist() == [int(c == 0) for c in board]


def test_an_illegal_move_and_an_unknown_opponent_are_refused():
    with pytest.raises(ValueError, match="occupied square"):
        exact_results(lambda observation: 0, "random", 0)
    with pytest.raises(ValueError, match="'minimax' or 'random'"):
        exact_results(first_free, "perfect", 0)


def test_random_start_makes_one_seeded_random_move_in_its_share_of_games():
    pytest.importorskip("torch")
    pytest.importorskip("openskill")
    from train_tictactoe import tictactoe_env

    from parllel.multiagent.aec_env import AECEnvAdapter

    def first_marks(share, seed, games=40, moves=1):
        env = AECEnvAdapter(tictactoe_env(share, moves))
        marks = []
        for game in range(games):
            observation, _ = env.reset(seed=seed if game == 0 else None)
            board = observation["observation"].sum(
                axis=(1, 2, 3)
            )  # marks seen per seat
            marks.append(int(board[0]))
        env.close()
        return marks

    always = first_marks(1.0, seed=3)
    assert set(always) == {1}
    assert first_marks(0.0, seed=3) == [0] * 40
    some = first_marks(0.5, seed=3)
    assert 0 < sum(some) < 40 and some == first_marks(0.5, seed=3)
    assert set(first_marks(1.0, seed=4, games=100, moves=4)) == {1, 2, 3, 4}
    with pytest.raises(ValueError, match="max_moves"):
        tictactoe_env(0.5, 5)
