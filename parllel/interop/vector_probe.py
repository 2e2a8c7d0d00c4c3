"""The example step of a VectorEnvCage, preferably from a separate probe env.

A cage allocates its buffers from the example values of one step before the
caller's first reset, and the envs it steps should see nothing before that
reset. gymnasium's ``SyncVectorEnv`` and ``AsyncVectorEnv`` keep the
functions that built their envs (``env_fns``): the probe env comes from
``env_fns[0]``, built in this process (as ``AsyncVectorEnv`` builds its own
dummy env there), and the vector env is left alone. Other vector envs have no
such function, and are probed themselves.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import gymnasium as gym
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv
from gymnasium.vector.utils import iterate

from parllel.seeding import action_space_seed

__all__ = ["probe_actions", "probe_factory"]


def probe_factory(vector_env: gym.vector.VectorEnv) -> Callable[[], Any] | None:
    """The function that built env 0 of a ``SyncVectorEnv`` / ``AsyncVectorEnv``.

    None for other vector envs (wrapped ones included: a vector wrapper may
    change what the envs return), which the cage probes themselves.
    """
    if not isinstance(vector_env, (SyncVectorEnv, AsyncVectorEnv)):
        return None
    env_fns = getattr(vector_env, "env_fns", None)
    return env_fns[0] if env_fns else None


def probe_actions(action_space: gym.Space, seed: int | None) -> tuple[Any, Any]:
    """Random batched actions for probing a vector env itself, and env 0's.

    Drawn from a copy of the batched ``action_space`` (seeded from ``seed``,
    env 0's, if given), so the vector env's own action space is left as it is.
    """
    space = copy.deepcopy(action_space)
    if seed is not None:
        space.seed(action_space_seed(seed))
    actions = space.sample()
    return actions, copy.deepcopy(next(iter(iterate(space, actions))))
