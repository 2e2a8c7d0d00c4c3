"""The samplers' check of a finished batch for NaN and infinite values.

A NaN observation or reward trains silently into NaN weights; this check
stops at the batch that first holds one, naming the env and the step. It reads
every float observation leaf (rows ``0..T``: the batch's first observation,
then one per step) and the rewards with one vectorized numba pass each
(:func:`~parllel.transforms.first_nonfinite`); integer observations (e.g.
uint8 images) cannot hold NaN and are skipped. Samplers run it before
computing bootstrap values and transforms.

``check_finite="auto"`` (the samplers' default) checks the rewards and every
float observation leaf of at most :data:`AUTO_MAX_FEATURES` values per env
step (vector observations), where the pass costs well under 1% of a batch.
Larger float leaves (float images) are read at memory bandwidth, which can
cost a quarter of a batch with a cheap env: they are checked only with
``check_finite=True``; without it, a NaN there still stops training at the
algorithm's non-finite loss check. ``check_finite=False`` turns the check off.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from parllel import fields
from parllel.arrays import Array
from parllel.cages import Cage
from parllel.errors import ConfigError, NonFiniteError
from parllel.samplers.recorded import RecordedFields
from parllel.transforms.functional import first_nonfinite
from parllel.tree import ArrayDict, tree_items

AUTO_MAX_FEATURES = 1024  # float values per env step checked by "auto"
CHECK_MODES = (True, False, "auto")


def make_finite_check(
    check_finite: bool | str, sample_tree: ArrayDict, cages: Sequence[Cage]
) -> FiniteCheck | None:
    """The check a sampler runs for its ``check_finite`` argument (None: off).

    Raises:
        ConfigError: ``check_finite`` is not True, False or ``"auto"``.
    """
    if check_finite is False:
        return None
    if check_finite is True:
        return FiniteCheck(sample_tree, cages, max_observation_size=None)
    if check_finite == "auto":
        return FiniteCheck(sample_tree, cages, max_observation_size=AUTO_MAX_FEATURES)
    raise ConfigError(
        f"check_finite must be one of {CHECK_MODES}, got {check_finite!r}"
    )


def _float_leaves(
    tree: Any, prefix: str, max_size: int | None
) -> list[tuple[str, Any]]:
    """Float leaves of ``tree`` with at most ``max_size`` values per env step."""
    return [
        (f"{prefix}.{path}" if path else prefix, leaf)
        for path, leaf in tree_items(tree)
        if np.dtype(leaf.dtype).kind == "f"
        and (max_size is None or math.prod(leaf.shape[2:]) <= max_size)
    ]


class FiniteCheck:
    """Raises :class:`~parllel.errors.NonFiniteError` for a NaN/inf
    observation or reward in a finished batch.

    Args:
        sample_tree: the sampler's tree (its float ``observation`` leaves and
            ``reward`` are checked).
        cages: the sampler's cages, in column order (to name the env).
        max_observation_size: check only float observation leaves with at
            most this many values per env step (None: every float leaf).

    Example:
        >>> check = FiniteCheck(sample_tree, cages)
        >>> check(sample_tree)   # after the batch's last step
    """

    def __init__(
        self,
        sample_tree: ArrayDict,
        cages: Sequence[Cage],
        max_observation_size: int | None = None,
    ) -> None:
        # a frame_stack tree: the stored frames (one per observation, rows 0..T last)
        frame_stack = RecordedFields.of(sample_tree).frame_stack
        name = fields.OBSERVATION if frame_stack is None else fields.FRAMES
        self.observations = _float_leaves(sample_tree[name], name, max_observation_size)
        self.reward = (fields.REWARD, sample_tree[fields.REWARD])
        self.env_indices = [index for cage in cages for index in cage.env_indices]

    def __call__(self, sample_tree: ArrayDict) -> None:
        """Check the current batch window of ``sample_tree``'s leaves."""
        T = sample_tree[fields.REWARD].shape[0]
        for path, leaf in self.observations:
            if path == fields.FRAMES:
                rows = np.asarray(leaf)[-(T + 1) :]
            elif isinstance(leaf, Array) and leaf.padding >= 1:
                rows = leaf.padded[0 : T + 1]  # with the next batch's first obs
            else:
                rows = np.asarray(leaf)
            found = first_nonfinite(rows)
            if found is not None:
                self._raise(path, rows, found, observation=True)
        path, leaf = self.reward
        rewards = np.asarray(leaf)
        found = first_nonfinite(rewards)
        if found is not None:
            self._raise(path, rewards, found, observation=False)

    def _raise(
        self,
        path: str,
        data: np.ndarray,
        found: tuple[int, int, tuple[int, ...]],
        observation: bool,
    ) -> None:
        t, b, feature = found
        value = data[(t, b) + feature]
        env_index = self.env_indices[b] if b < len(self.env_indices) else b
        where = f"{path}[{t}, {b}{''.join(f', {i}' for i in feature)}]"
        if not observation:
            what = f"reward {value} in step {t} of the batch"
        elif t == 0:
            what = (
                f"observation value {value} at the start of the batch (a reset "
                "or decorrelation step)"
            )
        else:
            what = f"observation value {value} in step {t - 1} of the batch"
        raise NonFiniteError(
            f"env {env_index} returned a non-finite {what} ({where}); fix the env "
            "(or pass check_finite=False to the sampler to let it through)"
        )
