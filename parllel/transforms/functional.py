"""Checked functional entry points to the numba kernels.

These take numpy arrays (``[T, B]`` or ``[T, B, *features]``), validate
shapes and dtypes, flatten trailing dims to the kernels' 2-D ``[T, B * N]``
layout (as views, never copies of outputs) and call the kernel. Outputs can be
preallocated (``*_out=`` arguments) so the hot path never allocates.
"""

from __future__ import annotations

import numpy as np

from parllel.errors import ShapeError
from parllel.transforms._checks import (
    as_columns,
    batch_and_feature_shape,
    check_flag_array,
    check_float_array,
    check_output,
    check_shape,
    done_columns,
    episode_columns,
    flag_columns,
    output_columns,
)
from parllel.transforms.functional_vtrace import (
    truncated_importance_weights,
    vtrace,
)
from parllel.transforms.kernels.finite import first_nonfinite_kernel
from parllel.transforms.kernels.gae import discounted_return_kernel, gae_kernel
from parllel.transforms.kernels.normalization import normalize_advantage_kernel
from parllel.transforms.kernels.valid import valid_mask_kernel
from parllel.validation import check_fraction

__all__ = [
    "discounted_return",
    "first_nonfinite",
    "generalized_advantage_estimation",
    "normalize_advantage",
    "truncated_importance_weights",
    "valid_mask",
    "vtrace",
]


def generalized_advantage_estimation(
    reward: np.ndarray,
    value: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    bootstrap_value: np.ndarray,
    final_value: np.ndarray | None = None,
    *,
    gamma: float,
    gae_lambda: float,
    truncation_as_termination: bool = False,
    advantage_out: np.ndarray | None = None,
    return_out: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalized advantage estimation with truncation bootstrapping.

    Terminated steps have no future, truncated steps continue from
    ``final_value[t]``, the batch's last step from ``bootstrap_value``; both
    episode ends cut the recursion (see docs/transforms.md). Returns
    ``(advantage, return_)`` with ``return_ = advantage + value``.

    Args:
        reward: ``[T, B, *F]`` rewards, float32 or float64; ``value`` likewise.
        terminated: ``[T, B]`` or ``[T, B, *F]`` flags; ``truncated`` likewise.
        bootstrap_value: ``[B, *F]`` value of ``observation[T]``.
        final_value: ``[T, B, *F]``, read where truncated. Required unless
            ``truncation_as_termination`` (biased; treats truncations as ends).
        advantage_out: optional preallocated output (``return_out`` too).

    Example:
        >>> reward, value = np.ones((3, 1), np.float32), np.zeros((3, 1), np.float32)
        >>> ended = np.zeros((3, 1), bool)  # [T, B]: no episode ends
        >>> adv, ret = generalized_advantage_estimation(
        ...     reward, value, ended, ended, np.zeros(1, np.float32), value,
        ...     gamma=0.5, gae_lambda=1.0)
        >>> ret[:, 0].tolist()  # gae_lambda = 1: the discounted returns
        [1.75, 1.5, 1.0]
    """
    gamma = check_fraction("gamma", gamma)
    gae_lambda = check_fraction("gae_lambda", gae_lambda)
    inputs = episode_columns(
        reward, value, terminated, truncated, bootstrap_value, final_value,
        truncation_as_termination,
    )  # fmt: skip
    advantage_out, advantage_columns = inputs.output("advantage", advantage_out)
    return_out, return_columns = inputs.output("return_", return_out)
    gae_kernel(
        *inputs.kernel_inputs(),
        gamma,
        gae_lambda,
        not truncation_as_termination,
        inputs.flag_columns,
        advantage_columns,
        return_columns,
    )
    return advantage_out, return_out


def discounted_return(
    reward: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    *,
    gamma: float,
    bootstrap_value: np.ndarray | None = None,
    final_value: np.ndarray | None = None,
    return_out: np.ndarray | None = None,
) -> np.ndarray:
    """Discounted return ``G[t] = r[t] + gamma * G[t + 1]`` without a critic.

    Episode ends cut the sum. A truncated step continues from
    ``final_value[t]`` if given (else 0, as if terminated); the tail of an
    unfinished episode continues from ``bootstrap_value`` if given (else 0).

    Args:
        reward: ``[T, B, *F]`` rewards.
        terminated: ``[T, B]`` or ``[T, B, *F]`` flags.
        truncated: like ``terminated``.
        gamma: discount in ``[0, 1]``.
        bootstrap_value: optional ``[B, *F]`` value of ``observation[T]``.
        final_value: optional ``[T, B, *F]`` value of final observations.
        return_out: optional preallocated output (may be ``reward``).

    Returns:
        The returns, ``[T, B, *F]``.

    Example:
        >>> terminated = np.array([[False], [True], [False]])
        >>> truncated = np.zeros((3, 1), bool)
        >>> discounted_return(np.ones((3, 1)), terminated, truncated, gamma=0.5)[:, 0]
        array([1.5, 1. , 1. ])
    """
    gamma = check_fraction("gamma", gamma)
    reward = check_float_array("reward", reward)
    batch_shape, feature_shape = batch_and_feature_shape("reward", reward)
    terminated2, truncated2, k = done_columns(
        terminated, truncated, batch_shape, feature_shape
    )
    use_bootstrap = bootstrap_value is not None
    if use_bootstrap:
        bootstrap_value = check_float_array("bootstrap_value", bootstrap_value)
        check_shape("bootstrap_value", bootstrap_value, reward.shape[1:])
    else:
        # never read by the kernel: any [B, *F] array will do (an empty batch,
        # T == 0, has no row to lend)
        bootstrap_value = (
            reward[0] if len(reward) else np.zeros(reward.shape[1:], reward.dtype)
        )
    use_final = final_value is not None
    if use_final:
        final_value = check_float_array("final_value", final_value)
        check_shape("final_value", final_value, reward.shape)
    else:
        final_value = reward
    return_out, return_columns = output_columns(
        "return_", return_out, reward.shape, reward.dtype
    )
    discounted_return_kernel(
        as_columns("reward", reward, 2),
        terminated2,
        truncated2,
        as_columns("bootstrap_value", bootstrap_value, 1),
        as_columns("final_value", final_value, 2),
        gamma,
        use_bootstrap,
        use_final,
        k,
        return_columns,
    )
    return return_out


def normalize_advantage(
    advantage: np.ndarray, valid: np.ndarray | None = None, *, epsilon: float = 1e-8
) -> np.ndarray:
    """Standardize advantages in place, optionally only over valid steps.

    ``a <- (a - mean) / (std + epsilon)`` with the mean and the sample std
    (``ddof=1``, as SB3 and CleanRL) over all entries, or over the entries
    where ``valid`` is True (the others are left untouched). Fewer than two
    entries are left as they are.

    Args:
        advantage: ``[T, B, *F]`` float advantages (modified in place).
        valid: optional ``[T, B]`` or ``[T, B, *F]`` bool mask.
        epsilon: added to the std.

    Returns:
        ``advantage``.
    """
    check_output("advantage", advantage, np.shape(advantage), float_dtype=True)
    batch_shape, feature_shape = batch_and_feature_shape("advantage", advantage)
    if valid is None:
        mask, k, use_mask = np.ones((1, 1), dtype=np.bool_), 1, False
    else:
        mask, k = flag_columns("valid", valid, batch_shape, feature_shape)
        use_mask = True
    normalize_advantage_kernel(
        as_columns("advantage", advantage, 2), mask, use_mask, k, float(epsilon)
    )
    return advantage


def valid_mask(
    terminated: np.ndarray,
    truncated: np.ndarray | None = None,
    *,
    valid_out: np.ndarray | None = None,
) -> np.ndarray:
    """The wait-reset valid mask from episode-end flags.

    ``valid[0] = True`` and ``valid[t] = valid[t - 1] and not done[t - 1]``
    with ``done = terminated or truncated``: the step that ends an episode is
    valid, every later step of that env in the batch is not.

    Args:
        terminated: ``[T, B]`` flags (or ``done`` if ``truncated`` is None).
        truncated: optional ``[T, B]`` flags.
        valid_out: optional preallocated ``[T, B]`` bool output.

    Returns:
        The ``[T, B]`` bool mask.

    Example:
        >>> valid_mask(np.array([[False], [True], [False]]))[:, 0].tolist()
        [True, True, False]
    """
    terminated = check_flag_array("terminated", terminated)
    if terminated.ndim != 2:
        raise ShapeError(
            f"field 'terminated' must be 2-D [T, B], got shape {terminated.shape}"
        )
    if truncated is None:
        truncated = terminated
    truncated = check_flag_array("truncated", truncated)
    check_shape("truncated", truncated, terminated.shape)
    if valid_out is None:
        valid_out = np.empty(terminated.shape, dtype=np.bool_)
    check_output("valid", valid_out, terminated.shape, float_dtype=False)
    valid_mask_kernel(terminated, truncated, valid_out)
    return valid_out


def first_nonfinite(array: np.ndarray) -> tuple[int, int, tuple[int, ...]] | None:
    """Where the first NaN or infinity of a ``[T, B, *F]`` array is, if anywhere.

    float32 and float64 arrays are scanned by a numba kernel (one vectorized
    pass when every value is finite); other float dtypes with numpy; integer
    and bool arrays cannot hold non-finite values and are not read.

    Args:
        array: ``[T, B]`` or ``[T, B, *F]`` data (any strides).

    Returns:
        ``(t, b, feature_index)`` of the first non-finite value in
        ``[t, b]``-major order, or None if every value is finite.

    Example:
        >>> first_nonfinite(np.array([[0.0, 1.0], [np.nan, 2.0]]))
        (1, 0, ())
    """
    array = np.asarray(array)
    batch_shape, feature_shape = batch_and_feature_shape("array", array)
    if array.dtype.kind != "f" or array.size == 0:
        return None
    if array.dtype in (np.float32, np.float64):
        columns = array.reshape(batch_shape + (-1,))  # a view unless strided oddly
        t, b, n = first_nonfinite_kernel(columns, array.dtype.type(0))
        if t < 0:
            return None
    else:  # e.g. float16: numba has no kernel for it
        bad = np.argwhere(~np.isfinite(array.reshape(batch_shape + (-1,))))
        if not len(bad):
            return None
        t, b, n = (int(i) for i in bad[0])
    return int(t), int(b), tuple(int(i) for i in np.unravel_index(n, feature_shape))
