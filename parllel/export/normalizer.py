"""The observation normalizer of a policy: saved statistics, applied to raw observations.

A training run normalizes each fresh observation with
:class:`~parllel.transforms.NormalizeObservations` before the agent sees it;
an exported policy must do the same, with the statistics frozen at export.
:class:`FrozenObservationNormalizer` holds one
:class:`~parllel.transforms.RunningMeanStd` per normalized leaf and applies
the very same kernel, so the agent sees bit-identical inputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from parllel.cages.spaces import value_at
from parllel.errors import ConfigError, PolicyFileError
from parllel.transforms.running_stats import RunningMeanStd

__all__ = ["FrozenObservationNormalizer", "normalizer_to_data"]


def _stats_of(normalizer: Any) -> Mapping[str, RunningMeanStd]:
    stats = getattr(normalizer, "stats", None)
    if not isinstance(stats, Mapping) or not all(
        isinstance(s, RunningMeanStd) for s in stats.values()
    ):
        raise ConfigError(
            f"{type(normalizer).__name__} is not an observation normalizer: "
            "expected a parllel.transforms.NormalizeObservations (with .stats, "
            ".clip and .epsilon)"
        )
    return stats


def normalizer_to_data(normalizer: Any, *, with_state: bool = True) -> dict[str, Any]:
    """A normalizer's settings (and statistics, as numpy arrays) as plain data.

    Args:
        normalizer: a :class:`~parllel.transforms.NormalizeObservations`.
        with_state: include the statistics (``count``, ``mean``, ``m2``);
            without, only the settings and each leaf's feature shape.
    """
    leaves: dict[str, Any] = {}
    for path, stats in _stats_of(normalizer).items():
        leaf: dict[str, Any] = {"feature_shape": list(stats.feature_shape)}
        if with_state:
            leaf.update(
                {key: np.array(value) for key, value in stats.state_dict().items()}
            )
        leaves[path] = leaf
    return {
        "clip": float(normalizer.clip),
        "epsilon": float(normalizer.epsilon),
        "leaves": leaves,
    }


class FrozenObservationNormalizer:
    """Normalize observations with fixed statistics, as the training sampler did.

    Args:
        clip: the bound of normalized values.
        epsilon: added to the variance.
        leaves: ``{leaf path: {"feature_shape", "count", "mean", "m2"}}``
            (arrays or tensors), as :func:`normalizer_to_data` writes them.
    """

    def __init__(
        self, clip: float, epsilon: float, leaves: Mapping[str, Mapping[str, Any]]
    ) -> None:
        self.clip = float(clip)
        self.stats: dict[str, RunningMeanStd] = {}
        try:
            for path, leaf in leaves.items():
                stats = RunningMeanStd(tuple(leaf["feature_shape"]), epsilon=epsilon)
                stats.load_state_dict(
                    {key: np.asarray(leaf[key]) for key in ("count", "mean", "m2")}
                )
                self.stats[str(path)] = stats
        except (KeyError, TypeError, ValueError) as error:
            raise PolicyFileError(
                f"bad observation normalizer statistics: {type(error).__name__}: {error}"
            ) from error

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> FrozenObservationNormalizer:
        """Build one from :func:`normalizer_to_data`'s output."""
        try:
            return cls(data["clip"], data["epsilon"], data["leaves"])
        except KeyError as missing:
            raise PolicyFileError(
                f"observation normalizer data lacks {missing}"
            ) from None

    def normalize(self, observation: Any) -> Any:
        """Normalize the float leaves of ``observation`` (numpy, any leading dims) in place."""
        for path, stats in self.stats.items():
            leaf = np.asarray(value_at(observation, path))
            stats.normalize(leaf, out=leaf, clip=self.clip)
        return observation
