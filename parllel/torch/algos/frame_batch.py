"""Frame stacks of a ``frame_stack`` batch, rebuilt for the samples a minibatch takes.

A sample tree built with ``frame_stack=k`` stores one frame per step
(:mod:`parllel.frame_stacks.sample_tree`): ``frames`` ``[k + T, B, ...]`` and
``frame_depth`` ``[T, B]``. :class:`FrameStacks` stands in for the
observation of a :class:`~parllel.torch.algos.batch.PolicyBatch`: a
minibatch gathers the ``k`` frames of each sample it takes with one index
(:func:`~parllel.frame_stacks.rule.stack_rows`, the replays' rule), so
only ``[n, k, ...]`` is ever built, never a ``k``-fold copy of the batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from parllel import fields
from parllel.errors import ConfigError, ShapeError
from parllel.frame_stacks.rule import stack_rows

__all__ = ["FrameStacks"]


@dataclass(frozen=True)
class FrameStacks:
    """The observations of a ``[T, B]`` batch as stored frames.

    Attributes:
        frames: ``[k + T, B, ...]``, row ``k - 1 + t`` the newest frame of step ``t``.
        first: ``[T * B]`` int64, per sample (``t * B + b``) the row of the
            oldest frame its stack may take (its episode's reset frame, or
            ``k - 1`` rows back).
        k: frames per stack.
    """

    frames: torch.Tensor
    first: torch.Tensor
    k: int

    @classmethod
    def from_batch(
        cls, batch: Mapping[str, Any], leading: tuple[int, ...]
    ) -> FrameStacks:
        """Read ``frames`` and ``frame_depth`` of a batch of tensors (``[T, B]`` = ``leading``).

        Raises:
            ShapeError: the fields do not fit ``[T, B]``.
        """
        frames, depth = batch[fields.FRAMES], batch.get(fields.FRAME_DEPTH)
        T, B = leading
        if depth is None or tuple(depth.shape) != (T, B):
            raise ShapeError(
                f"a frame_stack batch needs {fields.FRAME_DEPTH!r} of shape [T, B] = "
                f"{(T, B)}; got {None if depth is None else tuple(depth.shape)}"
            )
        k = frames.shape[0] - T
        if k < 1 or frames.shape[1] != B:
            raise ShapeError(
                f"{fields.FRAMES!r} must be [k + T, B, ...] with T, B = {(T, B)}; "
                f"got {tuple(frames.shape)}"
            )
        t = torch.arange(T, device=depth.device)[:, None]
        first = (t + (k - 1) - depth.to(torch.int64)).reshape(T * B)
        return cls(frames, first, k)

    @property
    def batch_envs(self) -> int:
        """``B``."""
        return self.frames.shape[1]

    def gather(self, index: torch.Tensor) -> torch.Tensor:
        """The ``[n, k, ...]`` stacks of flat samples ``index`` (``t * B + b``)."""
        index = index.to(self.first.device)
        B = self.batch_envs
        rows = torch.div(index, B, rounding_mode="floor") + (self.k - 1)
        offsets = torch.arange(1 - self.k, 1, device=index.device)
        stacks = stack_rows(rows, self.first[index], offsets)  # [n, k] frame rows
        flat = (stacks * B + (index % B)[:, None]).reshape(-1)
        # index_select on [rows * B] frames: a plain row gather (torch's
        # advanced indexing of uint8 images is several times slower on CPU)
        taken = self.frames.flatten(0, 1).index_select(0, flat.to(self.frames.device))
        return taken.reshape(len(index), self.k, *self.frames.shape[2:])

    def all(self) -> torch.Tensor:
        """Every sample's stack, ``[T * B, k, ...]`` (the whole batch, e.g. one minibatch)."""
        return self.gather(torch.arange(self.first.numel(), device=self.first.device))


def refuse_frames(batch: Mapping[str, Any], what: str) -> None:
    """Raise if ``batch`` stores one frame per step and ``what`` reads whole stacks.

    Raises:
        ConfigError: naming ``what``.
    """
    if fields.FRAMES in batch:
        raise ConfigError(
            f"{what} reads whole observations, but the batch stores one frame per "
            "step (a sample tree built with frame_stack): build it without "
            "frame_stack"
        )
