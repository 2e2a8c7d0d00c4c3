"""Argument checks shared by the functional API and the Transform objects.

Everything a kernel would choke on (or silently get wrong) is caught here,
before the kernel runs, with an error that names the offending field.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from parllel.errors import ConfigError, DtypeError, ShapeError

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def check_float_array(name: str, array: object) -> np.ndarray:
    """Return ``array`` as ndarray; raise DtypeError unless float32/float64."""
    array = np.asarray(array)
    if array.dtype not in FLOAT_DTYPES:
        raise DtypeError(
            f"field '{name}' must be float32 or float64, got dtype {array.dtype}"
        )
    return array


def check_flag_array(name: str, array: object) -> np.ndarray:
    """Return ``array`` as ndarray; raise DtypeError unless bool or integer."""
    array = np.asarray(array)
    if array.dtype.kind not in "biu":
        raise DtypeError(
            f"field '{name}' must be bool (or integer) flags, got dtype {array.dtype}"
        )
    return array


def check_output(
    name: str, array: object, shape: tuple, float_dtype: bool
) -> np.ndarray:
    """Check a preallocated output: an ndarray of ``shape``, writeable."""
    if not isinstance(array, np.ndarray):
        raise ConfigError(
            f"output '{name}' must be a numpy array, got {type(array).__name__}"
        )
    if float_dtype:
        check_float_array(name, array)
    elif array.dtype != np.bool_:
        raise DtypeError(f"output '{name}' must be bool, got dtype {array.dtype}")
    check_shape(name, array, shape)
    if not array.flags.writeable:
        raise ConfigError(f"output '{name}' is read-only")
    return array


def check_shape(name: str, array: np.ndarray, shape: tuple) -> None:
    """Raise ShapeError naming the field unless ``array.shape == shape``."""
    if tuple(array.shape) != tuple(shape):
        raise ShapeError(
            f"field '{name}' must have shape {tuple(shape)}, got {tuple(array.shape)}"
        )


def as_columns(name: str, array: np.ndarray, n_leading: int) -> np.ndarray:
    """View ``array`` with its trailing dims flattened: ``[*lead, M]``.

    The first ``n_leading`` dims are kept; the rest are merged into one. Raises
    ShapeError if that is impossible without a copy (a kernel writing into a
    copy would lose its output).
    """
    if array.ndim == n_leading:
        return array  # already [T, M] (or [M]): the common scalar-reward case
    shape = tuple(array.shape[: n_leading - 1]) + (-1,)
    if n_leading == 1:
        shape = (-1,)
    if array.size == 0:
        lead = tuple(array.shape[: n_leading - 1])
        return array.reshape(lead + (int(np.prod(array.shape[n_leading - 1 :])),))
    try:
        return np.reshape(array, shape, copy=False)
    except TypeError:  # numpy < 2.1 has no copy argument
        view = array.view()
        try:
            view.shape = shape
        except AttributeError:
            pass
        else:
            return view
    except ValueError:
        pass
    raise ShapeError(
        f"field '{name}' with shape {array.shape} and strides {array.strides} "
        "cannot be viewed as 2-D [T, B * features] without a copy; "
        "make its feature dims contiguous"
    )


def per_env_columns(
    name: str, array: np.ndarray, batch_shape: tuple, feature_shape: tuple
) -> tuple[np.ndarray, int]:
    """Flatten ``[T, B]`` or ``[T, B, *features]`` to ``[T, M / k]``.

    Returns the 2-D array and ``k`` (1 if there is one entry per component,
    else the number of components per env, which share the env's entry).
    """
    n_features = int(np.prod(feature_shape)) if feature_shape else 1
    if tuple(array.shape) == tuple(batch_shape):
        return array, n_features
    if tuple(array.shape) == tuple(batch_shape) + tuple(feature_shape):
        return as_columns(name, array, 2), 1
    raise ShapeError(
        f"field '{name}' must have shape {tuple(batch_shape)} or "
        f"{tuple(batch_shape) + tuple(feature_shape)}, got {tuple(array.shape)}"
    )


def flag_columns(
    name: str, flags: np.ndarray, batch_shape: tuple, feature_shape: tuple
) -> tuple[np.ndarray, int]:
    """Checked bool/integer flags as :func:`per_env_columns`."""
    return per_env_columns(
        name, check_flag_array(name, flags), batch_shape, feature_shape
    )


def done_columns(
    terminated: np.ndarray,
    truncated: np.ndarray,
    batch_shape: tuple,
    feature_shape: tuple,
    names: tuple[str, str] = ("terminated", "truncated"),
) -> tuple[np.ndarray, np.ndarray, int]:
    """Both episode-end flags as :func:`flag_columns`, and their shared ``k``.

    Raises:
        ShapeError: the two flags (named by ``names``) differ in layout.
    """
    term_name, trunc_name = names
    term, k = flag_columns(term_name, terminated, batch_shape, feature_shape)
    trunc, k2 = flag_columns(trunc_name, truncated, batch_shape, feature_shape)
    if k != k2:
        raise ShapeError(
            f"fields '{term_name}' and '{trunc_name}' must have the same shape"
        )
    return term, trunc, k


def batch_and_feature_shape(name: str, array: np.ndarray) -> tuple[tuple, tuple]:
    """Split ``[T, B, *features]`` into ``((T, B), features)``."""
    if array.ndim < 2:
        raise ShapeError(
            f"field '{name}' must be at least 2-D [T, B, ...], got shape {array.shape}"
        )
    return tuple(array.shape[:2]), tuple(array.shape[2:])


class EpisodeColumns(NamedTuple):
    """Checked value-based episode inputs as kernel columns (see :func:`episode_columns`)."""

    shape: tuple  # [T, B, *F] of reward
    dtype: np.dtype  # of value: the outputs' dtype
    reward: np.ndarray
    value: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    bootstrap_value: np.ndarray
    final_value: np.ndarray
    flag_columns: int  # k: feature columns per flag column
    batch_shape: tuple
    feature_shape: tuple

    def kernel_inputs(
        self,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The six arrays the GAE and V-trace kernels start with, in their order."""
        return (
            self.reward,
            self.value,
            self.terminated,
            self.truncated,
            self.bootstrap_value,
            self.final_value,
        )

    def output(
        self, name: str, out: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """An output shaped like ``reward`` (see :func:`output_columns`)."""
        return output_columns(name, out, self.shape, self.dtype)


def episode_columns(
    reward: np.ndarray,
    value: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    bootstrap_value: np.ndarray,
    final_value: np.ndarray | None,
    truncation_as_termination: bool,
) -> EpisodeColumns:
    """Check the inputs GAE and V-trace share and give them as kernel columns.

    Raises:
        ShapeError, DtypeError: a field has the wrong shape or dtype (named).
        ConfigError: ``final_value`` is missing while truncations bootstrap.
    """
    reward = check_float_array("reward", reward)
    value = check_float_array("value", value)
    batch_shape, feature_shape = batch_and_feature_shape("reward", reward)
    if value.ndim == reward.ndim + 1 and value.shape[: reward.ndim] == reward.shape:
        raise ShapeError(
            f"field 'value' must have shape {tuple(reward.shape)}, got "
            f"{tuple(value.shape)}: per-agent values [T, B, A] of a multi-agent "
            "sample tree? Use MultiAgentGAE (parllel.transforms), which reads "
            "each agent's env_info.agent_reward"
        )
    check_shape("value", value, reward.shape)
    bootstrap_value = check_float_array("bootstrap_value", bootstrap_value)
    check_shape("bootstrap_value", bootstrap_value, reward.shape[1:])
    terminated2, truncated2, k = done_columns(
        terminated, truncated, batch_shape, feature_shape
    )
    if final_value is None:
        if not truncation_as_termination:
            raise ConfigError(
                "field 'final_value' is required to bootstrap truncated episodes; "
                "pass truncation_as_termination=True to treat truncations as "
                "terminations instead"
            )
        final_value = value  # never read
    else:
        final_value = check_float_array("final_value", final_value)
        check_shape("final_value", final_value, reward.shape)
    return EpisodeColumns(
        reward.shape,
        value.dtype,
        as_columns("reward", reward, 2),
        as_columns("value", value, 2),
        terminated2,
        truncated2,
        as_columns("bootstrap_value", bootstrap_value, 1),
        as_columns("final_value", final_value, 2),
        k,
        batch_shape,
        feature_shape,
    )


def output_columns(
    name: str, out: np.ndarray | None, shape: tuple, dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray]:
    """``out`` (allocated if None) checked, and its kernel columns."""
    if out is None:
        out = np.empty(shape, dtype=dtype)
    check_output(name, out, shape, float_dtype=True)
    return out, as_columns(name, out, 2)
