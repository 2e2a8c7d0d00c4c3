"""Running moments and normalization kernels.

Running statistics are kept as ``count`` (a 1-element float64 array so kernels
can update it in place), ``mean`` and ``m2`` (sum of squared deviations from
the mean, so ``var = m2 / count``, numpy's ``ddof=0``). New data is merged with
the parallel-moments update of Chan, Golub and LeVeque: the batch's own mean
and ``m2`` are computed with two passes, then combined with the running ones.
That makes the result independent (up to rounding) of how the data is split.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _combine_moments(
    count: float,
    mean: np.ndarray,
    m2: np.ndarray,
    batch_count: float,
    batch_mean: float,
    batch_m2: float,
    j: int,
) -> None:
    """Merge one feature ``j`` of a batch into running moments (Chan et al.)."""
    total = count + batch_count
    delta = batch_mean - mean[j]
    mean[j] = mean[j] + delta * (batch_count / total)
    m2[j] = m2[j] + batch_m2 + delta * delta * (count * batch_count / total)


@numba.njit(cache=True, nogil=True)
def update_moments_kernel(
    x: np.ndarray,
    mask: np.ndarray,
    use_mask: bool,
    count: np.ndarray,
    mean: np.ndarray,
    m2: np.ndarray,
    scratch_mean: np.ndarray,
    scratch_m2: np.ndarray,
) -> None:
    """Merge the rows of ``x`` into running moments, in place.

    Args:
        x: ``[R, F]`` data rows.
        mask: ``[R]`` flags; rows where False are skipped if ``use_mask``.
        use_mask: whether to read ``mask``.
        count: ``[1]`` float64 running count (updated).
        mean: ``[F]`` float64 running mean (updated).
        m2: ``[F]`` float64 running sum of squared deviations (updated).
        scratch_mean: ``[F]`` float64 scratch space.
        scratch_m2: ``[F]`` float64 scratch space.
    """
    n_rows, n_features = x.shape
    batch_count = 0.0
    scratch_mean[:] = 0.0
    scratch_m2[:] = 0.0
    for r in range(n_rows):
        if use_mask and not mask[r]:
            continue
        batch_count += 1.0
        for j in range(n_features):
            scratch_mean[j] += x[r, j]
    if batch_count == 0.0:
        return
    for j in range(n_features):
        scratch_mean[j] /= batch_count
    for r in range(n_rows):
        if use_mask and not mask[r]:
            continue
        for j in range(n_features):
            d = x[r, j] - scratch_mean[j]
            scratch_m2[j] += d * d
    for j in range(n_features):
        _combine_moments(
            count[0], mean, m2, batch_count, scratch_mean[j], scratch_m2[j], j
        )
    count[0] += batch_count


@numba.njit(cache=True, nogil=True)
def normalize_kernel(
    x: np.ndarray,
    count: np.ndarray,
    mean: np.ndarray,
    m2: np.ndarray,
    epsilon: float,
    clip: float,
    out: np.ndarray,
) -> None:
    """Write ``clip((x - mean) / sqrt(var + epsilon), -clip, clip)`` to ``out``.

    Before any data was seen (``count == 0``) the variance is taken as 1 and the
    mean as 0. ``out`` may be ``x`` itself.

    Args:
        x: ``[R, F]`` data.
        count: ``[1]`` running count.
        mean: ``[F]`` running mean.
        m2: ``[F]`` running sum of squared deviations.
        epsilon: added to the variance.
        clip: bound for the result (``inf`` disables clipping).
        out: ``[R, F]`` output.
    """
    n_rows, n_features = x.shape
    n = count[0]
    for r in range(n_rows):
        for j in range(n_features):
            if n > 0.0:
                scale = 1.0 / np.sqrt(m2[j] / n + epsilon)
                center = mean[j]
            else:
                scale = 1.0 / np.sqrt(1.0 + epsilon)
                center = 0.0
            y = (x[r, j] - center) * scale
            out[r, j] = min(max(y, -clip), clip)


@numba.njit(cache=True, nogil=True)
def normalize_advantage_kernel(
    advantage: np.ndarray,
    mask: np.ndarray,
    use_mask: bool,
    components_per_flag: int,
    epsilon: float,
) -> None:
    """Standardize ``advantage`` in place: ``(a - mean) / (std + epsilon)``.

    Mean and std are taken over all entries, or only over those whose ``mask``
    is True if ``use_mask``; only those entries are rewritten. The std is the
    sample std (``ddof=1``, as SB3's and CleanRL's ``advantages.std()``).
    Nothing changes if fewer than two entries are selected.

    Args:
        advantage: ``[T, M]`` advantages (updated).
        mask: ``[T, M / k]`` valid flags.
        use_mask: whether to read ``mask``.
        components_per_flag: ``k``; column ``m`` uses mask column ``m // k``.
        epsilon: added to the std.
    """
    n_steps, n_columns = advantage.shape
    k = components_per_flag
    total = 0.0
    n = 0.0
    for t in range(n_steps):
        for m in range(n_columns):
            if use_mask and not mask[t, m // k]:
                continue
            total += advantage[t, m]
            n += 1.0
    if n < 2.0:
        return
    mean = total / n
    sq = 0.0
    for t in range(n_steps):
        for m in range(n_columns):
            if use_mask and not mask[t, m // k]:
                continue
            d = advantage[t, m] - mean
            sq += d * d
    scale = 1.0 / (np.sqrt(sq / (n - 1.0)) + epsilon)
    for t in range(n_steps):
        for m in range(n_columns):
            if use_mask and not mask[t, m // k]:
                continue
            advantage[t, m] = (advantage[t, m] - mean) * scale


@numba.njit(cache=True, nogil=True)
def normalize_reward_kernel(
    reward: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    mask: np.ndarray,
    use_mask: bool,
    components_per_flag: int,
    gamma: float,
    epsilon: float,
    clip: float,
    update: bool,
    termination_only: bool,
    returns: np.ndarray,
    count: np.ndarray,
    mean: np.ndarray,
    m2: np.ndarray,
    scratch_count: np.ndarray,
    scratch_mean: np.ndarray,
    scratch_m2: np.ndarray,
) -> None:
    """Scale rewards by the running std of the discounted return, in place.

    Step by step, as Stable-Baselines3's ``VecNormalize``: per column
    ``R = gamma * R + r`` updates the running moments (per component
    ``m % N``, unless not ``update``), then ``r <- clip(r / sqrt(var +
    epsilon))``, then ``R = 0`` where the episode ended. ``termination_only``:
    gymnasium 0.28's rule, ``R = gamma * (1 - terminated) * R + r``. Masked
    steps are skipped. ``reward``, ``returns`` and the moments (``count``,
    ``mean``, ``m2``: ``[N]``) are updated; the ``scratch_*`` arrays are
    ``[N]`` float64 workspace.

    Args:
        reward: ``[T, M]`` rewards.
        terminated: ``[T, M / k]`` flags; ``truncated`` and ``mask`` likewise.
        components_per_flag: ``k`` (also the number of components ``N``).
        returns: ``[M]`` float64 running returns.
    """
    n_steps, n_columns = reward.shape
    k = components_per_flag
    n_comp = mean.shape[0]
    for t in range(n_steps):
        for m in range(n_columns):
            if use_mask and not mask[t, m // k]:
                continue
            if termination_only and terminated[t, m // k]:
                returns[m] = reward[t, m]
            else:
                returns[m] = gamma * returns[m] + reward[t, m]
        if update:
            scratch_count[:] = 0.0
            scratch_mean[:] = 0.0
            scratch_m2[:] = 0.0
            for m in range(n_columns):
                if use_mask and not mask[t, m // k]:
                    continue
                scratch_count[m % n_comp] += 1.0
                scratch_mean[m % n_comp] += returns[m]
            for j in range(n_comp):
                if scratch_count[j] > 0.0:
                    scratch_mean[j] /= scratch_count[j]
            for m in range(n_columns):
                if use_mask and not mask[t, m // k]:
                    continue
                d = returns[m] - scratch_mean[m % n_comp]
                scratch_m2[m % n_comp] += d * d
            for j in range(n_comp):
                if scratch_count[j] > 0.0:
                    _combine_moments(
                        count[j],
                        mean,
                        m2,
                        scratch_count[j],
                        scratch_mean[j],
                        scratch_m2[j],
                        j,
                    )
                    count[j] += scratch_count[j]
        for m in range(n_columns):
            f = m // k
            if use_mask and not mask[t, f]:
                continue
            c = m % n_comp
            var = m2[c] / count[c] if count[c] > 0.0 else 1.0
            y = reward[t, m] / np.sqrt(var + epsilon)
            reward[t, m] = min(max(y, -clip), clip)
            if not termination_only and (terminated[t, f] or truncated[t, f]):
                returns[m] = 0.0
