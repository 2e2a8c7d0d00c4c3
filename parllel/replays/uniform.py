"""Uniform experience replay over full-size rotating Arrays."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from parllel.replays.checkpoint import (
    COUNTED_STATE_ENTRIES,
    load_storage_state,
    storage_state,
)
from parllel.replays.checks import (
    check_can_sample,
    check_replay_config,
    rng_state,
    set_rng_state,
)
from parllel.replays.storage import ReplayStorage
from parllel.replays.transitions import ReplayBatch, gather_transitions
from parllel.tree import ArrayDict

__all__ = ["UniformReplay"]


class UniformReplay:
    """Sample stored transitions uniformly, with replacement.

    The replay tree has full-size Arrays (``full_size=N``, a multiple of
    ``T``; padding 1 on the observation), e.g. from
    :func:`parllel.patterns.build_replay_tree`. After each collected batch,
    :meth:`record_batch` copies the sampler's ``[T, B]`` window in and
    rotates the replay tree (or, without an argument, declares stored a
    window a custom sampler wrote in place). The replay keeps the ``N - 1``
    newest steps per env.

    A sample's ``next_observation`` is the episode's ``FINAL_OBSERVATION``
    where the step ended an episode, never the next episode's reset
    observation; see :class:`~parllel.replays.transitions.ReplayBatch` for n-step samples.

    Example:
        >>> tree = build_replay_tree(cage, handler, batch_T=T, full_size=100_000)
        >>> replay = UniformReplay(tree, batch_size=256,
        ...                        rng=np.random.default_rng(0), learning_starts=1000)
        >>> batch, _ = sampler.collect_batch(); replay.record_batch(batch)
        >>> if replay.ready:
        ...     batch = replay.sample()   # ReplayBatch of [256, ...] numpy arrays

    Args:
        tree: replay tree; see :class:`~parllel.replays.ReplayStorage`.
        batch_size: transitions per :meth:`sample`.
        rng: seeded ``np.random.Generator``.
        learning_starts: transitions that must be stored before sampling.
        n_step: steps summed per sample (1: plain transitions).
        discount: ``gamma`` for n-step returns and the reported discount.
        final_observation_capacity: final observations (episode ends) the
            replay keeps at most; see :class:`~parllel.replays.ReplayStorage`
            (default: one per 32 stored steps, and at least 64 MiB worth).
        frame_stack: ``k`` to store one frame per step of ``k``-frame stacks
            and rebuild the stacks when sampling (opt-in; the tree from
            :func:`~parllel.replays.frames.build_frame_replay_tree`, batches recorded
            with ``record_batch(sample_tree)``; see :mod:`parllel.replays.frames`).

    Raises:
        ConfigError: invalid arguments.
    """

    #: state entries whose first axis is a count (the saved episode ends):
    #: a checkpoint's may differ from this replay's (this makes every replay a
    #: :class:`~parllel.runtime.compatibility.CountedState`)
    counted_state_entries = COUNTED_STATE_ENTRIES

    def __init__(
        self,
        tree: ArrayDict,
        batch_size: int,
        rng: np.random.Generator,
        *,
        learning_starts: int = 0,
        n_step: int = 1,
        discount: float = 0.99,
        final_observation_capacity: int | None = None,
        frame_stack: int | None = None,
    ) -> None:
        self.storage = ReplayStorage(tree, final_observation_capacity, frame_stack)
        check_replay_config(
            self.storage, batch_size, learning_starts, n_step, discount, rng
        )
        self.batch_size = int(batch_size)
        self.learning_starts = int(learning_starts)
        self.n_step = int(n_step)
        self.discount = float(discount)
        self.rng = rng

    def __len__(self) -> int:
        return self.storage.num_transitions

    @property
    def ready(self) -> bool:
        """True once ``learning_starts`` (and at least a batch) are stored."""
        stored = self.storage.num_transitions
        return stored >= self.learning_starts and stored >= self.batch_size

    def record_batch(self, batch: Mapping[str, Any] | None = None) -> int:
        """Declare a collected batch stored: written in place, or copied from ``batch``.

        See :meth:`ReplayStorage.record_batch`: without ``batch`` the sampler
        wrote into this tree's window; with the sampler's own ``[T, B]`` tree
        its window is copied in and this tree rotated to the next window.

        Returns:
            The number of transitions the batch added (``T * B``).
        """
        return self.storage.record_batch(batch)

    def sample(self, batch_size: int | None = None) -> ReplayBatch:
        """Draw ``batch_size`` (default: the configured size) transitions.

        Raises:
            ReplayError: before ``learning_starts`` or when fewer are stored.
        """
        batch_size = self.batch_size if batch_size is None else int(batch_size)
        check_can_sample(self.storage, batch_size, self.learning_starts)
        ages = self.rng.integers(0, self.storage.num_transitions, size=batch_size)
        positions = self.storage.positions_from_age(ages)
        return gather_transitions(self.storage, positions, self.n_step, self.discount)

    def state_dict(
        self, include_contents: bool = False, copy: bool = True
    ) -> dict[str, Any]:
        """Counters, RNG state and, optionally, every stored row (copies, or
        views with ``copy=False``: enough to compare shapes)."""
        return {
            "storage": storage_state(self.storage, include_contents, copy),
            "rng": rng_state(self.rng),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (see
        :func:`~parllel.replays.checkpoint.load_storage_state`)."""
        load_storage_state(self.storage, state["storage"])
        set_rng_state(self.rng, state["rng"])
