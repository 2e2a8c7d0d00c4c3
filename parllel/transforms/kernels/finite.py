"""Finding the first NaN or infinity in a ``[T, B, N]`` float array.

One pass sums ``x * 0`` over the whole array: that is 0 when every value is
finite and NaN as soon as one is not (``inf * 0`` and ``nan * 0`` are NaN, and
NaN survives any later addition). The sum may be reassociated, so the pass
vectorizes; only when it is not 0 does a second, exact pass look for the
first non-finite value. The accumulator has the array's dtype (``zero``), so
float32 data is summed in float32 lanes.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, fastmath={"reassoc"})
def _any_nonfinite(x: np.ndarray, zero: float) -> bool:
    total = zero
    n_rows, n_envs, n_features = x.shape
    for t in range(n_rows):
        for b in range(n_envs):
            for n in range(n_features):
                total += x[t, b, n] * zero
    return total != zero


@numba.njit(cache=True, nogil=True)
def first_nonfinite_kernel(x: np.ndarray, zero: float) -> tuple[int, int, int]:
    """Index ``(t, b, n)`` of the first non-finite value of ``x``, or ``(-1, -1, -1)``.

    Args:
        x: ``[T, B, N]`` float32 or float64 array.
        zero: ``0`` of ``x``'s dtype (e.g. ``np.float32(0)``).
    """
    if not _any_nonfinite(x, zero):
        return -1, -1, -1
    n_rows, n_envs, n_features = x.shape
    for t in range(n_rows):
        for b in range(n_envs):
            for n in range(n_features):
                if not np.isfinite(x[t, b, n]):
                    return t, b, n
    return -1, -1, -1  # not reached: the first pass saw a non-finite value
