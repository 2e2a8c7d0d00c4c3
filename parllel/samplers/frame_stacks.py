"""One stored frame per step in the on-policy ``[T, B]`` sample tree.

An env that stacks frames itself (gymnasium's ``FrameStackObservation(k)``,
EnvPool's ``stack_num=k``) gives ``(k, ...)`` stacks, one new frame per
step. A tree built with ``frame_stack=k``
(:func:`~parllel.samplers.sample_tree_from_examples`,
:func:`~parllel.builders.build_sample_tree`) keeps:

- ``observation``: a ``[B, k, ...]`` staging slot. The cages write each
  step's stacks into it and the agent reads them from it, so inference sees
  the env's own stacks; one slot serves every step, since the agent has
  read ``observation[t]`` before the cages write ``observation[t + 1]``. At
  the end of a batch it holds ``observation[T]`` (the bootstrap value's
  input, and the next batch's ``observation[0]``).
- ``final_observation``: a ``[B, k, ...]`` staging slot for the final
  stacks of the episodes ending in a step; the sampler values the truncated
  ones at that step (``final_value`` stays ``[T, B]``).
- ``frames``: ``[k + T, B, ...]``, row ``k - 1 + t`` the newest frame of
  ``observation[t]`` (``t = 0 .. T``), copied from the staging slot after
  each step; rows ``0 .. k - 2`` the older frames of ``observation[0]``'s
  stack (the previous batch's frames, or its reset padding), copied from the
  staging slot when the batch starts.
- ``frame_depth``: ``[T, B]`` int8, the earlier frames of its episode the
  stack of step ``t`` holds (0 at an episode's first step, at most
  ``k - 1``; ``k - 1`` at a batch's first step, whose whole stack is in the
  prefix).

Step ``t``'s stack is then the frames of rows ``k - 1 + t - j``, each
clamped to row ``k - 1 + t - depth`` (:func:`~parllel.arrays.frame_stacks.stack_rows`,
the rule the replays use), which PPO's minibatches gather for the samples
they take (:mod:`parllel.torch.algos.frame_batch`). After every step the
sampler checks that the env's new stacks are exactly what the frames give
(a :class:`~parllel.errors.EnvError` names the env and step where
not), so a rebuilt stack equals the env's bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from parllel import fields
from parllel.arrays import Array
from parllel.arrays.array import Storage
from parllel.arrays.frame_stacks import check_frame_stack, frame_words, stack_rows
from parllel.errors import ConfigError, EnvError
from parllel.tree import ArrayDict

__all__ = ["FrameViews", "allocate_frame_fields", "begin_frames", "check_frame_sampler"]


def allocate_frame_fields(
    tree: ArrayDict,
    observation: Any,
    frame_stack: Any,
    shape: tuple[int, int],
    storage: Storage,
    final_observation: bool,
) -> None:
    """Add the ``frame_stack=k`` observation fields to ``tree`` (module docstring).

    Raises:
        ConfigError: ``frame_stack`` is not an int >= 1, or the observation
            is not one array of ``k``-frame stacks on its first axis.
    """
    k = check_frame_stack(frame_stack)
    if k > 128:
        raise ConfigError(f"frame_stack={k}: at most 128 frames per stack")
    if isinstance(observation, Mapping) or isinstance(observation, (tuple, list)):
        raise ConfigError(
            f"frame_stack={k} needs the observation to be one array of k-frame "
            f"stacks; the env's is a {type(observation).__name__} (dict and tuple "
            "observations are not supported): leave frame_stack out"
        )
    example = np.asarray(observation)
    if example.ndim < 2:
        raise ConfigError(
            f"frame_stack={k} needs observations that stack k frames on the "
            f"first axis, each frame an array of its own; the env's are of "
            f"shape {example.shape}, one vector, not a stack: wrap the env in "
            f"FrameStackObservation({k}) (its observations become "
            f"({k}, {', '.join(map(str, example.shape))})), or leave frame_stack out"
        )
    if example.shape[0] != k:
        raise ConfigError(
            f"frame_stack={k} needs observations of shape (k, ...) = ({k}, ...), "
            "the frames on the first axis as FrameStackObservation"
            f"({k}) or EnvPool's stack_num={k} give them; the env's are "
            f"{example.shape}: pass the env's stack size (frame_stack="
            f"{example.shape[0]} if it stacks {example.shape[0]} frames), "
            "or leave frame_stack out"
        )
    T, B = shape
    frame_shape, dtype = example.shape[1:], example.dtype
    tree[fields.OBSERVATION] = Array((B,), example.shape, dtype, storage=storage)
    tree[fields.FRAMES] = Array((k + T, B), frame_shape, dtype, storage=storage)
    tree[fields.FRAME_DEPTH] = Array((T, B), (), np.int8, storage=storage)
    if final_observation:
        tree[fields.FINAL_OBSERVATION] = Array(
            (B,), example.shape, dtype, storage=storage
        )


def check_frame_sampler(
    sample_tree: ArrayDict, recurrent: bool, normalizer: object | None
) -> None:
    """Refuse what a ``frame_stack`` tree does not support.

    Raises:
        ConfigError: a recurrent agent or an observation normalizer.
    """
    if fields.FRAMES not in sample_tree:
        return
    if recurrent:
        raise ConfigError(
            "a sample tree built with frame_stack supports feed-forward agents "
            "only (recurrent PPO minibatches whole sequences of whole stacks): "
            "build it without frame_stack"
        )
    if normalizer is not None:
        raise ConfigError(
            "a sample tree built with frame_stack stores the env's frames as they "
            "are: drop the observation normalizer (image models scale their "
            "input) or build the tree without frame_stack"
        )


def begin_frames(sample_tree: ArrayDict) -> None:
    """Start a batch: copy ``observation[0]``'s whole stack into the frames' first ``k`` rows.

    Its stack then needs no history from before the batch (depth ``k - 1``),
    whatever happened there: a previous batch, a reset, decorrelation steps.
    """
    stage = sample_tree[fields.OBSERVATION].to_ndarray()  # [B, k, ...]
    k = stage.shape[1]
    frames = sample_tree[fields.FRAMES].to_ndarray()
    frames[:k] = np.swapaxes(stage, 0, 1)
    sample_tree[fields.FRAME_DEPTH].to_ndarray()[0] = k - 1


class FrameViews:
    """One group of env columns' frame fields: stores and checks each step's frame.

    Args:
        sample_tree: a tree built with ``frame_stack=k``.
        columns: the group's env columns.
    """

    def __init__(self, sample_tree: ArrayDict, columns: slice) -> None:
        self.stage = sample_tree[fields.OBSERVATION].to_ndarray()[columns]
        self.frames = sample_tree[fields.FRAMES].to_ndarray()[:, columns]
        self.depth = sample_tree[fields.FRAME_DEPTH].to_ndarray()[:, columns]
        self.k = self.stage.shape[1]
        self.T = self.depth.shape[0]
        self.lo = columns.start or 0
        self._offsets = np.arange(1 - self.k, 1)
        self._frame_ndim = self.stage.ndim - 2
        # views as words of each frame's bytes: compared without copies
        self._stage_words = frame_words(self.stage, self._frame_ndim)  # [n, k, w]
        self._frame_words = frame_words(self.frames, self._frame_ndim)  # [k + T, n, w]
        assert np.shares_memory(self._stage_words, self.stage)  # views, not copies
        assert np.shares_memory(self._frame_words, self.frames)

    def store(self, t: int, done: np.ndarray) -> None:
        """After step ``t``: keep the newest frame of ``observation[t + 1]``,
        its depth (``done[t]``: an episode starts there), and check its stack.

        Raises:
            EnvError: an env's new stack is not its previous one
                shifted by one frame (or, after a reset, its frame repeated).
        """
        k, row = self.k, self.k + t  # row of observation[t + 1]
        self.frames[row] = self.stage[:, -1]
        depth = np.where(done, 0, np.minimum(self.depth[t] + 1, k - 1))
        if t + 1 < self.T:
            self.depth[t + 1] = depth
        if k == 1:
            return
        # the newest frame was just copied: check the k - 1 older ones. A stack
        # that continues its episode for all of them is the k - 1 rows before
        # (one comparison of views, no gather); the others (an episode's first
        # k - 1 steps) are gathered by the rule, clamped to their episode start.
        older = self._stage_words[:, :-1]  # [n, k - 1, w]
        previous = self._frame_words[row - k + 1 : row].swapaxes(0, 1)
        bad = (previous != older).any(axis=(1, 2)) & (depth == k - 1)
        young = np.flatnonzero(depth < k - 1)
        if len(young):
            first = row - depth[young].astype(np.int64)  # each stack's oldest row
            rows = stack_rows(np.full(len(young), row), first, self._offsets)
            rebuilt = self._frame_words[rows[:, :-1], young[:, None]]
            bad[young] = (rebuilt != older[young]).any(axis=(1, 2))
        if bad.any():
            b = int(np.argmax(bad))
            self._fail(t, b, bool(done[b]))

    def _fail(self, t: int, b: int, reset: bool) -> None:
        what = (
            "its first observation after a reset is not the reset frame repeated"
            if reset
            else "its observation is not the previous one shifted by one frame"
        )
        raise EnvError(
            f"frame_stack={self.k}: env column {self.lo + b}, step {t} of the batch: "
            f"{what}, so it cannot be stored as one frame per step. The env must "
            f"stack its last {self.k} frames on the first axis, padding an "
            f"episode's start with its reset frame: gymnasium's "
            f"FrameStackObservation({self.k}) with padding_type='reset' (the "
            "default) as the outermost observation wrapper, or EnvPool's "
            "stack_num with episodic_life=False (its stacks run on across lost "
            "lives); otherwise build the sample tree without frame_stack"
        )
