"""Replays of single frames: ``k``-frame stacks rebuilt when sampled.

A replay built with ``frame_stack=k`` (a tree from
:func:`build_frame_replay_tree`, :class:`~parllel.replays.UniformReplay`'s
``frame_stack``) stores only the newest frame of each step; :class:`FrameStack`
checks every recorded batch (a :class:`~parllel.errors.ReplayError` names the
step whose stacks do not roll one frame per step) and rebuilds the stacks by
:func:`~parllel.frame_stacks.rule.stack_rows`, bit for bit the wrapper's.
The rule and its limits: docs/atari.md ("One stored frame per step").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from parllel import fields
from parllel.arrays import Array
from parllel.errors import ConfigError, ReplayError
from parllel.frame_stacks.rule import check_frame_stack, frame_words, stack_rows
from parllel.tree import ArrayDict

__all__ = ["FrameStack", "build_frame_replay_tree"]


def _stack_leaf(sample_tree: Mapping[str, Any], name: str, k: int) -> Array:
    """The sample tree's ``name`` leaf, checked to be an Array of ``k``-stacks."""
    leaf = sample_tree[name]
    if not isinstance(leaf, Array):
        raise ConfigError(
            f"frame_stack needs one Array of stacks as {name!r}; the sample tree "
            f"has a {type(leaf).__name__} (dict observations are not supported)"
        )
    shape = tuple(leaf.feature_shape)
    if len(shape) < 2 or shape[0] != k:
        raise ConfigError(
            f"frame_stack={k} needs {name!r} stacks of shape (k, ...) with the "
            f"frames on the first axis, as FrameStackObservation({k}) gives; the "
            f"sample tree's are {shape}"
        )
    return leaf


def build_frame_replay_tree(
    sample_tree: Mapping[str, Any], full_size: int, frame_stack: int
) -> ArrayDict:
    """Allocate a replay tree that stores one frame per step (local memory).

    ``sample_tree`` is the sampler's ``[T, B]`` tree (with a final
    observation, e.g. ``build_sample_tree(..., final_observation=True)``)
    whose observation is ``(frame_stack, ...)`` stacks. The replay tree has
    its fields, full-size (``full_size`` rounded up to a multiple of ``T``),
    with the observation and final-observation slot holding single frames.
    Pass it to a replay with the same ``frame_stack`` and record with
    ``replay.record_batch(sample_tree)``.

    Example:
        >>> sample_tree = build_sample_tree(cage, handler, 4, final_observation=True)
        >>> tree = build_frame_replay_tree(sample_tree, 1_000_000, frame_stack=4)
        >>> replay = UniformReplay(tree, 32, rng, frame_stack=4)

    Raises:
        ConfigError: a field is missing or the observation is not a stack.
    """
    k = check_frame_stack(frame_stack)
    missing = [name for name in fields.REPLAY_FIELDS if name not in sample_tree]
    if missing:
        raise ConfigError(
            f"the sample tree lacks {missing}; build it with final_observation=True"
        )
    first = _stack_leaf(sample_tree, fields.OBSERVATION, k)
    _stack_leaf(sample_tree, fields.FINAL_OBSERVATION, k)
    T, B = first.batch_shape
    rows = -(-int(full_size) // T) * T
    tree = ArrayDict()
    for name in fields.REPLAY_FIELDS:
        leaf = sample_tree[name]
        if not isinstance(leaf, Array):
            raise ConfigError(f"sample-tree field {name!r} must be one Array")
        feature = tuple(leaf.feature_shape)
        if name in (fields.OBSERVATION, fields.FINAL_OBSERVATION):
            feature = feature[1:]
        tree[name] = Array(
            (T, B),
            feature,
            leaf.dtype,
            padding=1 if name == fields.OBSERVATION else 0,
            full_size=rows if name != fields.FINAL_OBSERVATION else None,
        )
    return tree


class FrameStack:
    """Checks stacks on recording and rebuilds them on sampling.

    Args:
        k: frames per stack.
    """

    def __init__(self, k: int) -> None:
        self.k = check_frame_stack(k)
        self.history = self.k - 1  # steps per env kept only as history

    def check_shapes(self, path: str, source: tuple, target: tuple) -> None:
        """A sample-tree observation leaf must be ``k`` of the stored frames.

        Raises:
            ConfigError: naming both shapes.
        """
        expected = tuple(target[:2]) + (self.k,) + tuple(target[2:])
        if tuple(source) == tuple(target):
            raise ConfigError(
                f"the replay tree's {path!r} has the sample tree's shape {source}: "
                "it stores whole stacks; build it with build_frame_replay_tree() "
                "for a frame_stack replay"
            )
        if tuple(source) != expected:
            raise ConfigError(
                f"frame_stack={self.k}: sample-tree leaf {path!r} has shape {source}; "
                f"expected {expected} (stacks of the replay's {target[2:]} frames on "
                "the first feature axis, as FrameStackObservation gives)"
            )

    def check_sample_tree(
        self, batch: Mapping[str, Any], T: int, starts: np.ndarray
    ) -> None:
        """:meth:`check_batch` on a sample tree's window (rows ``0..T``)."""
        leaf = batch[fields.OBSERVATION]
        observation = leaf.padded_ndarray()[leaf.padding : leaf.padding + T + 1]
        ended = np.asarray(batch[fields.TERMINATED].to_ndarray(), bool) | np.asarray(
            batch[fields.TRUNCATED].to_ndarray(), bool
        )
        final = batch[fields.FINAL_OBSERVATION].to_ndarray()
        self.check_batch(observation, ended, final, starts)

    def check_batch(
        self,
        observation: np.ndarray,
        ended: np.ndarray,
        final: np.ndarray,
        starts: np.ndarray,
    ) -> None:
        """Check that a batch's stacks roll one frame per step.

        Args:
            observation: ``[T + 1, B, k, ...]`` the window with its bootstrap row.
            ended: ``[T, B]`` bool, the step ended an episode.
            final: ``[T, B, k, ...]`` final observations (read where ``ended``).
            starts: ``[B]`` bool, the window's first observation starts an episode.

        Raises:
            ReplayError: naming the first step that does not fit.
        """
        reset = np.concatenate([starts[None], ended], axis=0)  # [T + 1, B]
        frame_ndim = observation.ndim - 3
        words = frame_words(observation, frame_ndim)  # [T + 1, B, k, n]: bit for bit
        # an episode's first stack repeats its reset frame
        t, b = np.nonzero(reset)
        if t.size:
            stacks = words[t, b]
            bad = ~(stacks == stacks[:, -1:]).all(axis=(1, 2))
            if bad.any():
                i = int(np.argmax(bad))
                self._fail(
                    f"the first observation of an episode (row {t[i]}, env {b[i]}) "
                    "is not its reset frame repeated"
                )
        # every other stack: the previous one shifted by one frame (views, no copy)
        shifted = (words[1:, :, :-1] == words[:-1, :, 1:]).all(axis=(2, 3))
        bad = ~shifted & ~reset[1:]
        if bad.any():
            t, b = np.argwhere(bad)[0]
            self._fail(
                f"the observation at row {t + 1}, env {b} is not the one before it "
                "shifted by one frame"
            )
        t, b = np.nonzero(ended)
        if t.size:
            same = frame_words(final[t, b], frame_ndim)[:, :-1] == words[t, b, 1:]
            bad = ~same.all(axis=(1, 2))
            if bad.any():
                i = int(np.argmax(bad))
                self._fail(
                    f"the final observation at row {t[i]}, env {b[i]} is not the "
                    "step's observation shifted by one frame"
                )

    def _fail(self, what: str) -> None:
        raise ReplayError(
            f"frame_stack={self.k}: {what}, so the replay cannot rebuild it from "
            "one frame per step. Observations must come from "
            f"FrameStackObservation({self.k}) with padding_type='reset' (the default) "
            "as the outermost observation wrapper; otherwise store whole "
            "observations (a replay without frame_stack)"
        )

    def stacks(
        self,
        frames: np.ndarray,
        starts: Callable[[np.ndarray, np.ndarray], np.ndarray],
        rows: np.ndarray,
        envs: np.ndarray,
        full_size: int,
    ) -> np.ndarray:
        """Rebuild the stacks of stored steps ``(rows, envs)``.

        Args:
            frames: ``[N + 1, B, ...]`` stored frames (row ``N``: the bootstrap row).
            starts: ``starts(rows, envs)``, bool: that row's observation
                begins an episode.
            rows: ``[n]`` rows, each with ``k - 1`` stored steps of history.
            envs: ``[n]`` envs.
            full_size: ``N``.

        Returns:
            ``[n, k, ...]`` stacks (a new array).
        """
        rows = np.asarray(rows, dtype=np.int64)
        first = rows  # walked back to the episode's first row, k - 1 at most
        for _ in range(self.history):
            first = first - ~starts(first % full_size, envs)
        index = stack_rows(rows, first, np.arange(1 - self.k, 1)) % full_size
        return frames[index, np.asarray(envs)[:, None]]

    @staticmethod
    def next_stacks(stacks: np.ndarray, frames: np.ndarray) -> np.ndarray:
        """The stacks one step later: ``stacks`` shifted by one, ``frames`` appended."""
        out = np.empty_like(stacks)
        out[:, :-1] = stacks[:, 1:]
        out[:, -1] = frames
        return out
