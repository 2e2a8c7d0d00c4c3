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
from parllel.errors.base import install_hint
from parllel.interop.gymnasium_vector_env import make_vec
from parllel.interop.vector_env_cage import VectorEnvCage

__all__ = [
    "EnvPoolCage",
    "VectorEnvCage",
    "make_envpool_cage",
    "make_sb3_vec_env",
    "make_vec",
]

_SB3 = (
    "stable_baselines3",
    f"Stable-Baselines3: install torch, then {install_hint('sb3')}",
)
_ENVPOOL = ("envpool", f"EnvPool 1.2.5 (Python >= 3.11): {install_hint('envpool')}")
# name: (its module, the package it imports, what to install); imported on first
# use (the SB3 adapter subclasses SB3's VecEnv, the EnvPool cage imports EnvPool)
_LAZY = {
    "make_sb3_vec_env": ("sb3_vec_env", *_SB3),
    "EnvPoolCage": ("envpool_cage", *_ENVPOOL),
    "make_envpool_cage": ("envpool_cage", *_ENVPOOL),
}


def __getattr__(name: str) -> Any:
    """The optional adapters of :data:`_LAZY`, imported on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module 'parllel.interop' has no attribute {name!r}")
    module_name, package, install = _LAZY[name]
    try:
        module = importlib.import_module(f"parllel.interop.{module_name}")
    except ModuleNotFoundError as exc:
        if exc.name is None or not exc.name.startswith(package):
            raise
        raise MissingDependencyError(f"parllel.interop.{name} needs {install}") from exc
    return getattr(module, name)
