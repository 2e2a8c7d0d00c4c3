"""Generalized advantage estimation and discounted returns as numba kernels.

Float arrays are 2-D ``[T, M]`` with ``M = B * N`` (env axis and trailing
feature dims flattened); ``terminated`` and ``truncated`` are ``[T, M / k]``
(column ``m`` reads flag column ``m // k``); ``bootstrap_value`` is ``[M]``.
The episode-end rules are the table of docs/transforms.md ("Terminated,
truncated, and the batch boundary"). The time loop runs backwards over
contiguous columns; scalars are carried in float64.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def gae_kernel(
    reward: np.ndarray,
    value: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    bootstrap_value: np.ndarray,
    final_value: np.ndarray,
    gamma: float,
    gae_lambda: float,
    bootstrap_truncated: bool,
    components_per_flag: int,
    advantage_out: np.ndarray,
    return_out: np.ndarray,
) -> None:
    """Write GAE advantages and returns (``advantage + value``) in place.

    Args:
        reward: ``[T, M]`` rewards.
        value: ``[T, M]`` values of ``observation[t]``.
        terminated: ``[T, M / k]`` flags (bool or integer).
        truncated: same shape as ``terminated``.
        bootstrap_value: ``[M]`` value of ``observation[T]``.
        final_value: ``[T, M]`` value of the final observation, read only where
            truncated and only if ``bootstrap_truncated``; otherwise a
            truncation counts as a termination.
        gamma: discount factor.
        gae_lambda: GAE lambda (1 gives discounted returns minus values).
        bootstrap_truncated: whether truncations bootstrap from ``final_value``.
        components_per_flag: ``k``; column ``m`` uses flag column ``m // k``.
        advantage_out: ``[T, M]`` output.
        return_out: ``[T, M]`` output.
    """
    n_steps, n_columns = reward.shape
    gamma_lambda = gamma * gae_lambda
    k = components_per_flag
    if n_steps == 0:
        return
    t = n_steps - 1
    for m in range(n_columns):
        f = m // k
        term = terminated[t, f]
        trunc = truncated[t, f]
        final = final_value[t, m] if bootstrap_truncated else 0.0
        next_value = 0.0 if term else (final if trunc else bootstrap_value[m])
        v = value[t, m]
        advantage = reward[t, m] + gamma * next_value - v
        advantage_out[t, m] = advantage
        return_out[t, m] = advantage + v
    # The two loops below differ only in the flag index; keeping ``f = m`` in
    # its own loop lets LLVM keep the common case (one flag per column) fast.
    for t in range(n_steps - 2, -1, -1):
        if k == 1:
            for m in range(n_columns):
                term = terminated[t, m]
                trunc = truncated[t, m]
                final = final_value[t, m] if bootstrap_truncated else 0.0
                next_value = 0.0 if term else (final if trunc else value[t + 1, m])
                carry = (
                    0.0 if (term or trunc) else gamma_lambda * advantage_out[t + 1, m]
                )
                v = value[t, m]
                advantage = reward[t, m] + gamma * next_value - v + carry
                advantage_out[t, m] = advantage
                return_out[t, m] = advantage + v
        else:
            for m in range(n_columns):
                f = m // k
                term = terminated[t, f]
                trunc = truncated[t, f]
                final = final_value[t, m] if bootstrap_truncated else 0.0
                next_value = 0.0 if term else (final if trunc else value[t + 1, m])
                carry = (
                    0.0 if (term or trunc) else gamma_lambda * advantage_out[t + 1, m]
                )
                v = value[t, m]
                advantage = reward[t, m] + gamma * next_value - v + carry
                advantage_out[t, m] = advantage
                return_out[t, m] = advantage + v


@numba.njit(cache=True, nogil=True)
def discounted_return_kernel(
    reward: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    bootstrap_value: np.ndarray,
    final_value: np.ndarray,
    gamma: float,
    use_bootstrap_value: bool,
    use_final_value: bool,
    components_per_flag: int,
    return_out: np.ndarray,
) -> None:
    """Write discounted returns ``G[t] = r[t] + gamma * G[t + 1]`` in place.

    Terminations cut the sum (nothing follows). Truncations cut it too and
    continue from ``final_value[t]`` if ``use_final_value`` (else 0). Across
    the batch boundary the sum continues from ``bootstrap_value`` if
    ``use_bootstrap_value`` (else 0).

    Args:
        reward: ``[T, M]`` rewards.
        terminated: ``[T, M / k]`` flags.
        truncated: same shape as ``terminated``.
        bootstrap_value: ``[M]``; read only if ``use_bootstrap_value``.
        final_value: ``[T, M]``; read only if ``use_final_value``.
        gamma: discount factor.
        use_bootstrap_value: continue the unfinished tail of the batch.
        use_final_value: bootstrap truncated episodes.
        components_per_flag: ``k``; column ``m`` uses flag column ``m // k``.
        return_out: ``[T, M]`` output (may be ``reward`` itself).
    """
    n_steps, n_columns = reward.shape
    k = components_per_flag
    for t in range(n_steps - 1, -1, -1):
        last = t == n_steps - 1
        for m in range(n_columns):
            f = m // k
            term = terminated[t, f]
            trunc = truncated[t, f]
            final = final_value[t, m] if use_final_value else 0.0
            if last:
                following = bootstrap_value[m] if use_bootstrap_value else 0.0
            else:
                following = return_out[t + 1, m]
            following = 0.0 if term else (final if trunc else following)
            return_out[t, m] = reward[t, m] + gamma * following
