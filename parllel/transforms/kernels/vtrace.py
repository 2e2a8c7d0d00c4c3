"""V-trace off-policy value targets and policy-gradient advantages (IMPALA).

Layout as in :mod:`parllel.transforms.kernels.gae`: float arrays are 2-D
``[T, M]`` (``M = B * N``), flags are ``[T, M / k]`` (column ``m`` reads flag
column ``m // k``), ``bootstrap_value`` is ``[M]``. The importance ratios
``pi(a | x) / mu(a | x)`` (or their logs) are ``[T, M / j]``: one per column
(``j = 1``) or one per env shared by its ``j = N`` components.

With ``rho = min(rho_bar, ratio)``, ``c = lambda * min(c_bar, ratio)`` and
``pg_rho = min(pg_rho_bar, ratio)``, backwards in ``t``::

    delta[t]  = rho[t] * (r[t] + gamma * next_value[t] - V[t])
    v[t] - V[t] = delta[t] + gamma * c[t] * (v[t + 1] - V[t + 1])   (not cut)
    pg_advantage[t] = pg_rho[t] * (r[t] + gamma * next_target[t] - V[t])

``next_value`` follows the GAE rules (0 after a termination, ``final_value``
after a truncation, ``V[t + 1]`` inside an episode, ``bootstrap_value`` after
the last step). ``next_target`` is ``v[t + 1]`` inside an episode and equals
``next_value`` at an episode end or the batch end (nothing is known beyond
it, so the target is the value itself). An episode end cuts the trace. A NaN
ratio gives NaN outputs (it is not clipped to a threshold).

The running ``v[t + 1] - V[t + 1]`` of every column is kept in a float64
``[M]`` scratch array; with all ratios 1, ``rho_bar = c_bar = 1`` and float64
data the operations are those of ``gae_kernel``, so the targets equal the GAE
returns bit for bit.
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
