"""Reaching a gymnasium vector env's envs: ``call``, ``get_attr``, ``set_attr``.

Every env at once goes through the vector env's own ``call`` / ``set_attr``
(gymnasium's vector wrappers do not forward them, so a wrapped vector env is
reached through its ``unwrapped`` one). Some envs only need the envs
themselves, which a ``SyncVectorEnv`` holds; they are then reached like a
serial cage reaches its envs (:mod:`parllel.cages.env_access`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
from gymnasium.vector import SyncVectorEnv

from parllel.cages.env_access import apply_to_env, call_env, set_env_attr
from parllel.cages.spaces import env_name
from parllel.errors import (
    ConfigError,
    EnvAttributeError,
    ParllelError,
)
from parllel.interop.batched_cage import vector_error


def vector_env_name(vector_env: gym.vector.VectorEnv) -> str:
    """A vector env's name in messages: its env id (``gym.make_vec``), else a
    SyncVectorEnv's first env's name, else its class name."""
    spec = getattr(vector_env, "spec", None)
    if spec is not None and getattr(spec, "id", None):
        return str(spec.id)
    unwrapped = vector_env.unwrapped
    if isinstance(unwrapped, SyncVectorEnv) and unwrapped.envs:
        return env_name(unwrapped.envs[0])
    return type(unwrapped).__name__


def _with_methods(vector_env: gym.vector.VectorEnv) -> Any:
    """The vector env, or the one it wraps, that has ``call`` and ``set_attr``."""
    for candidate in (vector_env, vector_env.unwrapped):
        if callable(getattr(candidate, "call", None)) and callable(
            getattr(candidate, "set_attr", None)
        ):
            return candidate
    raise ConfigError(
        f"{vector_env} has no call() and set_attr(), through which a cage reaches "
        "its envs (gymnasium's SyncVectorEnv and AsyncVectorEnv have them)"
    )


def _envs_of(
    vector_env: gym.vector.VectorEnv,
    indices: Sequence[int],
    what: str,
    every_env_too: bool = False,
) -> list[Any] | None:
    """The envs themselves, or None if ``indices`` are every env once.

    ``indices`` are in ``[0, num_envs)`` (``Cage`` normalized them).
    ``every_env_too``: the envs even then (for what only the envs can do).
    """
    n = vector_env.num_envs
    if not every_env_too and sorted(indices) == list(range(n)):
        return None
    unwrapped = vector_env.unwrapped
    if not isinstance(unwrapped, SyncVectorEnv):
        where = "" if every_env_too else f" for envs {list(indices)} only"
        hint = "" if every_env_too else "leave env_indices out (every env), or "
        raise ConfigError(
            f"cannot {what}{where}: {type(unwrapped).__name__} reaches its envs "
            f"only all together, through VectorEnv.call/set_attr; {hint}use a "
            "SyncVectorEnv, whose envs live in this process"
        )
    return list(unwrapped.envs)


def call_envs(
    vector_env: gym.vector.VectorEnv,
    name: str,
    args: tuple,
    kwargs: dict,
    indices: Sequence[int],
    env_offset: int,
    label: str,
) -> list[Any]:
    """Call (or read) ``name`` on the envs ``indices``, as ``Cage.call`` does.

    Args:
        vector_env: the vector env.
        name: method or attribute name.
        args: positional arguments of the call.
        kwargs: keyword arguments of the call.
        indices: env indices in the vector env (results in this order).
        env_offset: global index of env 0 (for error messages).
        label: the vector env's name in error messages.

    Raises:
        EnvAttributeError: no env has ``name``.
        EnvError: the call raised.
        ConfigError: a subset of the envs of a vector env that
            only reaches all of them.
    """
    envs = _envs_of(vector_env, indices, f"call {name!r}")
    if envs is not None:
        return [call_env(envs[i], name, args, kwargs, env_offset + i) for i in indices]
    target = _with_methods(vector_env)
    try:
        results = target.call(name, *args, **kwargs)
    except ParllelError:
        raise
    except AttributeError as exc:
        raise EnvAttributeError(
            f"the vector env ({label}) or its envs have no attribute {name!r}: {exc}"
        ) from exc
    except Exception as exc:
        raise vector_error(label, f"call({name!r})", exc) from exc
    return [results[i] for i in indices]


def set_envs_attr(
    vector_env: gym.vector.VectorEnv,
    name: str,
    values: Sequence[Any],
    indices: Sequence[int],
    env_offset: int,
    label: str,
) -> None:
    """Set ``name`` to ``values[k]`` on env ``indices[k]``, as ``Cage.set_attr`` does."""
    envs = _envs_of(vector_env, indices, f"set {name!r}")
    if envs is not None:
        for i, value in zip(indices, values):
            set_env_attr(envs[i], name, value, env_offset + i)
        return
    ordered: list[Any] = [None] * vector_env.num_envs
    for i, value in zip(indices, values):
        ordered[i] = value
    target = _with_methods(vector_env)
    try:
        target.set_attr(name, ordered)
    except ParllelError:
        raise
    except Exception as exc:
        raise vector_error(label, f"set_attr({name!r})", exc) from exc


def apply_envs(
    vector_env: gym.vector.VectorEnv,
    function: Callable[..., Any],
    args: tuple,
    kwargs: dict,
    indices: Sequence[int],
    env_offset: int,
) -> list[Any]:
    """``function(env, *args, **kwargs)`` for the envs ``indices``, as ``Cage.apply``.

    Only a ``SyncVectorEnv`` holds its envs where a function can reach them;
    other vector envs raise :class:`~parllel.errors.ConfigError`.
    """
    name = getattr(function, "__name__", repr(function))
    envs = _envs_of(vector_env, indices, f"apply {name}", every_env_too=True)
    assert envs is not None  # every_env_too
    return [
        apply_to_env(envs[i], function, args, kwargs, env_offset + i) for i in indices
    ]
