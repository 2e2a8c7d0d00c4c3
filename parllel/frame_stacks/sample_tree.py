"""One stored frame per step in the on-policy ``[T, B]`` sample tree.

A tree built with ``frame_stack=k`` keeps ``observation`` and
``final_observation`` as ``[B, k, ...]`` staging slots (the cages write each
step's stacks there, the agent reads them), ``frames`` ``[k + T, B, ...]``
(row ``k - 1 + t``: the newest frame of ``observation[t]``) and
``frame_depth`` ``[T, B]``; step ``t``'s stack is rebuilt by
:func:`~parllel.frame_stacks.rule.stack_rows`. The layout and its checks:
docs/samplers.md ("Frame stacks").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from parllel import fields
from parllel.arrays import Array
from parllel.arrays.array import Storage
from parllel.errors import ConfigError, EnvError
from parllel.frame_stacks.rule import check_frame_stack, frame_words, stack_rows
from parllel.tree import ArrayDict

__all__ = [
    "FrameViews",
    "allocate_frame_fields",
    "carry_staged_observation",
    "check_frame_sampler",
]


def allocate_frame_fields(
    tree: ArrayDict,
    observation: Any,
    frame_stack: Any,
    shape: tuple[int, int],
    storage: Storage,
    final_observation: bool,
    *,
    recurrent: bool,
    full_size: int | None,
) -> None:
    """Add the ``frame_stack=k`` observation fields to ``tree`` (module docstring).

    Raises:
        ConfigError: ``frame_stack`` is not an int >= 1, the tree is for a
            recurrent agent or a replay (``full_size``), or the observation is
            not one array of ``k``-frame stacks on its first axis.
    """
    if recurrent or full_size is not None:
        raise ConfigError(
            f"frame_stack is for the [T, B] trees of feed-forward samplers, "
            f"not with recurrent=True or full_size (got recurrent={recurrent}, "
            f"full_size={full_size}); a replay stores one frame per step with "
            "build_frame_replay_tree and UniformReplay(frame_stack=k)"
        )
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


def check_frame_sampler(recurrent: bool, normalizer: object | None) -> None:
    """Refuse what a sampler of a ``frame_stack`` tree does not support.

    Raises:
        ConfigError: a recurrent agent or an observation normalizer.
    """
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


def carry_staged_observation(source: ArrayDict, target: ArrayDict) -> None:
    """Copy ``source``'s staged ``observation[T]`` into ``target``'s slot (a
    sampler that switches trees continues from there)."""
    stage = target[fields.OBSERVATION].to_ndarray()
    stage[...] = source[fields.OBSERVATION].to_ndarray()


class FrameViews:
    """One group of env columns' frame fields: stores and checks each step's frame.

    Args:
        sample_tree: a tree built with ``frame_stack=k``.
        columns: the group's env columns.
    """

    def __init__(self, sample_tree: ArrayDict, columns: slice) -> None:
        self.stage = sample_tree[fields.OBSERVATION].to_ndarray()[columns]
        final = sample_tree.get(fields.FINAL_OBSERVATION)
        # the final stacks of a step's ended episodes (None: not recorded)
        self.final_stage = None if final is None else final.to_ndarray()[columns]
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

    def begin(self) -> None:
        """Start a batch: copy ``observation[0]``'s whole stack into the frames'
        first ``k`` rows.

        Its stack then needs no history from before the batch (depth ``k - 1``),
        whatever happened there: a previous batch, a reset, decorrelation steps.
        """
        self.frames[: self.k] = np.swapaxes(self.stage, 0, 1)
        self.depth[0] = self.k - 1

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
