"""The user's env factory, from ``MODULE:FACTORY`` or a gymnasium id, checked once."""

from __future__ import annotations

import functools
import importlib
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from parllel.cages.move_refusal import move_refusal
from parllel.errors import ConfigError

__all__ = ["EnvFactory", "check_factory", "load_factory", "move_refusal_of"]

EXAMPLES = (
    "e.g. gymnasium.envs.classic_control.cartpole:CartPoleEnv or mypkg.envs:make_env"
)


@dataclass(frozen=True)
class EnvFactory:
    """A zero-argument callable returning a gymnasium env, and where it came from.

    Attributes:
        reference: ``MODULE:FACTORY`` as given.
        module: the module's dotted name.
        name: the attribute path inside the module (``make_env``, ``Envs.make``).
        factory: the callable itself.
        imports: the import lines a script needs for ``name``, where they are
            not ``from MODULE import NAME`` (a gymnasium id's ``gym.make``).
    """

    reference: str
    module: str
    name: str
    factory: Callable[[], Any]
    imports: str | None = None

    def import_line(self) -> str:
        """The import(s) that bring the factory's name into a script."""
        if self.imports is not None:
            return self.imports
        return f"from {self.module} import {self.name.split('.')[0]}"


def _gymnasium_id_factory(env_id: str) -> EnvFactory:
    """``gym.make(env_id)`` as a picklable factory, for a registered env id."""
    return EnvFactory(
        env_id,
        "gymnasium",
        f"functools.partial(gym.make, {env_id!r})",
        functools.partial(gym.make, env_id),
        imports="import functools\nimport gymnasium as gym",
    )


def load_factory(reference: str) -> EnvFactory:
    """Import ``MODULE:FACTORY`` and check that it is a callable.

    A registered gymnasium env id (``Hopper-v5``) stands for
    ``functools.partial(gym.make, id)``. The factory is not called here (see
    :func:`check_factory`).

    Raises:
        ConfigError: the reference is malformed (neither ``MODULE:FACTORY``
            nor a registered env id), the module does not import, the
            attribute is missing or is not callable.
    """
    module_name, colon, name = reference.partition(":")
    if not colon and reference in gym.registry:
        return _gymnasium_id_factory(reference)
    if not colon or not module_name or not name:
        raise ConfigError(
            f"{reference!r} is not MODULE:FACTORY ({EXAMPLES}) nor a registered "
            "gymnasium env id (such as CartPole-v1)"
        )
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # any error the user's module raises on import
        raise ConfigError(
            f"cannot import module {module_name!r} (from {reference!r}): "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    for part in name.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ConfigError(
                f"module {module_name!r} has no attribute {name!r} (from {reference!r})"
            ) from None
    if not callable(target):
        raise ConfigError(
            f"{reference!r} is a {type(target).__name__}, not a callable that "
            f"returns an env ({EXAMPLES})"
        )
    return EnvFactory(reference, module_name, name, target)


def check_factory(env_factory: EnvFactory) -> None:
    """Build one env with the factory, check it looks like a gymnasium env, close it.

    Raises:
        ConfigError: the factory raised (the message ends with the
            exception and where it was raised) or returned an object without
            ``reset``, ``step``, ``observation_space`` and ``action_space``.
    """
    try:
        env = env_factory.factory()
    except Exception as exc:  # the user's code: report whatever it raises
        where = traceback.extract_tb(exc.__traceback__)[-1]
        raise ConfigError(
            f"the env factory {env_factory.reference!r} raised "
            f"{type(exc).__name__}: {exc} (at {where.filename}:{where.lineno})"
        ) from exc
    try:
        missing = [
            attribute
            for attribute in ("reset", "step", "observation_space", "action_space")
            if not hasattr(env, attribute)
        ]
        if missing:
            raise ConfigError(
                f"the env factory {env_factory.reference!r} returned a "
                f"{type(env).__name__}, not a gymnasium env (it has no "
                f"{', '.join(missing)})"
            )
    finally:
        close = getattr(env, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # a broken close must not hide the real problem
                pass


def move_refusal_of(env_factory: EnvFactory) -> str | None:
    """Why the factory's envs cannot move between processes (load
    balancing), or None if they can: see :func:`parllel.cages.move_refusal`.

    Builds one env (after :func:`check_factory`) and closes it.
    """
    env = env_factory.factory()
    try:
        return move_refusal(env)
    finally:
        close = getattr(env, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # a broken close is not this check's business
                pass
