"""Statistics of the learning benchmarks: medians over seeds, bootstrap intervals.

A learning comparison decides only where its interval says so: the ratio of
two medians over many seeds (20 or more per contender), with a percentile
bootstrap interval that resamples each contender's seeds independently.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def finite_or_none(value: float, digits: int = 3) -> float | None:
    """``value`` rounded, or None where it is infinite or NaN (JSON has neither)."""
    return round(float(value), digits) if math.isfinite(value) else None


def median_ratio_interval(
    ours: Sequence[float],
    theirs: Sequence[float],
    *,
    level: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``median(ours) / median(theirs)`` and its percentile bootstrap interval.

    Each side's values (one per seed; ``inf`` for a run that never reached the
    target) are resampled with replacement, independently, ``resamples``
    times. Returns ``(ratio, low, high)``; NaN where a ratio is undefined.
    """
    a = np.asarray(ours, dtype=np.float64)
    b = np.asarray(theirs, dtype=np.float64)
    if a.size == 0 or b.size == 0:
        raise ValueError("median_ratio_interval needs at least one value per side")
    rng = np.random.default_rng(seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = float(np.median(a) / np.median(b))
        medians_a = np.median(a[rng.integers(0, a.size, (resamples, a.size))], axis=1)
        medians_b = np.median(b[rng.integers(0, b.size, (resamples, b.size))], axis=1)
        ratios = medians_a / medians_b
    tail = (1.0 - level) / 2.0 * 100.0
    finite = ratios[~np.isnan(ratios)]
    if finite.size == 0:
        return ratio, math.nan, math.nan
    # no interpolation: a bound may be inf (runs that never reached the target)
    low, high = np.percentile(finite, [tail, 100.0 - tail], method="inverted_cdf")
    return ratio, float(low), float(high)


def verdict(low: float, high: float) -> str:
    """What an interval of ``ours / theirs`` (lower is better) allows one to say."""
    if high < 1.0:
        return "lower (interval below 1)"
    if low > 1.0:
        return "higher (interval above 1)"
    return "no difference shown (interval contains 1)"
