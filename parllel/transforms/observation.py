"""Observation normalization by running mean and std, per Box leaf."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from parllel.errors import ConfigError, DtypeError
from parllel.fields import OBSERVATION, VALID
from parllel.transforms._checks import (
    FLOAT_DTYPES,
)
from parllel.transforms.base import Transform, as_ndarray, get_field
from parllel.transforms.running_stats import RunningMeanStd
from parllel.tree import tree_items
from parllel.validation import check_positive


def _leaves(observation: Any) -> dict[str, Any]:
    """``{path: leaf}`` of an observation tree (``""`` for a bare leaf)."""
    return dict(tree_items(observation))


class NormalizeObservations(Transform):
    """Normalize float observation leaves by running mean/std, in place.

    Each selected leaf (default: every float leaf) gets its own
    :class:`RunningMeanStd`; a call merges the batch into the statistics
    (unless :attr:`frozen`) and writes ``clip((obs - mean) / sqrt(var +
    epsilon))``. Never normalize the same rows twice: with carried-over
    observations call :meth:`normalize` per step instead (see
    docs/transforms.md).

    Example:
        >>> norm = NormalizeObservations(sample_tree, leaves=["position"], clip=5.0)
        >>> norm(sample_tree); norm.frozen = True   # evaluation
    """

    def __init__(
        self,
        sample_tree: Any,
        *,
        leaves: Sequence[str] | None = None,
        clip: float = 10.0,
        epsilon: float = 1e-8,
        only_valid: bool = False,
        observation_field: str = OBSERVATION,
        count_final_observations: bool = False,
        prior_count: float = 0.0,
    ) -> None:
        self.observation_field = observation_field
        self.count_final_observations = bool(count_final_observations)
        self.clip = check_positive("clip", clip, allow_inf=True)
        self.epsilon = check_positive("epsilon", epsilon)
        self.only_valid = bool(only_valid)
        self.frozen = False
        observation = get_field(sample_tree, observation_field, "to normalize")
        all_leaves = _leaves(observation)
        if leaves is None:
            chosen = [
                path
                for path, leaf in all_leaves.items()
                if as_ndarray(leaf, path).dtype in FLOAT_DTYPES
            ]
        else:
            chosen = list(leaves)
        if not chosen:
            raise ConfigError(f"'{observation_field}' has no float leaves to normalize")
        self.stats: dict[str, RunningMeanStd] = {}
        for path in chosen:
            name = f"{observation_field}.{path}" if path else observation_field
            if path not in all_leaves:
                raise ConfigError(
                    f"sample tree is missing field '{name}'; "
                    f"leaves: {sorted(all_leaves)}"
                )
            array = as_ndarray(all_leaves[path], name)
            if array.dtype not in FLOAT_DTYPES:
                raise DtypeError(
                    f"field '{name}' has dtype {array.dtype}; only float32/float64 "
                    "leaves can be normalized in place"
                )
            self.stats[path] = RunningMeanStd(
                array.shape[2:], epsilon=self.epsilon, prior_count=prior_count
            )
        if self.only_valid:
            get_field(
                sample_tree, VALID, "only_valid=True; build ComputeValidMask first"
            )

    def __call__(self, sample_tree: Any) -> Any:
        """Update statistics (unless frozen) and normalize the batch in place."""
        leaves = _leaves(sample_tree[self.observation_field])
        mask = as_ndarray(sample_tree[VALID], VALID) if self.only_valid else None
        for path, stats in self.stats.items():
            array = as_ndarray(leaves[path], path)
            if not self.frozen:
                stats.update(array, mask)
            stats.normalize(array, out=array, clip=self.clip)
        return sample_tree

    def normalize(
        self, observation: Any, update: bool = False, env_indices: Any = None
    ) -> Any:
        """Normalize an observation (sub)tree of any leading shape in place.

        Args:
            observation: the observation leaf or tree, e.g. one time step
                ``sample_tree.observation[t + 1]`` (numpy views).
            update: also merge it into the statistics (ignored if frozen).
            env_indices: the env of each row; unused (one set of statistics
                for every env; see :class:`PerRunObservations`).
        """
        leaves = _leaves(observation)
        for path, stats in self.stats.items():
            array = np.asarray(leaves[path])
            if update and not self.frozen:
                stats.update(array)
            stats.normalize(array, out=array, clip=self.clip)
        return observation

    def state_dict(self) -> dict[str, Any]:
        """Return ``{leaf_path: running statistics}``."""
        return {path: stats.state_dict() for path, stats in self.stats.items()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore statistics; the leaf paths must match."""
        if sorted(state) != sorted(self.stats):
            raise ConfigError(
                f"state dict leaves {sorted(state)} do not match {sorted(self.stats)}"
            )
        for path, stats in self.stats.items():
            stats.load_state_dict(state[path])
