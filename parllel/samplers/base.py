"""What every training sampler holds and does before its loop (one base class)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from parllel import fields
from parllel.agents import Handler
from parllel.cages import Cage
from parllel.samplers.finite import make_finite_check
from parllel.samplers.steps import (
    GroupViews,
    ObservationNormalizer,
    as_cages,
    group_views,
    reset_envs,
    sliding_window,
    start_batch,
)
from parllel.tree import ArrayDict


class BatchSampler:
    """Collaborators, per-cage views, env reset and batch start of a sampler.

    Subclasses (FeedForward, Recurrent, Alternating) check their own
    requirements, then write only their loop in ``collect_batch``, which
    starts with :meth:`_begin_batch`.

    Attributes:
        cages, handler, sample_tree, transform, observation_normalizer: as given.
        finite_check: the :class:`~parllel.samplers.finite.FiniteCheck` run on
            every finished batch, or None (``check_finite=False``).
        views: one :class:`~parllel.samplers.steps.GroupViews` per cage.
        all_envs: GroupViews over every column.
        batch_T: time steps per batch.
    """

    def __init__(
        self,
        cages: Cage | Sequence[Cage],
        handler: Handler,
        sample_tree: ArrayDict,
        transform: Callable[[ArrayDict], Any] | None,
        observation_normalizer: ObservationNormalizer | None,
        decorrelation_steps: int,
        seed: int | None,
        check_finite: bool | str = "auto",
    ) -> None:
        self.cages = as_cages(cages)
        self.handler = handler
        self.sample_tree = sample_tree
        self.transform = transform
        self.observation_normalizer = observation_normalizer
        self.decorrelation_steps = int(decorrelation_steps)
        self.seed = seed
        self.views = group_views(sample_tree, self.cages, handler)
        self.all_envs = GroupViews(sample_tree, 0, sample_tree[fields.REWARD].shape[1])
        self.batch_T = self.all_envs.T
        self._sliding = sliding_window(sample_tree)
        self._needs_reset = True
        self.finite_check = make_finite_check(check_finite, sample_tree, self.cages)

    def reset(self) -> None:
        """Reset every env and the agent's state (and decorrelate); the next
        batch starts from there."""
        reset_envs(
            self.cages,
            self.views,
            self.handler,
            self.observation_normalizer,
            self.decorrelation_steps,
            self.seed,
        )
        self._needs_reset = False

    def _begin_batch(self) -> None:
        """Reset if needed, rotate the tree, refresh the views if the window moved."""
        if self._needs_reset:
            self.reset()
        start_batch(self.sample_tree, self.handler)
        if self._sliding:  # full-size tree: the window moved, so did its views
            self.views = group_views(self.sample_tree, self.cages, self.handler)
            self.all_envs = GroupViews(self.sample_tree, 0, self.all_envs.n_envs)

    def _check_batch(self) -> None:
        """After the batch's last step: raise on NaN/inf observations or rewards."""
        if self.finite_check is not None:
            self.finite_check(self.sample_tree)
