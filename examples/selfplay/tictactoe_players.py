"""Fixed tic-tac-toe opponents and a match loop, for judging a self-play policy.

``MinimaxPlayer`` plays perfectly: it searches every position (there are
fewer than 6,000) and picks uniformly among the moves with the best outcome,
so it never loses and punishes every mistake. ``RandomPlayer`` plays a
uniformly random legal move. :func:`play_matches` pits a policy against one
of them in PettingZoo's ``tictactoe_v3`` and counts wins, draws and losses;
:func:`exact_results` gives the same fractions without sampling, for a
deterministic policy against either player, by walking every game the
player's random choices can lead to.

Boards here are 9-tuples in PettingZoo's square order, from the point of view
of the player to move: 0 empty, 1 the mover's mark, 2 the other's.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

LINES = (
    (0, 1, 2), (3, 4, 5), (6, 7, 8),
    (0, 3, 6), (1, 4, 7), (2, 5, 8),
    (0, 4, 8), (2, 4, 6),
)  # fmt: skip

Policy = Callable[[dict[str, np.ndarray]], int]


def board_from_observation(observation: np.ndarray) -> tuple[int, ...]:
    """The mover's 9-tuple board from a PettingZoo ``(3, 3, 2)`` observation."""
    mine = observation[..., 0].reshape(9)
    theirs = observation[..., 1].reshape(9)
    return tuple(int(1 * m + 2 * o) for m, o in zip(mine, theirs))


def _won(board: tuple[int, ...], mark: int) -> bool:
    return any(all(board[i] == mark for i in line) for line in LINES)


def _swap(board: tuple[int, ...]) -> tuple[int, ...]:
    return tuple((0, 2, 1)[cell] for cell in board)


@cache
def outcome(board: tuple[int, ...]) -> int:
    """Game value for the player to move with perfect play: 1 win, 0 draw, -1 loss."""
    if _won(board, 2):
        return -1
    moves = [i for i, cell in enumerate(board) if cell == 0]
    if not moves:
        return 0
    return max(-outcome(_swap(board[:i] + (1,) + board[i + 1 :])) for i in moves)


def best_moves(board: tuple[int, ...]) -> list[int]:
    """Every move that keeps the best reachable outcome for the player to move."""
    moves = [i for i, cell in enumerate(board) if cell == 0]
    values = [-outcome(_swap(board[:i] + (1,) + board[i + 1 :])) for i in moves]
    best = max(values)
    return [move for move, value in zip(moves, values) if value == best]


class MinimaxPlayer:
    """A perfect player: a uniformly random move among the optimal ones."""

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def __call__(self, observation: dict[str, np.ndarray]) -> int:
        """The move for a PettingZoo observation dict (``observation``, ``action_mask``)."""
        moves = best_moves(board_from_observation(observation["observation"]))
        return int(self.rng.choice(moves))


class RandomPlayer:
    """A uniformly random legal move."""

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def __call__(self, observation: dict[str, np.ndarray]) -> int:
        """A random legal move (from ``action_mask``)."""
        return int(self.rng.choice(np.flatnonzero(observation["action_mask"])))


def play_matches(
    policy: Policy, opponent: Policy, games: int, seat: int, seed: int = 0
) -> dict[str, float]:
    """Play ``games`` games of ``tictactoe_v3`` with ``policy`` in ``seat`` (0 moves first).

    Returns the fractions ``win``, ``draw`` and ``loss`` of ``policy``'s games
    and their count. An illegal move by ``policy`` raises ValueError.
    """
    from pettingzoo.classic import tictactoe_v3

    env: Any = tictactoe_v3.env()
    counts = {"win": 0, "draw": 0, "loss": 0}
    for game in range(games):
        env.reset(seed=seed + game)
        me = env.possible_agents[seat]
        reward = 0.0
        for agent in env.agent_iter():
            observation, last_reward, terminated, truncated, _ = env.last()
            if terminated or truncated:
                if agent == me:  # the game's result for ``policy``
                    reward = float(last_reward)
                env.step(None)
                continue
            player = policy if agent == me else opponent
            action = int(player(observation))
            if agent == me and not observation["action_mask"][action]:
                raise ValueError(f"the policy played an occupied square ({action})")
            env.step(action)
        counts["win" if reward > 0 else "loss" if reward < 0 else "draw"] += 1
    env.close()
    result: dict[str, float] = {key: value / games for key, value in counts.items()}
    result["games"] = games
    return result


def observation_of(board: tuple[int, ...]) -> dict[str, np.ndarray]:
    """The PettingZoo observation dict of the mover's 9-tuple ``board``."""
    cells = np.asarray(board).reshape(3, 3)
    planes = np.stack([cells == 1, cells == 2], axis=-1).astype(np.int8)
    return {
        "observation": planes,
        "action_mask": (cells == 0).reshape(9).astype(np.int8),
    }


def _play(board: tuple[int, ...], square: int) -> tuple[int, ...]:
    """The board after the mover takes ``square``, from the next mover's view."""
    return _swap(board[:square] + (1,) + board[square + 1 :])


def exact_results(policy: Policy, opponent: str, seat: int) -> dict[str, float]:
    """Exact ``win``/``draw``/``loss`` fractions of a deterministic ``policy`` in ``seat``.

    ``opponent`` is ``"minimax"`` (a uniform choice among the optimal moves,
    as :class:`MinimaxPlayer`) or ``"random"`` (as :class:`RandomPlayer`):
    each game the opponent's choices can lead to is weighted by its
    probability, so the figures are what :func:`play_matches` converges to
    with ever more games. ``policy`` must return a legal square.
    """
    if opponent not in ("minimax", "random"):
        raise ValueError(f"opponent must be 'minimax' or 'random', got {opponent!r}")
    chooser = best_moves if opponent == "minimax" else _free_squares
    totals = {"win": 0.0, "draw": 0.0, "loss": 0.0}

    def walk(board: tuple[int, ...], policy_moves: bool, weight: float) -> None:
        if _won(board, 2):  # the previous mover completed a line
            totals["loss" if policy_moves else "win"] += weight
            return
        if all(board):
            totals["draw"] += weight
            return
        if policy_moves:
            square = int(policy(observation_of(board)))
            if board[square]:
                raise ValueError(f"the policy played an occupied square ({square})")
            walk(_play(board, square), False, weight)
            return
        squares = chooser(board)
        for square in squares:
            walk(_play(board, square), True, weight / len(squares))

    walk((0,) * 9, seat == 0, 1.0)
    return totals


def _free_squares(board: tuple[int, ...]) -> list[int]:
    return [i for i, cell in enumerate(board) if cell == 0]
