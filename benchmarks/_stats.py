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
    a, b, medians_a, medians_b = _bootstrap_medians(ours, theirs, resamples, seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = float(np.median(a) / np.median(b))
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


def _bootstrap_medians(
    ours: Sequence[float], theirs: Sequence[float], resamples: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Both sides as arrays and ``resamples`` medians of each side's values
    resampled with replacement, independently."""
    a = np.asarray(ours, dtype=np.float64)
    b = np.asarray(theirs, dtype=np.float64)
    if a.size == 0 or b.size == 0:
        raise ValueError("a bootstrap of medians needs at least one value per side")
    rng = np.random.default_rng(seed)
    with np.errstate(invalid="ignore"):
        medians_a = np.median(a[rng.integers(0, a.size, (resamples, a.size))], axis=1)
        medians_b = np.median(b[rng.integers(0, b.size, (resamples, b.size))], axis=1)
    return a, b, medians_a, medians_b


def median_interval(
    values: Sequence[float],
    *,
    level: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``median(values)`` and its percentile bootstrap interval."""
    _, _, medians, _ = _bootstrap_medians(values, values, resamples, seed)
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(medians, [tail, 100.0 - tail], method="inverted_cdf")
    return float(np.median(values)), float(low), float(high)


def median_difference_interval(
    ours: Sequence[float],
    theirs: Sequence[float],
    *,
    level: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``median(ours) - median(theirs)`` and its percentile bootstrap interval
    (each side resampled independently): for figures that may be negative,
    such as returns, where a ratio means nothing."""
    a, b, medians_a, medians_b = _bootstrap_medians(ours, theirs, resamples, seed)
    tail = (1.0 - level) / 2.0 * 100.0
    differences = medians_a - medians_b
    low, high = np.percentile(differences, [tail, 100.0 - tail], method="inverted_cdf")
    return float(np.median(a) - np.median(b)), float(low), float(high)


def difference_verdict(low: float, high: float) -> str:
    """What an interval of ``ours - theirs`` (higher is better, e.g. returns)
    allows one to say."""
    if low > 0.0:
        return "higher (interval above 0)"
    if high < 0.0:
        return "lower (interval below 0)"
    return "no difference shown (interval contains 0)"


def mean_difference_interval(
    ours: Sequence[float],
    theirs: Sequence[float],
    *,
    level: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``mean(ours) - mean(theirs)`` and its percentile bootstrap interval
    (each side's values resampled with replacement, independently): the
    two-sided comparison of final returns over a few seeds per side."""
    a = np.asarray(ours, dtype=np.float64)
    b = np.asarray(theirs, dtype=np.float64)
    if a.size == 0 or b.size == 0:
        raise ValueError("a bootstrap of means needs at least one value per side")
    rng = np.random.default_rng(seed)
    means_a = a[rng.integers(0, a.size, (resamples, a.size))].mean(axis=1)
    means_b = b[rng.integers(0, b.size, (resamples, b.size))].mean(axis=1)
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(
        means_a - means_b, [tail, 100.0 - tail], method="inverted_cdf"
    )
    return float(a.mean() - b.mean()), float(low), float(high)
