"""Gather ``[batch]`` (n-step) transitions from stored rows."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from parllel import fields
from parllel.replays.storage import ReplayStorage
from parllel.tree import tree_map

__all__ = ["ReplayBatch", "gather_transitions"]


class ReplayBatch(NamedTuple):
    """``[batch]`` transitions sampled from a replay (numpy arrays).

    An n-step sample from step ``t`` sums ``k <= n`` discounted rewards and
    takes ``next_observation``, ``terminated`` and ``truncated`` of step
    ``t + k - 1``; bootstrap with ``discount`` (see docs/replays.md, "What a
    sample is").

    Attributes:
        reward: ``[batch]`` float32, the discounted n-step sum.
        next_observation: the final observation where the episode ended.
        discount: ``[batch]`` float32, ``discount ** k``.
        n_steps: ``[batch]`` int64, the ``k`` above.
        indices: ``[batch]`` int64 positions (pass to ``update_priorities``).
        weights: ``[batch]`` float32 importance weights (ones when uniform).
    """

    observation: Any
    action: Any
    reward: np.ndarray
    next_observation: Any
    terminated: np.ndarray
    truncated: np.ndarray
    discount: np.ndarray
    n_steps: np.ndarray
    indices: np.ndarray
    weights: np.ndarray


def _take(tree: Any, rows: np.ndarray, envs: np.ndarray) -> Any:
    """``leaf[rows, envs]`` of every leaf of a (plain dict) tree of row views."""
    return tree_map(lambda leaf: leaf[rows, envs], tree)


def _put(tree: Any, index: np.ndarray, values: Any) -> None:
    """``leaf[index] = value`` for the leaves of ``tree`` and matching ``values``."""

    def put(leaf: np.ndarray, value: Any) -> np.ndarray:
        leaf[index] = value
        return leaf

    tree_map(put, tree, values)


def gather_transitions(
    storage: ReplayStorage,
    positions: np.ndarray,
    n_step: int,
    discount: float,
    weights: np.ndarray | None = None,
) -> ReplayBatch:
    """Read the (n-step) transitions that start at stored ``positions``.

    Returns are accumulated step by step, vectorized over the batch: a sample
    stops growing at the step that ended its episode (``TERMINATED`` or
    ``TRUNCATED``) and at the newest stored step.

    Args:
        storage: the replay's :class:`ReplayStorage`.
        positions: ``[batch]`` positions ``row * B + env`` of intact steps.
        n_step: maximum number of steps summed (1: one-step transitions).
        discount: per-step discount ``gamma``.
        weights: optional importance weights (default ones).

    Returns:
        A :class:`ReplayBatch`.
    """
    rows_of = storage.rows
    positions = np.asarray(positions, dtype=np.int64)
    start, envs = storage.rows_envs(positions)
    reward_rows = rows_of[fields.REWARD]
    terminated_rows = rows_of[fields.TERMINATED]
    truncated_rows = rows_of[fields.TRUNCATED]
    available = storage.steps_available(start)

    last = start.copy()
    n_steps = np.ones_like(start)
    reward = reward_rows[start, envs].astype(np.float64)
    ended = terminated_rows[start, envs] | truncated_rows[start, envs]
    active = ~ended
    for j in range(1, n_step):
        active &= j < available
        if not active.any():
            break
        row = (start + j) % storage.full_size
        reward[active] += discount**j * reward_rows[row[active], envs[active]]
        last[active] = row[active]
        n_steps[active] += 1
        ended_here = terminated_rows[row, envs] | truncated_rows[row, envs]
        active &= ~ended_here
    terminated = terminated_rows[last, envs].astype(bool)
    truncated = truncated_rows[last, envs].astype(bool)
    ended = np.flatnonzero(terminated | truncated)
    observation = storage.observations(start, envs)
    if storage.frames is None:
        # Row ``last + 1`` may be row N: the trailing bootstrap row (see storage).
        next_observation = storage.observations(last + 1, envs)
        if ended.size:  # the episode's own last observation, never the reset one
            final = storage.final_observation(last[ended], envs[ended])
            _put(next_observation, ended, final)
    else:  # the stack at ``last`` shifted by one, plus the next (or final) frame
        last_stacks = observation if n_step == 1 else storage.observations(last, envs)
        next_frames = rows_of[fields.OBSERVATION][last + 1, envs]
        if ended.size:
            next_frames[ended] = storage.final_observation(last[ended], envs[ended])
        next_observation = storage.frames.next_stacks(last_stacks, next_frames)
    if weights is None:
        weights = np.ones(len(positions), dtype=np.float32)
    return ReplayBatch(
        observation=observation,
        action=_take(rows_of[fields.ACTION], start, envs),
        reward=reward.astype(np.float32),
        next_observation=next_observation,
        terminated=terminated,
        truncated=truncated,
        discount=(float(discount) ** n_steps).astype(np.float32),
        n_steps=n_steps,
        indices=positions,
        weights=np.asarray(weights, dtype=np.float32),
    )
