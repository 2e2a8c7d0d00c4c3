"""Statistics per run when K runs share one sample tree (the seed axis).

K runs of ``B`` envs each fill one ``[T, K * B]`` tree; run ``k`` owns the
env columns ``k * B .. (k + 1) * B``. A normalizer built for one run keeps
one set of statistics over every column it sees, so K runs would share it.
:class:`PerRunObservations` and :class:`PerRunTransform` hold one normalizer
per run, each fed only its run's columns; ``.runs[k]`` is run ``k``'s, with
the state dict of a single run's (a seeded run's checkpoint holds what a
single run's does).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from parllel.errors import ConfigError
from parllel.transforms.base import Transform, as_ndarray, get_field
from parllel.transforms.observation import NormalizeObservations
from parllel.tree import tree_items, tree_map

__all__ = ["PerRunObservations", "PerRunTransform"]


def _check_runs(runs: Sequence[Any], envs_per_run: int) -> None:
    if not runs:
        raise ConfigError("per-run statistics need at least one run")
    if envs_per_run < 1:
        raise ConfigError(f"envs_per_run must be >= 1, got {envs_per_run}")


class PerRunObservations:
    """Observation normalization with statistics per run.

    A sampler's ``observation_normalizer``: every observation it normalizes
    is split by env into runs (``env // envs_per_run``), each normalized and
    counted by its run's :class:`~parllel.transforms.NormalizeObservations`.

    Example:
        >>> normalizer = PerRunObservations(
        ...     [NormalizeObservations(sample_tree, clip=10.0) for _ in range(K)], B)
        >>> sampler = FeedForwardSampler(cage, handler, sample_tree,
        ...                              observation_normalizer=normalizer)

    Args:
        runs: one normalizer per run, in column order.
        envs_per_run: B, the envs of each run.
    """

    def __init__(self, runs: Sequence[NormalizeObservations], envs_per_run: int):
        _check_runs(runs, envs_per_run)
        if len({run.count_final_observations for run in runs}) > 1:
            raise ConfigError(
                "the runs' normalizers disagree on count_final_observations: "
                "build them all with the same value"
            )
        self.runs = list(runs)
        self.envs_per_run = int(envs_per_run)

    @property
    def count_final_observations(self) -> bool:
        """Whether the runs count final observations (all or none may)."""
        return self.runs[0].count_final_observations

    @property
    def frozen(self) -> bool:
        """Whether the statistics are frozen (every run's)."""
        return all(run.frozen for run in self.runs)

    @frozen.setter
    def frozen(self, value: bool) -> None:
        for run in self.runs:
            run.frozen = value

    def normalize(
        self, observation: Any, update: bool = False, env_indices: Any = None
    ) -> Any:
        """Normalize each row in place with its run's statistics.

        Args:
            observation: leaves ``[N, ...]``, one row per env.
            update: also merge the rows into their runs' statistics.
            env_indices: the env of each row (None: rows ``0 .. N - 1``).
        """
        first = next(leaf for _, leaf in tree_items(observation))
        envs = np.arange(len(first)) if env_indices is None else np.asarray(env_indices)
        runs = envs // self.envs_per_run
        if len(runs) and runs.max() >= len(self.runs):
            raise ConfigError(
                f"env {envs.max()} is beyond the {len(self.runs)} runs of "
                f"{self.envs_per_run} envs"
            )
        for run in np.unique(runs):
            rows = np.flatnonzero(runs == run)
            part = tree_map(lambda leaf, rows=rows: np.asarray(leaf)[rows], observation)
            self.runs[int(run)].normalize(part, update=update)
            for (_, target), (_, value) in zip(
                tree_items(observation), tree_items(part)
            ):
                np.asarray(target)[rows] = value
        return observation


class PerRunTransform(Transform):
    """A batch transform with statistics per run (e.g. reward normalization).

    Each batch, run ``k``'s columns of the ``fields`` are copied into a tree
    of their own, transformed by run ``k``'s transform and written back.

    Example:
        >>> rewards = PerRunTransform(
        ...     sample_tree, lambda tree: NormalizeRewards(tree, gamma=0.99), K,
        ...     fields=("reward", "terminated", "truncated"), writes=("reward",))

    Args:
        sample_tree: the ``[T, K * B]`` tree.
        build: makes one run's transform from a ``[T, B]`` tree of ``fields``.
        n_runs: K.
        fields: the top-level fields the transform reads.
        writes: the fields it writes (a subset of ``fields``).

    Raises:
        ConfigError: columns that do not split into ``n_runs``, or ``writes``
            not among ``fields``.
    """

    def __init__(
        self,
        sample_tree: Any,
        build: Callable[[Any], Transform],
        n_runs: int,
        *,
        fields: Sequence[str],
        writes: Sequence[str],
    ) -> None:
        columns = as_ndarray(get_field(sample_tree, fields[0]), fields[0]).shape[1]
        if n_runs < 1 or columns % n_runs:
            raise ConfigError(f"{columns} env columns do not split into {n_runs} runs")
        if not set(writes) <= set(fields):
            raise ConfigError(f"writes {list(writes)} must be among fields {fields}")
        self.fields = tuple(fields)
        self.writes = tuple(writes)
        self.envs_per_run = columns // n_runs
        self.runs = [build(self._part(sample_tree, run)) for run in range(n_runs)]

    def _columns(self, run: int) -> slice:
        B = self.envs_per_run
        return slice(run * B, (run + 1) * B)

    def _part(self, sample_tree: Any, run: int) -> dict[str, np.ndarray]:
        columns = self._columns(run)
        return {
            name: np.ascontiguousarray(
                as_ndarray(get_field(sample_tree, name), name)[:, columns]
            )
            for name in self.fields
        }

    def __call__(self, sample_tree: Any) -> Any:
        """Run each run's transform on its columns, in place."""
        for run, transform in enumerate(self.runs):
            part = transform(self._part(sample_tree, run))
            columns = self._columns(run)
            for name in self.writes:
                as_ndarray(get_field(sample_tree, name), name)[:, columns] = part[name]
        return sample_tree

    def state_dict(self) -> dict[str, Any]:
        """``{"run0": ..., "run1": ...}``: each run's transform state."""
        return {f"run{k}": run.state_dict() for k, run in enumerate(self.runs)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        for k, run in enumerate(self.runs):
            run.load_state_dict(state[f"run{k}"])
