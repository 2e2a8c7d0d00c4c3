"""What every training sampler holds and does around its loop (one base class)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from time import perf_counter as clock
from typing import Any, TypedDict

from parllel import fields
from parllel.agents import Handler
from parllel.arrays import Array
from parllel.cages import Cage
from parllel.errors import ConfigError
from parllel.frame_stacks.sample_tree import (
    carry_staged_observation,
    check_frame_sampler,
)
from parllel.samplers.finite import make_finite_check
from parllel.samplers.recorded import RecordedFields
from parllel.samplers.steps import (
    GroupViews,
    ObservationNormalizer,
    as_cages,
    bootstrap_values,
    final_values_batched,
    group_views,
    reset_envs,
    sliding_window,
    start_batch,
)
from parllel.timing import PhaseTimes
from parllel.tree import ArrayDict


class SamplerOptions(TypedDict, total=False):
    """The keyword arguments every training sampler takes (see :class:`BatchSampler`)."""

    transform: Callable[[ArrayDict], Any] | None
    observation_normalizer: ObservationNormalizer | None
    decorrelation_steps: int
    seed: int | None
    check_finite: bool | str


class BatchSampler:
    """Collaborators, checks, per-cage views, env reset, batch start and end.

    Subclasses (FeedForward, Recurrent, Alternating) add their requirements
    in :meth:`_check_setup` and write only their loop in ``collect_batch``,
    between :meth:`_begin_batch` and :meth:`_end_batch`.

    Args:
        cages: one cage or several (their envs are the tree's columns, in order).
        handler: a :class:`~parllel.agents.Handler` for all envs.
        sample_tree: from :func:`~parllel.samplers.sample_tree_from_examples`.
        transform: batch transform run after every batch.
        observation_normalizer: normalizes each fresh observation in place.
        decorrelation_steps: random steps before the first batch.
        seed: seed of the decorrelation's random actions.
        check_finite: NaN/inf check of every batch: ``"auto"``, True or False.

    Raises:
        ConfigError: the cages, handler or tree do not suit the sampler.

    The attributes (``recorded``, ``views``, ``all_envs``, ``finite_check``,
    ``phase_times``, ...) and the options: docs/samplers.md.
    """

    #: True for the wait-reset mode of :class:`~parllel.samplers.RecurrentSampler`
    wait_reset = False

    def __init__(
        self,
        cages: Cage | Sequence[Cage],
        handler: Handler,
        sample_tree: ArrayDict,
        *,
        transform: Callable[[ArrayDict], Any] | None = None,
        observation_normalizer: ObservationNormalizer | None = None,
        decorrelation_steps: int = 0,
        seed: int | None = None,
        check_finite: bool | str = "auto",
    ) -> None:
        self.cages = as_cages(cages)
        self.recorded = RecordedFields.of(sample_tree)
        self._check_setup(self.cages, handler, self.recorded)
        if self.recorded.frame_stack is not None:
            check_frame_sampler(handler.recurrent, observation_normalizer)
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
        # final observations valued at the step their episodes end: with the
        # state they ended in, or from a staging slot the next step overwrites
        self.final_values_per_step = (
            handler.recurrent or self.recorded.frame_stack is not None
        )
        self._needs_reset = True
        self.finite_check = make_finite_check(check_finite, sample_tree, self.cages)
        self._check_finite = check_finite
        # per tree the sampler wrote into: (tree, views, all_envs, finite_check)
        self._trees: dict[int, tuple[ArrayDict, list[GroupViews], GroupViews, Any]] = {}
        self.phase_times = PhaseTimes()

    def _check_setup(
        self, cages: list[Cage], handler: Handler, recorded: RecordedFields
    ) -> None:
        """Raise ConfigError unless the cages, handler and tree suit this sampler.

        Every cage must reset as the sampler expects (``reset_mode="auto"``,
        ``"wait"`` in wait-reset mode) and a recurrent agent needs an
        ``initial_state`` field. Subclasses extend this with their own checks.
        """
        mode = "wait" if self.wait_reset else "auto"
        for cage in cages:
            if cage.reset_mode != mode:
                hint = (
                    "; RecurrentSampler(wait_reset=True) runs wait-reset cages"
                    if cage.reset_mode == "wait"
                    else ""
                )
                raise ConfigError(
                    f"{type(self).__name__} needs {mode}-reset cages (reset_mode="
                    f"{mode!r}), got reset_mode={cage.reset_mode!r}{hint}"
                )
        if handler.recurrent and not recorded.initial_state:
            raise ConfigError(
                "the agent is recurrent: allocate initial_state with "
                "build_sample_tree(recurrent=True)"
            )

    @property
    def action_generator(self) -> object | None:
        """The generator the handler's agent samples actions from (a
        TorchHandler's ``generator``), or None; runners checkpoint its state."""
        return getattr(self.handler, "generator", None)

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

    def use_tree(self, sample_tree: ArrayDict) -> None:
        """Write the next batches into ``sample_tree``, a tree of the same layout.

        The rows around the batch boundary (``observation[T]``, the last
        action and reward, ...: each leaf's padding; a ``frame_stack`` tree's
        observation slot) are copied over from the current tree, so the next
        batch continues where the last one ended, exactly as after a
        rotation; nothing else is copied. A background
        sampler switches this way between the trees of a
        :class:`~parllel.samplers.tree_ring.TreeRing`. Views are built once per tree.

        Raises:
            ConfigError: the trees' fields or shapes differ, or the sampler
                writes into full-size (sliding) leaves.
        """
        current = self.sample_tree
        if sample_tree is current:
            return
        if self._sliding:
            raise ConfigError("use_tree needs trees without full-size (sliding) leaves")
        old_leaves, new_leaves = (
            list(current.items_flat()),
            list(sample_tree.items_flat()),
        )
        pairs = list(zip(old_leaves, new_leaves))
        if len(old_leaves) != len(new_leaves) or any(
            old_path != new_path
            or not isinstance(old, Array)
            or not isinstance(new, Array)
            or (old.shape, old.dtype, old.padding)
            != (new.shape, new.dtype, new.padding)
            for (old_path, old), (new_path, new) in pairs
        ):
            raise ConfigError(
                "use_tree needs a tree of Arrays with the fields, shapes, dtypes "
                "and padding of the sampler's tree (e.g. from TreeRing.allocate)"
            )
        for (_, old), (_, new) in pairs:
            if old.padding:
                rows = 2 * old.padding
                new.padded_ndarray()[-rows:] = old.padded_ndarray()[-rows:]
        if self.recorded.frame_stack is not None:  # observation[T] is staged
            carry_staged_observation(current, sample_tree)
        self._trees.setdefault(
            id(current), (current, self.views, self.all_envs, self.finite_check)
        )
        entry = self._trees.get(id(sample_tree))
        if entry is None or entry[0] is not sample_tree:
            views = group_views(sample_tree, self.cages, self.handler)
            entry = (
                sample_tree,
                views,
                GroupViews(sample_tree, 0, self.all_envs.n_envs),
                make_finite_check(self._check_finite, sample_tree, self.cages),
            )
            self._trees[id(sample_tree)] = entry
        self.sample_tree, self.views, self.all_envs, self.finite_check = entry

    def _begin_batch(self) -> tuple[float, float]:
        """Reset if needed, rotate the tree, refresh the views if the window moved.

        Returns:
            When the batch began (:func:`time.perf_counter`) and
            :meth:`_local_step_seconds` then, for :meth:`_end_batch`.
        """
        begun = clock(), self._local_step_seconds()
        if self._needs_reset:
            self.reset()
        start_batch(self.all_envs, self.handler)
        if self._sliding:  # full-size tree: the window moved, so did its views
            self.views = group_views(self.sample_tree, self.cages, self.handler)
            self.all_envs = GroupViews(self.sample_tree, 0, self.all_envs.n_envs)
        return begun

    def _local_step_seconds(self) -> float:
        """Seconds this process has spent stepping the cages' envs itself."""
        return sum(cage.local_step_seconds for cage in self.cages)

    def _end_batch(
        self,
        begun: tuple[float, float],
        envs: float,
        inference: float,
        final_values: bool,
    ) -> None:
        """After the batch's last step: the finite check, the values of
        ``observation[T]`` (and, if ``final_values``, of the final
        observations, batched), the transform, and the batch's
        :attr:`phase_times`.

        Args:
            begun: what :meth:`_begin_batch` returned.
            envs: seconds spent in the cages' ``step_async``/``await_step``:
                stepping envs here, or waiting on workers.
            inference: seconds spent in the handler during the steps.
            final_values: value the final observations in one call here.

        Raises:
            NonFiniteError: a NaN/inf observation or reward.
        """
        tree, handler = self.sample_tree, self.handler
        if self.finite_check is not None:
            self.finite_check(tree)
        values_start = clock()
        bootstrap_values(handler, self.all_envs)
        if final_values:
            final_values_batched(handler, self.all_envs)
        transforms_start = clock()
        if self.transform is not None:
            self.transform(tree)
        end = clock()
        start, local_before = begun
        stepping = min(envs, self._local_step_seconds() - local_before)
        self.phase_times.record(
            {
                "batch": end - start,
                "env_step": stepping,
                "worker_wait": envs - stepping,
                "inference": inference + transforms_start - values_start,
                "transforms": end - transforms_start,
            }
        )
