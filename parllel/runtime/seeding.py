"""Seeding a run: :class:`Seeds` (one master seed, every stream derived) and
:func:`seed_everything` (python, numpy and torch seeded from them).

The scheme itself lives in :mod:`parllel.seeding` (torch-free, so cages,
samplers and replays use the same one); :class:`Seeds` is re-exported here.
The seeds are plain ints, recorded in the run's ``metadata.json`` so a run
can be repeated exactly.
"""

from __future__ import annotations

import random

import numpy as np

from parllel.errors import ConfigError
from parllel.seeding import Seeds

__all__ = ["Seeds", "seed_everything"]


def seed_everything(
    seeds: Seeds, *, torch_deterministic: bool = False
) -> np.random.Generator:
    """Seed python ``random``, numpy's global RNG and torch's (CPU and CUDA) RNGs.

    Envs are not touched: give the cages ``seed=seeds.envs`` (or
    ``seeds.master``: the same seeds) and evaluation cages
    ``seed=seeds.eval_envs``; they seed env ``i`` at its first reset.

    Args:
        seeds: the run's seeds.
        torch_deterministic: also call
            ``torch.use_deterministic_algorithms(True)`` (slower on GPU; some
            ops then raise instead of running nondeterministically).

    Returns:
        A ``np.random.Generator`` seeded from ``seeds.numpy``, for code that
        prefers an explicit generator over the global one.
    """
    random.seed(seeds.python)
    np.random.seed(seeds.numpy)
    try:
        import torch
    except ImportError as error:  # torch is optional below parllel.torch
        if torch_deterministic:
            raise ConfigError(
                "torch_deterministic=True but torch is not installed"
            ) from error
    else:
        torch.manual_seed(seeds.torch)  # also seeds every CUDA device
        if torch_deterministic:
            torch.use_deterministic_algorithms(True)
    return seeds.numpy_generator()
