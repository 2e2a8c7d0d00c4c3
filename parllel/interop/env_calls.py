"""Functions the SB3 adapter runs on each env where it lives (``Cage.apply``).

They live apart from the adapter so worker processes unpickle them without
importing Stable-Baselines3 (and torch).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from parllel.cages.env_access import get_env_attr

__all__ = ["call_method", "is_wrapped_with", "wrapper_attr"]


def wrapper_attr(env: Any, name: str) -> Any:
    """``env.get_wrapper_attr(name)``, as it is (a method is not called)."""
    return get_env_attr(env, name)


def call_method(env: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """``env.get_wrapper_attr(name)(*args, **kwargs)``."""
    return get_env_attr(env, name)(*args, **kwargs)


def is_wrapped_with(env: Any, wrapper_class: type) -> bool:
    """True if ``env`` or any env it wraps is an instance of ``wrapper_class``."""
    while True:
        if isinstance(env, wrapper_class):
            return True
        if not isinstance(env, gym.Wrapper):
            return False
        env = env.env
