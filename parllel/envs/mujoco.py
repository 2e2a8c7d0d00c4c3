"""gymnasium's MuJoCo envs without two notices a user cannot act on.

MuJoCo (3.3 and later) warns, from its C compiler, once per model it
compiles, that ``<compiler settotalmass=...>`` is deprecated: gymnasium's
``half_cheetah.xml`` (HalfCheetah v4 and v5) sets it, so every env printed
the notice (12 lines in a ``--quick`` run of ``examples/mujoco``). The
attribute cannot be dropped from the file without changing the masses, so
:func:`muted_settotalmass_warning` filters exactly that message through
MuJoCo's warning callback while a model compiles; every other MuJoCo
warning still prints as MuJoCo prints it. gymnasium's "v4 is out of date"
notice is muted too: the v4 envs are the ones CleanRL's results use.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym

__all__ = ["make_mujoco_env", "muted_settotalmass_warning"]

#: The start of the MuJoCo compiler's notice that is muted.
SETTOTALMASS_NOTICE = "compiler attribute 'settotalmass' is deprecated"


@contextlib.contextmanager
def muted_settotalmass_warning() -> Iterator[None]:
    """Drop MuJoCo's ``settotalmass`` deprecation notice while in the block.

    Other MuJoCo warnings go to the callback installed before, or are printed
    to stderr as MuJoCo's default handler prints them. The callback before is
    restored on exit.
    """
    import mujoco

    previous: Callable[[str], Any] | None = mujoco.get_mju_user_warning()

    def forward(message: str) -> None:
        if message.startswith(SETTOTALMASS_NOTICE):
            return
        if previous is not None:
            previous(message)
        else:
            sys.stderr.write(f"WARNING: {message}\n\n")

    mujoco.set_mju_user_warning(forward)
    try:
        yield
    finally:
        mujoco.set_mju_user_warning(previous)


def make_mujoco_env(
    env_id: str,
    max_episode_steps: int | None = None,
    render_mode: str | None = None,
    **kwargs: Any,
) -> gym.Env:
    """``gym.make(env_id, ...)`` for a MuJoCo env, without the ``settotalmass``
    and "v4 is out of date" notices (see the module docstring).

    Example:
        >>> env = make_mujoco_env("HalfCheetah-v4", max_episode_steps=1000)

    Args:
        env_id: a gymnasium MuJoCo id (``HalfCheetah-v4``, ``Hopper-v5``, ...).
        max_episode_steps: truncate episodes at this length (None: the id's).
        render_mode: as for ``gym.make``.
        **kwargs: the env's own arguments.
    """
    with warnings.catch_warnings(), muted_settotalmass_warning():
        warnings.filterwarnings("ignore", message=".*is out of date.*")
        return gym.make(
            env_id,
            max_episode_steps=max_episode_steps,
            render_mode=render_mode,
            **kwargs,
        )
