"""Interop: parllel cages behind gymnasium's and SB3's vector-env interfaces, and back.

- :func:`make_vec` returns a gymnasium ``VectorEnv`` (:class:`CageVectorEnv`)
  whose envs a parllel cage steps, serially or in worker processes.
- :func:`make_sb3_vec_env` returns a Stable-Baselines3 ``VecEnv``
  (needs the ``sb3`` extra; imported only when used).
- :class:`VectorEnvCage` runs any gymnasium vector env (``SyncVectorEnv``,
  ``AsyncVectorEnv``, or another ``gymnasium.vector.VectorEnv``) as a parllel
  cage, so samplers, transforms, replays and runners use it unchanged.
- :class:`EnvPoolCage` / :func:`make_envpool_cage` run EnvPool's batched C++
  envs as a parllel cage (needs the ``envpool`` extra; imported only when used).

No torch (and no SB3 or EnvPool, until asked for) is imported here; nothing else in
parllel imports this package.
"""

from __future__ import annotations

import importlib
from typing import Any

from parllel.errors import MissingDependencyError
from parllel.interop.vector_env import make_vec
from parllel.interop.vector_env_cage import VectorEnvCage

__all__ = [
    "EnvPoolCage",
    "VectorEnvCage",
    "make_envpool_cage",
    "make_sb3_vec_env",
    "make_vec",
]

_SB3_NAMES = ("make_sb3_vec_env",)
# name: its module (each imports EnvPool)
_ENVPOOL_NAMES = {"EnvPoolCage": "envpool_cage", "make_envpool_cage": "envpool_make"}


def __getattr__(name: str) -> Any:
    # the SB3 adapter subclasses SB3's VecEnv: import it (and SB3) on first use
    if name in _SB3_NAMES:
        try:
            from parllel.interop import sb3_vec_env
        except ModuleNotFoundError as exc:
            if exc.name is None or not exc.name.startswith("stable_baselines3"):
                raise
            raise MissingDependencyError(
                f"parllel.interop.{name} needs Stable-Baselines3: install torch, "
                'then pip install "parllel[sb3]"'
            ) from exc
        return getattr(sb3_vec_env, name)
    if name in _ENVPOOL_NAMES:
        try:
            module = importlib.import_module(f"parllel.interop.{_ENVPOOL_NAMES[name]}")
        except ModuleNotFoundError as exc:
            if exc.name is None or not exc.name.startswith("envpool"):
                raise
            raise MissingDependencyError(
                f"parllel.interop.{name} needs EnvPool 1.2.5 (Python >= 3.11): "
                'pip install "parllel[envpool]"'
            ) from exc
        return getattr(module, name)
    raise AttributeError(f"module 'parllel.interop' has no attribute {name!r}")
