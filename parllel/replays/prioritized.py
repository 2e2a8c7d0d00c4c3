"""Proportional prioritized experience replay over full-size rotating Arrays."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from parllel.errors import ConfigError
from parllel.replays.checks import (
    check_can_sample,
)
from parllel.replays.sum_tree import SumTree
from parllel.replays.transitions import ReplayBatch, gather_transitions
from parllel.replays.uniform import UniformReplay
from parllel.tree import ArrayDict

__all__ = ["PrioritizedReplay"]


class PrioritizedReplay(UniformReplay):
    """Sample transition ``i`` with probability ``p_i / sum_j p_j``.

    ``p_i = (|delta_i| + epsilon) ** alpha`` from the errors passed to
    :meth:`update_priorities` (new transitions get the largest priority seen);
    sampling is stratified and importance weights correct the bias (anneal
    :attr:`beta` towards 1). Otherwise as :class:`~parllel.replays.UniformReplay`,
    whose arguments it takes (see docs/replays.md, "Prioritized replay").

    Example:
        >>> replay = PrioritizedReplay(tree, 64, np.random.default_rng(0), alpha=0.6)
        >>> batch = replay.sample()
        >>> replay.update_priorities(batch.indices, np.abs(td_error))

    Args:
        alpha: prioritization exponent (0: uniform).
        beta: importance-weight exponent (0: no correction, 1: full).
        epsilon: added to errors so no stored transition has zero priority.

    Raises:
        ConfigError: invalid arguments.
    """

    def __init__(
        self,
        tree: ArrayDict,
        batch_size: int,
        rng: np.random.Generator,
        *,
        alpha: float = 0.6,
        beta: float = 0.4,
        epsilon: float = 1e-6,
        learning_starts: int = 0,
        n_step: int = 1,
        discount: float = 0.99,
        final_observation_capacity: int | None = None,
        frame_stack: int | None = None,
    ) -> None:
        super().__init__(
            tree, batch_size, rng, learning_starts=learning_starts, n_step=n_step,
            discount=discount, final_observation_capacity=final_observation_capacity,
            frame_stack=frame_stack,
        )  # fmt: skip
        if not (math.isfinite(alpha) and alpha >= 0):
            raise ConfigError(f"alpha must be finite and >= 0; got {alpha}")
        if not (math.isfinite(epsilon) and epsilon > 0):
            raise ConfigError(f"epsilon must be positive; got {epsilon}")
        self.beta = beta  # validated by the property setter
        self.alpha = float(alpha)
        self.epsilon = float(epsilon)
        self.priorities = SumTree(self.storage.full_size * self.storage.num_envs)
        self.max_priority = 1.0  # largest priority (after ** alpha) seen so far

    @property
    def beta(self) -> float:
        """Importance-weight exponent in ``[0, 1]``; may be changed (annealed)."""
        return self._beta

    @beta.setter
    def beta(self, value: float) -> None:
        if not 0.0 <= value <= 1.0:
            raise ConfigError(f"beta must be in [0, 1]; got {value}")
        self._beta = float(value)

    def record_batch(self, batch: Mapping[str, Any] | None = None) -> int:
        """Declare a batch stored (see :meth:`UniformReplay.record_batch`); give
        it the maximal priority.

        Steps that drop out of the replay get priority 0.

        Returns:
            The number of transitions the batch added (``T * B``).
        """
        storage = self.storage
        old_oldest, old_size = storage.oldest_row, storage.size
        added = super().record_batch(batch)
        dropped = storage.batch_length + old_size - storage.size
        if dropped:
            # the rows that stopped being offered (history kept for stacks excluded)
            first = old_oldest + storage.history
            rows = (first + np.arange(dropped)) % storage.full_size
            positions = rows[:, None] * storage.num_envs + np.arange(storage.num_envs)
            self.priorities.set(positions.ravel(), np.zeros(positions.size))
        new = storage.new_window_positions()
        new = new[storage.is_stored(new)]  # full_size == T: row 0 is not kept
        self.priorities.set(new, np.full(new.size, self.max_priority))
        return added

    def sample(self, batch_size: int | None = None) -> ReplayBatch:
        """Draw ``batch_size`` transitions proportionally to their priorities.

        Raises:
            ReplayError: before ``learning_starts`` or when fewer are stored.
        """
        batch_size = self.batch_size if batch_size is None else int(batch_size)
        check_can_sample(self.storage, batch_size, self.learning_starts)
        total = self.priorities.total
        segments = (np.arange(batch_size) + self.rng.random(batch_size)) / batch_size
        values = np.minimum(segments * total, np.nextafter(total, 0.0))
        positions = self.priorities.find(values)
        probabilities = self.priorities.priorities[positions] / total
        weights = (self.storage.num_transitions * probabilities) ** -self.beta
        weights /= weights.max()
        return gather_transitions(
            self.storage, positions, self.n_step, self.discount, weights
        )

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Set new priorities (e.g. ``|TD error|``) for sampled positions.

        Positions that are no longer stored (overwritten since sampling) are
        skipped.

        Args:
            indices: ``ReplayBatch.indices`` of the sample.
            priorities: ``[batch]`` non-negative errors.

        Raises:
            ConfigError: mismatched lengths or non-finite / negative values.
        """
        indices = np.asarray(indices, dtype=np.int64).ravel()
        priorities = np.asarray(priorities, dtype=np.float64).ravel()
        if indices.shape != priorities.shape:
            raise ConfigError(
                f"{indices.size} indices but {priorities.size} priorities"
            )
        if not (np.isfinite(priorities).all() and (priorities >= 0).all()):
            raise ConfigError("priorities must be finite and non-negative")
        stored = self.storage.is_stored(indices)
        values = (priorities[stored] + self.epsilon) ** self.alpha
        self.priorities.set(indices[stored], values)
        if values.size:
            self.max_priority = max(self.max_priority, float(values.max()))

    def state_dict(
        self, include_contents: bool = False, copy: bool = True
    ) -> dict[str, Any]:
        """Counters, RNG state, priorities and, optionally, the stored rows."""
        return {
            **super().state_dict(include_contents, copy),
            "priorities": self.priorities.state_dict(),
            "max_priority": self.max_priority,
            "beta": self.beta,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; without contents the replay restarts empty."""
        super().load_state_dict(state)
        self.beta = float(state["beta"])
        self.max_priority = float(state["max_priority"])
        if "contents" in state["storage"]:
            self.priorities.load_state_dict(state["priorities"])
            # a smaller final-observation table may have dropped the oldest steps
            everything = np.arange(self.priorities.size)
            gone = everything[~self.storage.is_stored(everything)]
            self.priorities.set(gone, np.zeros(gone.size))
        else:
            self.priorities.load_state_dict(
                {"priorities": np.zeros(self.priorities.size)}
            )
