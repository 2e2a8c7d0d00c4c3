"""Checked functional entry points for off-policy corrections.

:func:`vtrace` (IMPALA's V-trace targets and policy-gradient advantages) and
:func:`truncated_importance_weights` (clipped importance ratios for PPO-style
losses on lagged samples). Both take numpy arrays, so a learner calls them
on its own data (e.g. ``tensor.numpy()`` of target log-probs computed at
train time); :mod:`parllel.transforms.functional` re-exports them.
"""

from __future__ import annotations

import numpy as np

from parllel.errors import ConfigError
from parllel.transforms._checks import (
    check_float_array,
    check_output,
    episode_columns,
    per_env_columns,
)
from parllel.transforms.kernels.vtrace import vtrace_kernel
from parllel.validation import check_fraction, check_positive


def _ratio_argument(
    log_ratio: np.ndarray | None, ratio: np.ndarray | None
) -> tuple[str, np.ndarray, bool]:
    """The one ratio argument given, as ``(name, array, is_log)``."""
    if (log_ratio is None) == (ratio is None):
        raise ConfigError(
            "pass exactly one of 'log_ratio' (log pi - log mu) and 'ratio' (pi / mu)"
        )
    if log_ratio is not None:
        return "log_ratio", check_float_array("log_ratio", log_ratio), True
    ratio = check_float_array("ratio", ratio)
    if ratio.size and ratio.min() < 0:  # NaN compares False and propagates
        raise ConfigError(f"field 'ratio' must be >= 0, got {ratio.min()}")
    return "ratio", ratio, False


def vtrace(
    reward: np.ndarray,
    value: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    bootstrap_value: np.ndarray,
    final_value: np.ndarray | None = None,
    *,
    log_ratio: np.ndarray | None = None,
    ratio: np.ndarray | None = None,
    gamma: float,
    trace_lambda: float = 1.0,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
    pg_rho_bar: float | None = None,
    truncation_as_termination: bool = False,
    return_out: np.ndarray | None = None,
    advantage_out: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """V-trace value targets and policy-gradient advantages (IMPALA).

    The samples were drawn by a behaviour policy ``mu``; the targets are for
    the target policy ``pi``. Episode ends are handled as in
    :func:`generalized_advantage_estimation`; with all ratios 1 and
    ``rho_bar = c_bar = 1``, ``v`` is the lambda-return. The recursion and its
    cases: docs/transforms.md ("V-trace"). Returns ``(return_, advantage)``,
    the targets ``v`` and the advantages.

    Args:
        reward: ``[T, B, *F]`` rewards, float32 or float64; ``value`` likewise.
        final_value: required unless ``truncation_as_termination``.
        log_ratio: ``log pi(a|x) - log mu(a|x)``, or ``ratio`` (>= 0): exactly one.
        rho_bar: clip of ``rho``; ``c_bar`` of ``c``; ``pg_rho_bar`` of the
            advantage's weight (default ``rho_bar``); ``inf`` disables a clip.

    Example:
        >>> reward, value = np.ones((3, 1)), np.zeros((3, 1))
        >>> ended = np.zeros((3, 1), bool)  # [T, B]: no episode ends
        >>> v, adv = vtrace(reward, value, ended, ended, np.zeros(1), value,
        ...                 log_ratio=np.log(np.full((3, 1), 0.5)), gamma=1.0)
        >>> v[:, 0].tolist()  # each step's correction is halved
        [0.875, 0.75, 0.5]
    """
    gamma = check_fraction("gamma", gamma)
    trace_lambda = check_fraction("trace_lambda", trace_lambda)
    rho_bar = check_positive("rho_bar", rho_bar, allow_inf=True)
    c_bar = check_positive("c_bar", c_bar, allow_inf=True)
    pg_rho_bar = (
        rho_bar
        if pg_rho_bar is None
        else check_positive("pg_rho_bar", pg_rho_bar, allow_inf=True)
    )
    ratio_name, ratio_array, is_log = _ratio_argument(log_ratio, ratio)
    inputs = episode_columns(
        reward, value, terminated, truncated, bootstrap_value, final_value,
        truncation_as_termination,
    )  # fmt: skip
    ratio2, j = per_env_columns(
        ratio_name, ratio_array, inputs.batch_shape, inputs.feature_shape
    )
    return_out, return_columns = inputs.output("return_", return_out)
    advantage_out, advantage_columns = inputs.output("advantage", advantage_out)
    vtrace_kernel(
        *inputs.kernel_inputs(),
        ratio2,
        is_log,
        j,
        gamma,
        trace_lambda,
        rho_bar,
        c_bar,
        pg_rho_bar,
        not truncation_as_termination,
        inputs.flag_columns,
        return_columns,
        advantage_columns,
    )
    return return_out, advantage_out


def truncated_importance_weights(
    log_ratio: np.ndarray | None = None,
    ratio: np.ndarray | None = None,
    *,
    clip: float = 1.0,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Importance weights ``min(clip, pi / mu)`` of any shape.

    For losses on lagged samples (IMPACT-style PPO): weight each step's loss
    by how much more (up to ``clip``) the target policy would take the action
    than the behaviour policy that took it.

    Args:
        log_ratio: ``log pi(a|x) - log mu(a|x)``, float32 or float64.
        ratio: the ratios ``pi / mu`` instead (>= 0); pass exactly one.
        clip: upper bound (> 0; ``inf`` disables it).
        out: optional preallocated output (may be the input itself).

    Returns:
        The weights, shaped and typed like the input.

    Example:
        >>> truncated_importance_weights(np.log([0.5, 1.0, 4.0])).tolist()
        [0.5, 1.0, 1.0]
    """
    clip = check_positive("clip", clip, allow_inf=True)
    name, array, is_log = _ratio_argument(log_ratio, ratio)
    if out is None:
        out = np.empty(array.shape, dtype=array.dtype)
    check_output("out", out, array.shape, float_dtype=True)
    if is_log:
        np.exp(array, out=out)
    elif out is not array:
        np.copyto(out, array)
    np.minimum(out, clip, out=out)
    return out
