"""Copying a sampler's ``[T, B]`` window into a replay tree's window."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from parllel import fields
from parllel.arrays import Array
from parllel.errors import ConfigError
from parllel.frame_stacks.replay import FrameStack

__all__ = ["copy_pairs", "window"]


def window(array: Array, observation_rows: bool, T: int) -> np.ndarray:
    """``array``'s window: rows ``0..T`` (with the bootstrap row) or ``0..T-1``."""
    if observation_rows:
        p = array.padding
        return array.padded_ndarray()[p : p + T + 1]
    return array.to_ndarray()


def copy_pairs(
    leaves: list[tuple[str, Array]],
    batch: Mapping[str, Any],
    T: int,
    frames: FrameStack | None = None,
) -> list[tuple[Array, Array, bool]]:
    """Match the replay tree's leaves with a sample tree's; check they fit.

    With ``frames``, the sample tree's observation and final observation are
    stacks of the replay's frames (only their newest frame is copied).

    Raises:
        ConfigError: a field is missing or a leaf has another shape or dtype.
    """
    if fields.FRAMES in batch:
        raise ConfigError(
            "record_batch() copies whole observations, but the sample tree stores "
            "one frame per step (built with frame_stack): build it without "
            "frame_stack; a replay stores one frame per step itself "
            "(build_frame_replay_tree, UniformReplay(frame_stack=k))"
        )
    pairs = []
    for path, target in leaves:
        source: Any = batch
        try:
            for key in path.split("."):
                source = source[key]
        except (KeyError, TypeError):
            raise ConfigError(
                f"the sample tree passed to record_batch() lacks {path!r}"
            ) from None
        field = path.split(".")[0]
        observation_rows = field == fields.OBSERVATION
        stacked = frames is not None and field in (
            fields.OBSERVATION,
            fields.FINAL_OBSERVATION,
        )
        if stacked and isinstance(source, Array):
            assert frames is not None
            frames.check_shapes(path, source.shape, target.shape)
        elif not isinstance(source, Array) or source.shape != target.shape:
            shape = getattr(source, "shape", None)
            raise ConfigError(
                f"sample-tree leaf {path!r} has shape {shape}; the replay tree's "
                f"window is {target.shape} (same T, B and feature shape needed)"
            )
        if not np.can_cast(source.dtype, target.dtype, "same_kind"):
            raise ConfigError(
                f"sample-tree leaf {path!r} is {source.dtype}; the replay stores "
                f"{target.dtype}"
            )
        if observation_rows and source.padding < 1:
            raise ConfigError(
                f"sample-tree leaf {path!r} needs padding >= 1 (row T is copied too)"
            )
        window(source, observation_rows, T)  # in bounds
        pairs.append((source, target, observation_rows))
    return pairs
