"""Running mean and variance with the parallel-moments (Chan) update."""

from __future__ import annotations

from typing import Any

import numpy as np

from parllel.errors import ConfigError, ShapeError
from parllel.transforms._checks import (
    check_float_array,
)
from parllel.transforms.kernels.normalization import (
    normalize_kernel,
    update_moments_kernel,
)
from parllel.validation import check_at_least, check_positive


class RunningMeanStd:
    """Running mean and variance of vectors of a fixed ``feature_shape``.

    Each :meth:`update` merges a batch of rows with Chan et al.'s
    parallel-moments formula, so the statistics equal numpy's ``mean`` and
    ``var`` (``ddof=0``) over all rows seen, however they were split into
    batches. Statistics are float64 whatever the data's dtype. Before any data
    the mean is 0 and the variance 1. ``prior_count`` starts the statistics
    with that weight of mean 0 and variance 1 (gymnasium's ``RunningMeanStd``
    starts at ``1e-4``; 0, the default, counts only data).

    Example:
        >>> stats = RunningMeanStd(feature_shape=(3,))
        >>> stats.update(np.random.randn(128, 3))
        >>> stats.normalize(x, out=x, clip=10.0)     # in place
    """

    def __init__(
        self,
        feature_shape: tuple[int, ...] = (),
        epsilon: float = 1e-8,
        prior_count: float = 0.0,
    ):
        self.feature_shape = tuple(int(d) for d in feature_shape)
        self.epsilon = check_positive("epsilon", epsilon)
        prior = float(check_at_least("prior_count", prior_count, 0))
        size = int(np.prod(self.feature_shape)) if self.feature_shape else 1
        self._count = np.full(1, prior, dtype=np.float64)
        self._mean = np.zeros(size, dtype=np.float64)
        self._m2 = np.full(size, prior, dtype=np.float64)  # variance 1
        self._scratch_mean = np.zeros(size, dtype=np.float64)
        self._scratch_m2 = np.zeros(size, dtype=np.float64)
        self._no_mask = np.ones(1, dtype=np.bool_)

    @property
    def count(self) -> float:
        """Number of rows seen so far."""
        return float(self._count[0])

    @property
    def mean(self) -> np.ndarray:
        """Mean over all rows seen (a copy), shaped ``feature_shape``."""
        return self._mean.reshape(self.feature_shape).copy()

    @property
    def var(self) -> np.ndarray:
        """Variance (``ddof=0``) over all rows seen; ones before any data."""
        if self._count[0] == 0:
            return np.ones(self.feature_shape)
        return (self._m2 / self._count[0]).reshape(self.feature_shape)

    def _rows(self, name: str, x: np.ndarray) -> np.ndarray:
        n = len(self.feature_shape)
        if tuple(x.shape[x.ndim - n :]) != self.feature_shape or x.ndim < n:
            raise ShapeError(
                f"field '{name}' must end in feature shape {self.feature_shape}, "
                f"got shape {x.shape}"
            )
        return x.reshape((-1, self._mean.size))

    def update(self, x: np.ndarray, mask: np.ndarray | None = None) -> None:
        """Merge rows ``x`` (``[..., *feature_shape]``) into the statistics.

        Args:
            x: data; all leading dims are rows.
            mask: optional bool array of the leading shape; False rows are
                skipped.
        """
        x = np.asarray(x)
        if x.dtype.kind not in "fiub":
            raise ConfigError(f"cannot take statistics of dtype {x.dtype}")
        rows = self._rows("data", x)
        if mask is None:
            flags, use_mask = self._no_mask, False
        else:
            mask = np.asarray(mask)
            lead = x.shape[: x.ndim - len(self.feature_shape)]
            if tuple(mask.shape) != tuple(lead):
                raise ShapeError(
                    f"field 'valid' must have shape {tuple(lead)}, got {mask.shape}"
                )
            flags, use_mask = mask.reshape(-1), True
        update_moments_kernel(
            rows,
            flags,
            use_mask,
            self._count,
            self._mean,
            self._m2,
            self._scratch_mean,
            self._scratch_m2,
        )

    def normalize(
        self, x: np.ndarray, out: np.ndarray | None = None, clip: float = np.inf
    ) -> np.ndarray:
        """Return ``clip((x - mean) / sqrt(var + epsilon), -clip, clip)``.

        Args:
            x: float data ``[..., *feature_shape]``.
            out: optional output of the same shape (may be ``x``).
            clip: bound of the result; ``inf`` for none.
        """
        x = check_float_array("data", x)
        if out is None:
            out = np.empty_like(x)
        if out.shape != x.shape:
            raise ShapeError(f"out must have shape {x.shape}, got {out.shape}")
        rows = self._rows("data", x)
        out_rows = out.reshape(rows.shape)
        if out.size and not np.shares_memory(out_rows, out):
            raise ShapeError("out must be reshapeable to rows without a copy")
        normalize_kernel(
            rows,
            self._count,
            self._mean,
            self._m2,
            self.epsilon,
            check_positive("clip", clip, allow_inf=True),
            out_rows,
        )
        return out

    def state_dict(self) -> dict[str, Any]:
        """Return the statistics as plain numpy arrays (copies)."""
        return {
            "count": self._count.copy(),
            "mean": self._mean.reshape(self.feature_shape).copy(),
            "m2": self._m2.reshape(self.feature_shape).copy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore statistics saved by :meth:`state_dict`."""
        try:
            count = np.asarray(state["count"], dtype=np.float64).reshape(1)
            mean = np.asarray(state["mean"], dtype=np.float64)
            m2 = np.asarray(state["m2"], dtype=np.float64)
        except KeyError as missing:
            raise ConfigError(f"state dict is missing key {missing}") from None
        for name, arr in (("mean", mean), ("m2", m2)):
            if tuple(arr.shape) != self.feature_shape:
                raise ShapeError(
                    f"state '{name}' has shape {arr.shape}, "
                    f"expected {self.feature_shape}"
                )
        self._count[:] = count
        self._mean[:] = mean.reshape(-1)
        self._m2[:] = m2.reshape(-1)
