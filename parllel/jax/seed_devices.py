"""The seed axis across host devices: K runs' updates split over the CPU's cores.

JAX gives a CPU one device unless asked for more before its first
computation (``jax_num_cpu_devices``). With D devices, a :class:`SeedStack`
places its ``[K, ...]`` leaves split along the runs (K divisible by D), and
the vmapped updates then run D slices of the seed axis side by side, one per
core (docs/seeds.md, "Using every core").
"""

from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from parllel.errors import ConfigError

__all__ = ["place_runs", "request_cpu_devices", "seed_sharding"]

_AXIS = "runs"


def request_cpu_devices(n_devices: int | None = None) -> int:
    """Ask JAX for ``n_devices`` CPU devices (None: one per usable core).

    Call it before the program's first JAX computation: once JAX has
    started its backends, the device count is fixed, and nothing changes
    (a count set by the user through ``JAX_NUM_CPU_DEVICES`` or
    ``jax_num_cpu_devices`` is kept too). Returns the CPU devices JAX will
    use.

    Raises:
        ConfigError: ``n_devices`` is below 1.
    """
    if n_devices is None:
        n_devices = len(os.sched_getaffinity(0))
    if n_devices < 1:
        raise ConfigError(f"n_devices must be >= 1, got {n_devices}")
    chosen = getattr(jax.config, "jax_num_cpu_devices", -1)
    if chosen == -1:  # nobody has chosen a count yet
        try:
            jax.config.update("jax_num_cpu_devices", int(n_devices))
        except RuntimeError:  # JAX has already computed: its count stays
            pass
    return len(jax.devices("cpu"))


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
