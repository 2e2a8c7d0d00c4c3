"""PerRunReplay: the replay of K runs trained as one program (the seed axis).

Every run's envs write into one replay tree of ``K * B`` env columns (run
``k`` owns columns ``k * B .. (k + 1) * B``, as in the sample tree); each
run samples only its own columns, with its own RNG, exactly as a
:class:`~parllel.replays.UniformReplay` of its ``B`` columns would. See
``docs/seeds.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from parllel.errors import ConfigError, ReplayError
from parllel.replays.checkpoint import load_storage_state, storage_state
from parllel.replays.checks import check_replay_config, rng_state, set_rng_state
from parllel.replays.storage import ReplayStorage
from parllel.replays.transitions import ReplayBatch, gather_transitions
from parllel.tree import ArrayDict, tree_map

__all__ = ["PerRunReplay"]


class PerRunReplay:
    """K runs' uniform replays in one replay tree, each run's samples its own.

    Every run records the same steps at once into the shared storage; run ``k``
    draws from ``rngs[k]`` in its own env columns, exactly as a
    :class:`~parllel.replays.UniformReplay` over its ``B`` columns would
    (whose other arguments it takes).

    Example:
        >>> tree = build_replay_tree(cage, handler, batch_T=T, full_size=N)  # K * B envs
        >>> replay = PerRunReplay(tree, 256, [np.random.default_rng(s.replay) for s in run_seeds],
        ...                       learning_starts=1_000)
        >>> replay.record_batch(); batch_of_run_1 = replay.sample(1)

    Args:
        tree: replay tree of ``K * B`` env columns.
        rngs: one seeded ``np.random.Generator`` per run (``K``).
        learning_starts: transitions per run stored before sampling.

    Raises:
        ConfigError: invalid arguments, or env columns that do not split into
            ``K`` runs.
    """

    def __init__(
        self,
        tree: ArrayDict,
        batch_size: int,
        rngs: Sequence[np.random.Generator],
        *,
        learning_starts: int = 0,
        n_step: int = 1,
        discount: float = 0.99,
        final_observation_capacity: int | None = None,
    ) -> None:
        if not rngs:
            raise ConfigError("PerRunReplay needs one numpy Generator per run")
        self.storage = ReplayStorage(tree, final_observation_capacity)
        if self.storage.num_envs % len(rngs):
            raise ConfigError(
                f"the replay tree's {self.storage.num_envs} env columns do not split "
                f"into {len(rngs)} runs: give one rng per run"
            )
        for rng in rngs:
            check_replay_config(
                self.storage, batch_size, learning_starts, n_step, discount, rng
            )
        self.n_runs = len(rngs)
        self.envs_per_run = self.storage.num_envs // self.n_runs
        if learning_starts > self.storage.capacity * self.envs_per_run:
            raise ConfigError(
                f"learning_starts={learning_starts} exceeds what one run stores "
                f"({self.storage.capacity * self.envs_per_run} transitions)"
            )
        self.batch_size = int(batch_size)
        self.learning_starts = int(learning_starts)
        self.n_step = int(n_step)
        self.discount = float(discount)
        self.rngs = list(rngs)

    def __len__(self) -> int:
        """Transitions stored per run (offered to each run's sampling)."""
        return self.storage.size * self.envs_per_run

    @property
    def ready(self) -> bool:
        """True once every run stores ``learning_starts`` (and a batch)."""
        return len(self) >= max(self.learning_starts, self.batch_size)

    def record_batch(self, batch: Mapping[str, Any] | None = None) -> int:
        """Declare the batch of every run stored (see
        :meth:`ReplayStorage.record_batch`); return the transitions per run."""
        return self.storage.record_batch(batch) // self.n_runs

    def sample(self, run: int) -> ReplayBatch:
        """``batch_size`` transitions of run ``run``'s envs, drawn with its rng.

        Raises:
            ReplayError: fewer than ``learning_starts`` or a batch stored.
        """
        return gather_transitions(
            self.storage, self._positions(run), self.n_step, self.discount
        )

    def sample_runs(self, count: int) -> ReplayBatch:
        """``count`` batches of every run, ``[K, count, batch_size, ...]``.

        Run ``k``'s batches are those ``count`` calls of :meth:`sample`
        would draw (its rng draws them in order); the transitions of all runs
        are read in one gather.

        Raises:
            ReplayError: fewer than ``learning_starts`` or a batch stored.
        """
        positions = np.stack(
            [
                np.stack([self._positions(run) for _ in range(count)])
                for run in range(self.n_runs)
            ]
        )
        flat = gather_transitions(
            self.storage, positions.reshape(-1), self.n_step, self.discount
        )
        shape = positions.shape
        return ReplayBatch(
            *(
                tree_map(lambda leaf: leaf.reshape(*shape, *leaf.shape[1:]), field)
                for field in flat
            )
        )

    def _positions(self, run: int) -> np.ndarray:
        """Positions of ``batch_size`` transitions of run ``run``, drawn with
        its rng as a :class:`~parllel.replays.UniformReplay` of its columns."""
        stored = len(self)
        if stored < max(self.learning_starts, self.batch_size):
            raise ReplayError(
                f"each run's replay holds {stored} transitions; sampling needs "
                f"{max(self.learning_starts, self.batch_size)} (check `replay.ready`)"
            )
        B, storage = self.envs_per_run, self.storage
        ages = self.rngs[run].integers(0, stored, size=self.batch_size)
        offsets, envs = np.divmod(ages.astype(np.int64), B)
        rows = (storage.oldest_row + offsets) % storage.full_size
        return rows * storage.num_envs + run * B + envs

    def run_checkpoint(self, run: int) -> RunReplayState:
        """Run ``run``'s checkpoint object: the shared counters and its rng."""
        return RunReplayState(self, run)


class RunReplayState:
    """One run's replay state as a checkpoint object: the shared storage's
    counters (not its rows: a resumed group refills the replay) and the
    run's sampling RNG, in a single replay's ``{"storage", "rng"}`` layout."""

    def __init__(self, replay: PerRunReplay, run: int) -> None:
        self.replay = replay
        self.run = run

    def state_dict(self) -> dict[str, Any]:
        """Counters and this run's RNG state."""
        return {
            "storage": storage_state(self.replay.storage, include_contents=False),
            "rng": rng_state(self.replay.rngs[self.run]),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (the replay restarts empty)."""
        load_storage_state(self.replay.storage, state["storage"])
        set_rng_state(self.replay.rngs[self.run], state["rng"])
