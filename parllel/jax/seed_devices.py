"""The seed axis across host devices: K runs' updates split over the CPU's cores.

JAX gives a CPU one device unless asked for more before its first
computation (:func:`~parllel.jax.cpu_backend.configure_cpu_backend`). With D
devices, a :class:`SeedStack` places its ``[K, ...]`` leaves split along the runs (K divisible by D), and
the vmapped updates then run D slices of the seed axis side by side, one per
core (docs/seeds.md, "Using every core").
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = ["place_runs", "seed_sharding"]

_AXIS = "runs"


def seed_sharding(n_runs: int) -> NamedSharding | None:
    """How K runs split over the default backend's devices: the most devices
    that divide ``n_runs`` evenly; None when that is one device."""
    devices = jax.devices()
    used = max(d for d in range(1, len(devices) + 1) if n_runs % d == 0)
    if used == 1:
        return None
    return NamedSharding(Mesh(np.array(devices[:used]), (_AXIS,)), PartitionSpec(_AXIS))


def place_runs(tree: Any, sharding: NamedSharding | None) -> Any:
    """``tree``'s ``[K, ...]`` leaves split over ``sharding``'s devices along
    the runs (None: as they are)."""
    if sharding is None:
        return tree
    return jax.device_put(tree, sharding)
