"""Reach attributes and methods of (wrapped) envs the way gymnasium does.

``gym.make`` wraps every env (``TimeLimit``, ``OrderEnforcing``, ...), and
wrappers do not forward attribute access: ``env.gravity`` raises on a wrapped
CartPole. Cages therefore follow gymnasium's own rules,
``env.get_wrapper_attr`` and ``env.set_wrapper_attr``:

- reading (and calling) ``name`` finds it on the outermost wrapper that has
  it, else on the next inner one, down to the unwrapped env;
- writing ``name`` sets it where it is already defined (the outermost
  wrapper or env that has it), else creates it on the outermost wrapper.

Objects that are not gymnasium envs get plain ``getattr`` / ``setattr``.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from parllel.errors import EnvAttributeError, EnvError


def _describe(env: Any) -> str:
    # gymnasium envs print their wrapper chain: <TimeLimit<...<CartPoleEnv<...>>>>
    return str(env) if hasattr(env, "unwrapped") else type(env).__name__


def get_env_attr(env: Any, name: str, env_index: int | None = None) -> Any:
    """Attribute ``name`` of ``env`` or of the first of its inner envs that has it.

    Raises:
        EnvAttributeError: neither the env nor any env it wraps has ``name``.
    """
    getter = getattr(env, "get_wrapper_attr", None)
    try:
        return getattr(env, name) if getter is None else getter(name)
    except AttributeError as exc:
        if not _missing(exc, name):  # a property that itself raised
            raise _call_error(env_index, f"reading {name!r}", exc) from exc
        where = (
            _describe(env)
            if env_index is None
            else f"env {env_index} ({_describe(env)})"
        )
        raise EnvAttributeError(
            f"{where} has no attribute {name!r}",
            env_index=env_index,
        ) from None
    except Exception as exc:  # a property that raised
        raise _call_error(env_index, f"reading {name!r}", exc) from exc


def call_env(
    env: Any, name: str, args: tuple, kwargs: dict, env_index: int | None = None
) -> Any:
    """``env``'s (or an inner env's) method ``name`` called with the arguments.

    A non-callable attribute is returned as it is (as gymnasium's vector envs
    do), so ``call("spec")`` reads the attribute.

    Raises:
        EnvAttributeError: no env in the wrapper chain has ``name``.
        EnvError: the method raised (with the env index and traceback).
    """
    attribute = get_env_attr(env, name, env_index)
    if not callable(attribute):
        return attribute
    try:
        return attribute(*args, **kwargs)
    except Exception as exc:
        raise _call_error(env_index, f"{name}()", exc) from exc


def apply_to_env(
    env: Any,
    function: Callable[..., Any],
    args: tuple,
    kwargs: dict,
    env_index: int | None = None,
) -> Any:
    """``function(env, *args, **kwargs)``; an exception becomes an EnvError naming the env."""
    try:
        return function(env, *args, **kwargs)
    except EnvAttributeError as exc:  # from get_env_attr, which may not know the index
        if exc.env_index is not None:
            raise
        raise EnvAttributeError(
            f"env {env_index}: {exc}", env_index=env_index
        ) from None
    except EnvError:
        raise
    except Exception as exc:
        name = getattr(function, "__name__", repr(function))
        raise _call_error(env_index, f"{name}(env, ...)", exc) from exc


def set_env_attr(env: Any, name: str, value: Any, env_index: int | None = None) -> None:
    """Set ``name`` where ``env``'s wrapper chain defines it (else on ``env`` itself)."""
    setter = getattr(env, "set_wrapper_attr", None)
    try:
        if setter is None:
            setattr(env, name, value)
        else:
            setter(name, value)
    except Exception as exc:  # e.g. a read-only property
        raise _call_error(env_index, f"setting {name!r}", exc) from exc


def _missing(exc: AttributeError, name: str) -> bool:
    """True if ``exc`` says that ``name`` itself is missing (not a nested failure)."""
    missing = getattr(exc, "name", None)
    if missing is not None:
        return missing == name
    return repr(name) in str(exc)


def _call_error(env_index: int | None, what: str, exc: Exception) -> EnvError:
    return EnvError(
        f"env {env_index} raised {type(exc).__name__} in {what}: {exc}",
        env_index=env_index,
        worker_traceback=traceback.format_exc(),
    )
