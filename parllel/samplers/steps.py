"""The pieces every sampler's loop is made of, as small functions.

:class:`GroupViews` precomputes, once, the views of one group of env columns
(one cage) for every time step, so the hot loop only indexes Python lists.
The functions below start a batch, finish a step (done flags, previous
action/reward, valid mask, observation normalization), reset envs, and
compute bootstrap and final-observation values after the loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from parllel import fields
from parllel.agents import Handler
from parllel.agents.numpy_handler import write_outputs
from parllel.agents.scripted import sample_actions
from parllel.arrays import Array
from parllel.cages import Cage
from parllel.errors import ConfigError
from parllel.samplers.frame_stacks import FrameViews, begin_frames
from parllel.tree import ArrayDict, tree_items, tree_map


class ObservationNormalizer(Protocol):
    """What samplers need from an observation normalizer.

    :class:`~parllel.transforms.NormalizeObservations` is one: samplers
    normalize each freshly written observation with it, and evaluation
    freezes its statistics. ``count_final_observations``: whether the final
    observations of ended episodes count in its statistics too (merged before
    the next episode's first observation, as a per-env gymnasium wrapper sees
    them); otherwise they are normalized without being counted.
    """

    frozen: bool

    @property
    def count_final_observations(self) -> bool:
        """Whether final observations count in the statistics."""
        ...

    def normalize(
        self, observation: Any, update: bool = False, env_indices: Any = None
    ) -> Any:
        """Normalize an observation (sub)tree in place; ``update`` its
        statistics. ``env_indices``: the env of each row (None: rows ``0 ..
        N - 1``), for a normalizer with statistics per group of envs."""
        ...


def leaves(tree: Any) -> list[np.ndarray]:
    """The ndarray leaves of a tree of views (or ``[tree]`` for one array)."""
    return [leaf for _, leaf in tree_items(tree)]


def rows(tree: Any, index: Any) -> Any:
    """Every leaf of ``tree`` (Arrays or ndarrays) indexed by ``index``."""

    def take(leaf: Any) -> Any:
        return (leaf.to_ndarray() if isinstance(leaf, Array) else leaf)[index]

    return tree_map(take, tree)


# Fields every sampler reads or writes at every step (the others are optional).
_REQUIRED = (
    fields.OBSERVATION, fields.ACTION, fields.AGENT_INFO, fields.REWARD,
    fields.TERMINATED, fields.TRUNCATED, fields.DONE,
)  # fmt: skip


class GroupViews:
    """Views of env columns ``[lo, hi)`` of a sample tree, per time step.

    Attributes hold lists indexed by ``t``: ``observation`` (``T + 1``
    entries), ``action``, ``agent_info``, ``reward``, ``terminated``,
    ``truncated``, ``done``, ``final_observation``, ``valid`` and
    ``prev_action``/``prev_reward`` (``T + 1``), plus ``step_slots[t]``, the
    ``out`` mapping for ``cage.step_async``. Missing optional fields give
    None (``final_observation``, ``final_value``, ``valid``, ``prev_action``
    and ``prev_reward``); a tree without the others raises ConfigError.
    The views stay valid across :meth:`ArrayDict.rotate` when the batch
    window never moves in memory; with full-size leaves (a replay tree the
    sampler writes straight into, see :func:`sliding_window`) the window
    moves at every rotation and samplers rebuild their views.

    Example:
        >>> views = GroupViews(sample_tree, 0, 4)
        >>> cage.step_async(views.action[t], views.step_slots[t])
    """

    def __init__(self, sample_tree: ArrayDict, lo: int, hi: int) -> None:
        missing = [key for key in _REQUIRED if key not in sample_tree]
        if missing:
            raise ConfigError(
                f"the sample tree lacks the fields {missing} that every sampler "
                "writes; build it with sample_tree_from_examples (or "
                "parllel.builders.build_sample_tree)"
            )
        if (fields.PREV_ACTION in sample_tree) != (fields.PREV_REWARD in sample_tree):
            raise ConfigError(
                f"the sample tree keeps only one of {fields.PREV_ACTION!r} and "
                f"{fields.PREV_REWARD!r}; samplers write both or neither"
            )
        self.lo, self.hi = lo, hi
        self.columns = slice(lo, hi)
        self.n_envs = hi - lo
        T = len(sample_tree[fields.REWARD])
        self.T = T

        def per_step(key: str, count: int) -> list[Any] | None:
            if key not in sample_tree:
                return None
            leaf = sample_tree[key]
            return [leaf[t][self.columns] for t in range(count)]

        def required(key: str, count: int) -> list[Any]:
            return [sample_tree[key][t][self.columns] for t in range(count)]

        # one stored frame per step: observations go through [B] staging slots
        self.frames: FrameViews | None = None
        if fields.FRAMES in sample_tree:
            self.frames = FrameViews(sample_tree, self.columns)
            self.observation = [self.frames.stage] * (T + 1)
        else:
            self.observation = required(fields.OBSERVATION, T + 1)
        self.action = required(fields.ACTION, T)
        self.agent_info = required(fields.AGENT_INFO, T)
        self.reward = required(fields.REWARD, T)
        self.terminated = required(fields.TERMINATED, T)
        self.truncated = required(fields.TRUNCATED, T)
        self.done = required(fields.DONE, T)
        self.final_observation: list[Any] | None
        if self.frames is not None and fields.FINAL_OBSERVATION in sample_tree:
            final = sample_tree[fields.FINAL_OBSERVATION].to_ndarray()[self.columns]
            self.final_observation = [final] * T  # a staging slot, as observation
        else:
            self.final_observation = per_step(fields.FINAL_OBSERVATION, T)
        self.final_value = per_step(fields.FINAL_VALUE, T)
        self.valid = per_step(fields.VALID, T)
        self.prev_action = per_step(fields.PREV_ACTION, T + 1)
        self.prev_reward = per_step(fields.PREV_REWARD, T + 1)
        env_info = sample_tree.get(fields.ENV_INFO)
        has_info = env_info is not None and len(env_info) > 0
        self.step_slots: list[dict[str, Any]] = []
        # (target, source) leaves copied after step t: prev_action/prev_reward
        self.previous_pairs: list[list[tuple[Any, Any]]] = []
        for t in range(T):
            slots = {
                fields.OBSERVATION: self.observation[t + 1],
                fields.REWARD: self.reward[t],
                fields.TERMINATED: self.terminated[t],
                fields.TRUNCATED: self.truncated[t],
            }
            if has_info:
                slots[fields.ENV_INFO] = env_info[t][self.columns]
            if self.final_observation is not None:
                slots[fields.FINAL_OBSERVATION] = self.final_observation[t]
            self.step_slots.append(slots)
            pairs: list[tuple[Any, Any]] = []
            if self.prev_action is not None and self.prev_reward is not None:
                pairs += zip(leaves(self.prev_action[t + 1]), leaves(self.action[t]))
                pairs.append((self.prev_reward[t + 1], self.reward[t]))
            self.previous_pairs.append(pairs)

    def previous(self, t: int) -> tuple[Any, Any]:
        """``(prev_action[t], prev_reward[t])`` for the handler (None if not kept)."""
        prev_action, prev_reward = self.prev_action, self.prev_reward
        if prev_action is None or prev_reward is None:  # both or neither (__init__)
            return None, None
        return prev_action[t], prev_reward[t]


def sliding_window(sample_tree: ArrayDict) -> bool:
    """True if some leaf is full-size: its batch window moves at every rotation.

    Samplers then rebuild their per-step views after rotating (a few
    microseconds per view, once per batch), so they can write straight into
    a replay tree whose window slides over ``full_size`` rows.
    """
    return any(
        isinstance(leaf, Array) and leaf.full_size != leaf.batch_shape[0]
        for _, leaf in sample_tree.items_flat()
    )


def group_views(
    sample_tree: ArrayDict, cages: Sequence[Cage], handler: Handler
) -> list[GroupViews]:
    """Check that cages, handler and tree agree; return one GroupViews per cage."""
    B = sample_tree[fields.REWARD].shape[1]
    total = sum(cage.n_envs for cage in cages)
    if total != B or handler.n_envs != B:
        raise ConfigError(
            f"the cages hold {total} envs and the handler {handler.n_envs}, but the "
            f"sample tree has B = {B} columns; they must agree"
        )
    views, lo = [], 0
    for cage in cages:
        cage.check_tree(sample_tree)  # e.g. a local leaf for a process cage
        views.append(GroupViews(sample_tree, lo, lo + cage.n_envs))
        lo += cage.n_envs
    return views


def as_cages(cages: Cage | Sequence[Cage]) -> list[Cage]:
    """A list of cages from one cage or a sequence of them."""
    return [cages] if isinstance(cages, Cage) else list(cages)


def normalize_rows(
    normalizer: ObservationNormalizer, observation: Any, index: Any, lo: int = 0
) -> None:
    """Normalize rows ``index`` of an observation view of envs ``lo ..`` in
    place, updating statistics."""
    if isinstance(index, slice):
        envs = None if lo == 0 else lo + np.arange(len(leaves(observation)[0]))
        normalizer.normalize(observation, update=True, env_indices=envs)
        return
    part = rows(observation, index)
    normalizer.normalize(part, update=True, env_indices=lo + np.asarray(index))
    for target, value in zip(leaves(observation), leaves(part)):
        target[index] = value


def carry_previous(views: GroupViews, t: int) -> np.ndarray | None:
    """Write ``done[t]`` and the previous action/reward read at ``t + 1``.

    ``prev_action[t + 1] = action[t]`` and ``prev_reward[t + 1] = reward[t]``,
    except zero where the episode ended at ``t`` (the next step starts a new
    one). Returns the local indices of the envs done at ``t`` (None if none).
    """
    done = views.done[t]
    np.logical_or(views.terminated[t], views.truncated[t], out=done)
    for target, source in views.previous_pairs[t]:
        np.copyto(target, source, casting="same_kind")
    if not done.any():
        return None
    ended = np.flatnonzero(done)
    for target, _ in views.previous_pairs[t]:
        target[ended] = 0
    return ended


def finish_step(
    views: GroupViews,
    t: int,
    normalizer: ObservationNormalizer | None = None,
    stepped: Any = slice(None),
) -> np.ndarray | None:
    """:func:`carry_previous`, then normalize the fresh observations (if a normalizer).

    ``stepped``: rows whose ``observation[t + 1]`` was written (all in
    auto-reset mode). Final observations of ended episodes are normalized
    with the statistics of the fresh observations, not counted, unless the
    normalizer's ``count_final_observations``: then they are counted first
    (a gymnasium wrapper sees the final observation before the reset one).
    """
    ended = carry_previous(views, t)
    if views.frames is not None:
        views.frames.store(t, views.done[t])
    if normalizer is None:
        return ended
    finals = ended is not None and views.final_observation is not None
    count_finals = finals and normalizer.count_final_observations
    if count_finals:
        normalize_final_rows(normalizer, views, t, ended, update=True)
    normalize_rows(normalizer, views.observation[t + 1], stepped, views.lo)
    if finals and not count_finals:
        normalize_final_rows(normalizer, views, t, ended, update=False)
    return ended


def normalize_final_rows(
    normalizer: ObservationNormalizer,
    views: GroupViews,
    t: int,
    ended: Any,
    update: bool,
) -> None:
    """Normalize the final observations at step ``t`` of the ``ended`` envs in
    place (``update``: also count them)."""
    assert views.final_observation is not None
    part = rows(views.final_observation[t], ended)
    normalizer.normalize(part, update=update, env_indices=views.lo + ended)
    for target, value in zip(leaves(views.final_observation[t]), leaves(part)):
        target[ended] = value


def act(handler: Handler, views: GroupViews, t: int) -> None:
    """Ask the handler for the actions of ``views``'s envs at step ``t``."""
    prev_action, prev_reward = views.previous(t)
    handler.step(
        views.observation[t],
        prev_action,
        prev_reward,
        out_action=views.action[t],
        out_agent_info=views.agent_info[t],
        env_indices=views.columns,
    )


def final_values_now(
    handler: Handler, views: GroupViews, t: int, ended: np.ndarray
) -> None:
    """Value of the final observations of episodes truncated at ``t`` (current state)."""
    truncated = ended[~views.terminated[t][ended] & views.truncated[t][ended]]
    final_value, final_observation = views.final_value, views.final_observation
    if final_value is None or not len(truncated):
        return
    if final_observation is None:
        raise ConfigError(
            f"the sample tree keeps {fields.FINAL_VALUE!r} but not "
            f"{fields.FINAL_OBSERVATION!r}, which it is computed from"
        )
    has_previous = views.prev_action is not None
    final_value[t][truncated] = handler.value(
        rows(final_observation[t], truncated),
        rows(views.action[t], truncated) if has_previous else None,
        views.reward[t][truncated] if has_previous else None,
        env_indices=views.lo + truncated,
    )


def final_values_batched(handler: Handler, sample_tree: ArrayDict) -> None:
    """Value of every final observation of a truncated episode, in one call.

    Nothing for a ``frame_stack`` tree: its final observations are staged
    one step at a time, and the sampler values them then
    (:func:`final_values_now`).
    """
    if fields.FINAL_VALUE not in sample_tree or fields.FRAMES in sample_tree:
        return
    terminated = sample_tree[fields.TERMINATED].to_ndarray()
    truncated = sample_tree[fields.TRUNCATED].to_ndarray()
    t_index, b_index = np.nonzero(truncated & ~terminated)
    if not len(t_index):
        return
    index = (t_index, b_index)
    has_previous = fields.PREV_ACTION in sample_tree
    sample_tree[fields.FINAL_VALUE].to_ndarray()[index] = handler.value(
        rows(sample_tree[fields.FINAL_OBSERVATION], index),
        rows(sample_tree[fields.ACTION], index) if has_previous else None,
        rows(sample_tree[fields.REWARD], index) if has_previous else None,
        env_indices=b_index,
    )


def bootstrap_values(handler: Handler, sample_tree: ArrayDict) -> None:
    """Write ``bootstrap_value`` = value of ``observation[T]`` (if the tree has it)."""
    if fields.BOOTSTRAP_VALUE not in sample_tree:
        return
    T = len(sample_tree[fields.REWARD])
    has_previous = fields.PREV_ACTION in sample_tree
    observation = sample_tree[fields.OBSERVATION]
    sample_tree[fields.BOOTSTRAP_VALUE].to_ndarray()[...] = handler.value(
        # a frame_stack tree's staging slot holds observation[T] after the loop
        observation.to_ndarray() if fields.FRAMES in sample_tree else observation[T],
        sample_tree[fields.PREV_ACTION][T] if has_previous else None,
        sample_tree[fields.PREV_REWARD][T] if has_previous else None,
    )


def start_batch(sample_tree: ArrayDict, handler: Handler) -> None:
    """Rotate the tree (``observation[0]`` = last ``observation[T]``), record the state.

    A ``frame_stack`` tree also copies ``observation[0]``'s stack into its frames.
    """
    sample_tree.rotate()
    if fields.FRAMES in sample_tree:
        begin_frames(sample_tree)
    if fields.INITIAL_STATE in sample_tree:
        handler.write_state(sample_tree[fields.INITIAL_STATE])
    if fields.FINAL_VALUE in sample_tree:
        sample_tree[fields.FINAL_VALUE].to_ndarray()[...] = 0


def zero_previous(views: GroupViews, t: int, index: Any) -> None:
    """Zero ``prev_action[t]`` and ``prev_reward[t]`` at rows ``index``."""
    prev_action, prev_reward = views.prev_action, views.prev_reward
    if prev_action is None or prev_reward is None:  # both or neither (GroupViews)
        return
    for leaf in leaves(prev_action[t]):
        leaf[index] = 0
    prev_reward[t][index] = 0


def reset_envs(
    cages: Sequence[Cage],
    views: Sequence[GroupViews],
    handler: Handler,
    normalizer: ObservationNormalizer | None = None,
    decorrelation_steps: int = 0,
    seed: int | None = None,
) -> None:
    """Reset every env into ``observation[T]`` (the next batch's step 0).

    With ``decorrelation_steps > 0`` every env then takes that many random
    steps (through the slots of step ``T - 1``, as if they ended a previous
    batch, so ``action.padded[-1]`` and the previous action/reward of the
    first batch are those of the last random step) and is reset once more
    after a random number of them, so that the envs start the first batch at
    different points of their episodes. TrajInfos of these steps are
    dropped. The agent's state is reset at the end.
    """
    rng = np.random.default_rng(seed)
    for cage, group in zip(cages, views):
        last = group.T - 1
        cage.reset(group.observation[last + 1])
        zero_previous(group, last + 1, slice(None))
        restart_after = rng.integers(0, max(decorrelation_steps, 1), group.n_envs)
        for k in range(decorrelation_steps):
            actions = sample_actions(cage.spaces.action, group.n_envs, rng)
            write_outputs(group.action[last], actions)
            cage.step(group.action[last], group.step_slots[last])
            carry_previous(group, last)
            again = set(np.flatnonzero(restart_after == k).tolist())
            if cage.reset_mode == "wait":
                again.update(cage.waiting_envs())
            if again:
                indices = sorted(again)
                cage.reset(group.observation[last + 1], env_indices=indices)
                zero_previous(group, last + 1, indices)
    handler.reset()
    if normalizer is not None:
        for group in views:
            normalize_rows(
                normalizer, group.observation[group.T], slice(None), group.lo
            )
