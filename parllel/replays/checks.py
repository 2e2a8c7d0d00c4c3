"""Argument checks and RNG state helpers shared by the replay types."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from parllel.errors import ConfigError, ReplayError
from parllel.replays.storage import ReplayStorage

__all__ = [
    "check_can_sample",
    "check_replay_config",
    "rng_state",
    "set_rng_state",
]


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def check_replay_config(
    storage: ReplayStorage,
    batch_size: int,
    learning_starts: int,
    n_step: int,
    discount: float,
    rng: Any,
) -> None:
    """Validate the constructor arguments every replay takes.

    Raises:
        ConfigError: with the reason.
    """
    if not isinstance(rng, np.random.Generator):
        raise ConfigError(
            "rng must be a numpy Generator (e.g. np.random.default_rng(seed)); "
            f"got {type(rng).__name__}"
        )
    capacity = (storage.capacity - storage.history) * storage.num_envs
    offered = "(full_size - frame_stack)" if storage.history else "(full_size - 1)"
    if not _is_int(batch_size) or not 1 <= batch_size <= capacity:
        raise ConfigError(
            f"batch_size must be an integer in [1, {capacity}] (the replay offers at "
            f"most {offered} * B = {capacity} transitions); got {batch_size!r}"
        )
    if not _is_int(learning_starts) or not 0 <= learning_starts <= capacity:
        raise ConfigError(
            f"learning_starts must be an integer in [0, {capacity}]; got "
            f"{learning_starts!r}"
        )
    if not _is_int(n_step) or not 1 <= n_step <= storage.capacity:
        raise ConfigError(
            f"n_step must be an integer in [1, {storage.capacity}]; got {n_step!r}"
        )
    if not (isinstance(discount, (int, float, np.floating)) and 0.0 <= discount <= 1.0):
        raise ConfigError(f"discount must be in [0, 1]; got {discount!r}")
    if not math.isfinite(discount):
        raise ConfigError(f"discount must be finite; got {discount!r}")


def check_can_sample(
    storage: ReplayStorage, batch_size: int, learning_starts: int
) -> None:
    """Refuse to sample before ``learning_starts`` or more than is stored.

    Raises:
        ReplayError: naming how much is stored and how much is needed.
    """
    stored = storage.num_transitions
    if stored < learning_starts:
        raise ReplayError(
            f"the replay holds {stored} transitions, fewer than learning_starts="
            f"{learning_starts}; check `replay.ready` before sampling"
        )
    if stored < batch_size:
        raise ReplayError(
            f"cannot sample {batch_size} transitions: the replay holds {stored}"
        )


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    """The generator's bit-generator state (a plain dict)."""
    return dict(rng.bit_generator.state)  # a fresh dict (numpy types it a Mapping)


def set_rng_state(rng: np.random.Generator, state: Mapping[str, Any]) -> None:
    """Restore a state from :func:`rng_state` (same bit generator type).

    Raises:
        ConfigError: the saved state is from another bit generator type.
    """
    expected = type(rng.bit_generator).__name__
    if state.get("bit_generator") != expected:
        raise ConfigError(
            f"saved RNG state is for {state.get('bit_generator')!r}, this replay's "
            f"generator uses {expected!r}"
        )
    rng.bit_generator.state = dict(state)
