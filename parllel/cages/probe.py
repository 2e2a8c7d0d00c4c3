"""The probe: one step of a separate env, for the example values of a cage.

Cages allocate their buffers before the caller's first reset, from example
values of one step (observation, action, reward, flags, env info). The
envs the caller steps must see nothing before that reset (an env's state may
survive ``reset(seed=...)``: Box2D worlds, pygame clocks, counters), so the
example comes from a separate instance: built by the same factory with env
0's keyword arguments, reset with env 0's seed, stepped once with a legal
random action and closed.
"""

from __future__ import annotations

import copy
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from parllel import fields
from parllel.cages.env_factories import build_env
from parllel.cages.spaces import (
    EnvSpaces,
    check_spaces_agree,
    env_spaces,
    legal_sample,
    zero_example,
)
from parllel.errors import ConfigError, EnvError
from parllel.seeding import action_space_seed

__all__ = ["env_error", "probe_env", "probe_step", "spaces_example", "step_example"]


def env_error(env_index: int, what: str, exc: BaseException) -> EnvError:
    """The :class:`EnvError` for env ``env_index`` raising ``exc`` in ``what``.

    Call it inside the ``except`` block (it keeps the traceback).
    """
    return EnvError(
        f"env {env_index} raised {type(exc).__name__} in {what}: {exc}",
        env_index=env_index,
        worker_traceback=traceback.format_exc(),
    )


def probe_step(
    env: Any, env_index: int, seed: int | None, spaces: EnvSpaces
) -> dict[str, Any]:
    """Reset ``env`` with ``seed``, step it once with a legal random action.

    The action comes from a copy of the env's action space (seeded from
    ``seed`` as the cages seed env action spaces), so no random stream that
    the env may share with other envs advances. The env's spaces must equal
    ``spaces``.

    Returns:
        The example values: the step's observation, action, reward
        (float32), terminated, truncated and info.

    Raises:
        SpaceMismatchError: the env's spaces differ from ``spaces``.
        EnvError: the env raised (naming env ``env_index``'s probe).
    """
    check_spaces_agree(spaces, env_spaces(env), env_index)
    try:
        observation, _ = env.reset(seed=seed)
        space = copy.deepcopy(env.action_space)
        if seed is not None:
            space.seed(action_space_seed(seed))
        action = legal_sample(space, observation)
        next_observation, reward, terminated, truncated, info = env.step(action)
    except Exception as exc:
        raise env_error(env_index, "its probe step", exc) from exc
    return step_example(next_observation, action, reward, terminated, truncated, info)


def step_example(
    observation: Any,
    action: Any,
    reward: Any,
    terminated: Any,
    truncated: Any,
    info: dict[str, Any],
) -> dict[str, Any]:
    """A cage's example values (``cage.example``) of one env's step."""
    return {
        fields.OBSERVATION: observation,
        fields.ACTION: action,
        fields.REWARD: np.float32(reward),
        fields.TERMINATED: bool(terminated),
        fields.TRUNCATED: bool(truncated),
        fields.ENV_INFO: info,
    }


def probe_env(
    env_factory: Callable[..., Any],
    env_kwargs: dict[str, Any],
    env_index: int,
    seed: int | None,
    spaces: EnvSpaces,
    envs: Sequence[Any] = (),
) -> dict[str, Any]:
    """The example step of a probe env built like env ``env_index``, then closed.

    ``env_factory`` is called once more (with ``env_kwargs``; a
    :class:`~parllel.cages.PerEnvFactories` builds with env ``env_index``'s
    factory); the probe is reset with ``seed`` (env ``env_index``'s), stepped
    once (:func:`probe_step`) and closed. ``envs``: the envs already built in
    this process, which the probe must not be.

    Raises:
        ConfigError: the factory returned one of ``envs`` again.
        EnvError: the probe's construction, step or close raised.
        SpaceMismatchError: the probe's spaces differ from ``spaces``.
    """
    try:
        env = build_env(env_factory, env_kwargs, env_index)
    except Exception as exc:
        raise env_error(env_index, "its probe's construction", exc) from exc
    if any(env is built for built in envs):
        raise ConfigError(
            f"the env factory {env_factory!r} returned env {env_index}'s env object "
            "again: a cage calls it once per env and once more for a probe env (the "
            "example step), and each call must build a new env (e.g. "
            "lambda: gym.make(...), not lambda: env)"
        )
    try:
        example = probe_step(env, env_index, seed, spaces)
    except BaseException:
        try:
            env.close()
        except Exception:
            pass  # the probe's own error is the one to report
        raise
    try:
        env.close()
    except Exception as exc:
        raise env_error(env_index, "its probe's close()", exc) from exc
    return example


def spaces_example(spaces: EnvSpaces) -> dict[str, Any]:
    """Example values without a probe: zeros of the spaces, no env info.

    For cages built with ``probe=False`` (adapters that allocate their slots
    from the spaces); no env code runs.
    """
    return step_example(
        zero_example(spaces.observation),
        zero_example(spaces.action),
        0.0,
        False,
        False,
        {},
    )
