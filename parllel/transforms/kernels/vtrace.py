"""V-trace off-policy value targets and policy-gradient advantages (IMPALA).

Layout as in :mod:`parllel.transforms.kernels.gae`: float arrays ``[T, M]``
(``M = B * N``), flags ``[T, M / k]``, ``bootstrap_value`` ``[M]``; the
ratios (or their logs) are ``[T, M / j]``, one per column or per env. The
recursion and its episode-end cases are in docs/transforms.md ("V-trace").
The running ``v - V`` is carried in float64, so with all ratios 1 and
``rho_bar = c_bar = 1`` the targets equal ``gae_kernel``'s returns bit for
bit. A NaN ratio gives NaN outputs.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def vtrace_kernel(
    reward: np.ndarray,
    value: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    bootstrap_value: np.ndarray,
    final_value: np.ndarray,
    ratio: np.ndarray,
    ratio_is_log: bool,
    components_per_ratio: int,
    gamma: float,
    trace_lambda: float,
    rho_bar: float,
    c_bar: float,
    pg_rho_bar: float,
    bootstrap_truncated: bool,
    components_per_flag: int,
    return_out: np.ndarray,
    advantage_out: np.ndarray,
) -> None:
    """Write V-trace targets and policy-gradient advantages in place.

    Args:
        reward: ``[T, M]`` rewards.
        value: ``[T, M]`` values ``V(x_t)``.
        terminated: ``[T, M / k]`` flags (bool or integer).
        truncated: same shape as ``terminated``.
        bootstrap_value: ``[M]`` value of ``observation[T]``.
        final_value: ``[T, M]`` value of the final observation, read only where
            truncated and only if ``bootstrap_truncated``; otherwise a
            truncation counts as a termination.
        ratio: ``[T, M / j]`` importance ratios, or their logs.
        ratio_is_log: whether ``ratio`` holds ``log pi - log mu``.
        components_per_ratio: ``j``; column ``m`` uses ratio column ``m // j``.
        gamma: discount factor.
        trace_lambda: scale of the trace coefficients ``c``.
        rho_bar: clip of the ratios in the temporal differences.
        c_bar: clip of the ratios in the trace coefficients.
        pg_rho_bar: clip of the ratios weighting the policy-gradient advantage.
        bootstrap_truncated: whether truncations bootstrap from ``final_value``.
        components_per_flag: ``k``; column ``m`` uses flag column ``m // k``.
        return_out: ``[T, M]`` output, the V-trace targets ``v``.
        advantage_out: ``[T, M]`` output, the policy-gradient advantages.
    """
    n_steps, n_columns = reward.shape
    k = components_per_flag
    j = components_per_ratio
    trace = np.zeros(n_columns)  # v[t + 1] - V[t + 1], float64
    for t in range(n_steps - 1, -1, -1):
        last = t == n_steps - 1
        for m in range(n_columns):
            f = m // k
            term = terminated[t, f]
            trunc = truncated[t, f]
            cut = last or term or trunc
            if term:
                next_value = 0.0
            elif trunc:
                next_value = final_value[t, m] if bootstrap_truncated else 0.0
            elif last:
                next_value = bootstrap_value[m]
            else:
                next_value = value[t + 1, m]
            r = ratio[t, m // j]
            if ratio_is_log:
                r = np.exp(r)
            # clip as ``bar if r > bar else r`` so that a NaN ratio stays NaN
            # (``min(bar, nan)`` would silently give ``bar``)
            rho = rho_bar if r > rho_bar else r
            v = value[t, m]
            reward_tm = reward[t, m]
            delta = rho * (reward_tm + gamma * next_value - v)
            if cut:
                difference = delta
                next_target = next_value
            else:
                c = trace_lambda * (c_bar if r > c_bar else r)
                difference = delta + (gamma * c) * trace[m]
                next_target = next_value + trace[m]
            trace[m] = difference
            return_out[t, m] = difference + v
            pg_rho = pg_rho_bar if r > pg_rho_bar else r
            advantage_out[t, m] = pg_rho * (reward_tm + gamma * next_target - v)
