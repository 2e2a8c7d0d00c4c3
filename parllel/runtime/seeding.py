"""Seeding a run: :class:`Seeds` (one master seed, every stream derived) and
:func:`seed_everything` (python, numpy and the learning library seeded from them).

The scheme itself lives in :mod:`parllel.seeding` (torch-free, so cages,
samplers and replays use the same one); :class:`Seeds` is re-exported here.
The seeds are plain ints, recorded in the run's ``metadata.json`` so a run
can be repeated exactly.
"""

from __future__ import annotations

import random

import numpy as np

from parllel.errors import ConfigError
from parllel.runtime.backends import backend_named, loaded_backends
from parllel.seeding import Seeds

__all__ = ["Seeds", "seed_everything"]


def seed_everything(
    seeds: Seeds, *, torch_deterministic: bool = False
) -> np.random.Generator:
    """Seed python ``random``, numpy's global RNG and the learning library's.

    The library is each one the script has imported: torch's CPU and CUDA RNGs
    get ``seeds.torch``; JAX has no global RNG. Call it after the script's
    imports. Envs are not touched: give the cages ``seed=seeds.envs`` and
    evaluation cages ``seed=seeds.eval_envs``.

    Args:
        torch_deterministic: also call
            ``torch.use_deterministic_algorithms(True)`` (imports torch).

    Returns:
        A ``np.random.Generator`` seeded from ``seeds.numpy``.

    Raises:
        ConfigError: ``torch_deterministic`` without torch installed.
    """
    random.seed(seeds.python)
    np.random.seed(seeds.numpy)
    backends = loaded_backends()
    if torch_deterministic and all(backend.name != "torch" for backend in backends):
        try:
            backends.append(backend_named("torch"))
        except ImportError as error:
            raise ConfigError(
                "torch_deterministic=True but torch is not installed"
            ) from error
    for backend in backends:
        backend.seed(
            seeds, deterministic=torch_deterministic and backend.name == "torch"
        )
    return seeds.numpy_generator()
