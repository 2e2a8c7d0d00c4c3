"""The rules of ``k``-frame stacks rebuilt from one stored frame per step.

Atari observations are ``k``-frame stacks (gymnasium's
``FrameStackObservation(k)``, EnvPool's ``stack_num=k``): each step adds
one new frame, and an episode's first stack repeats its reset frame
(``padding_type="reset"``, the default). Storing only the newest frame of
each step, the stack of a stored step is the ``k`` frames ending at its
row, never reaching before the row of its episode's reset frame, which
stands in for the missing ones (:func:`stack_rows`). The replays
(:mod:`parllel.frame_stacks.replay`), the on-policy sample tree
(:mod:`parllel.frame_stacks.sample_tree`) and PPO's minibatches
(:mod:`parllel.torch.algos.frame_batch`) rebuild stacks with this one rule
and compare them bit for bit with :func:`frame_words`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from parllel.errors import ConfigError

__all__ = ["check_frame_stack", "frame_words", "stack_rows"]


def check_frame_stack(frame_stack: Any) -> int:
    """``frame_stack`` as an int >= 1.

    Raises:
        ConfigError: it is not an integer of at least 1.
    """
    if (
        not isinstance(frame_stack, (int, np.integer))
        or isinstance(frame_stack, bool)
        or frame_stack < 1
    ):
        raise ConfigError(
            f"frame_stack must be an integer >= 1 (the k of FrameStackObservation(k)); "
            f"got {frame_stack!r}"
        )
    return int(frame_stack)


def stack_rows(rows: Any, first: Any, offsets: Any) -> Any:
    """Storage rows of the frames of the stacks at ``rows``, oldest first.

    The stack at row ``r`` holds the frames of rows ``r - k + 1 .. r``, each
    clamped to the row ``first`` of its episode's reset frame (which repeats
    where the episode is younger than the stack): ``max(r + offset, first)``.

    Works alike on numpy arrays and torch tensors (all of one kind).

    Args:
        rows: ``[n]`` row of each stack's newest frame.
        first: ``[n]`` row of each stack's episode start (at most ``k - 1``
            rows back; any row further back reads as that far back).
        offsets: ``[k]`` the range ``1 - k .. 0`` (``np.arange(1 - k, 1)``).

    Returns:
        ``[n, k]`` rows (may be negative or past a ring's end: the caller
        wraps them).
    """
    return (rows[:, None] + offsets[None, :]).clip(min=first[:, None])


def frame_words(stacks: np.ndarray, frame_ndim: int) -> np.ndarray:
    """``[..., *frame]`` frames as ``[..., n]`` unsigned words of each frame's
    bytes (8-byte words where the frame size allows): equal words are equal
    bits, NaN included. A view where each frame is contiguous in memory (a
    copy otherwise)."""
    lead = stacks.shape[: stacks.ndim - frame_ndim]
    flat = stacks.reshape(lead + (-1,))
    if flat.strides[-1] != flat.itemsize:
        flat = np.ascontiguousarray(flat)
    raw = flat.view(np.uint8)
    frame_bytes: int = raw.shape[len(lead)]
    word = next(w for w in (8, 4, 2, 1) if frame_bytes % w == 0)
    return raw.view(f"u{word}")
