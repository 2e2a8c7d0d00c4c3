"""BackgroundBatch: one batch from a background sampler, and its policy lag."""

from __future__ import annotations

from typing import Any, NamedTuple

from parllel import fields
from parllel.cages import TrajInfo
from parllel.errors import PolicyLagError
from parllel.tree import ArrayDict

__all__ = ["BackgroundBatch", "batch_lags", "checked_batch"]


class BackgroundBatch(NamedTuple):
    """One batch from :meth:`BackgroundSampler.collect_batch`.

    Attributes:
        sample_tree: the filled tree (shared memory, no copy), valid until
            the next ``collect_batch``.
        completed: the episodes that finished in this batch.
        policy_version: version of the weights that collected it (0 if the
            handler follows no shared weights).
            With weights refreshed every step, the version at the batch's
            start (its oldest); ``agent_info.policy_version`` in the tree
            holds each step's.
        batch_index: the batch's number, from 0.
        lag: ``learner_version - policy_version`` (the batch's largest lag)
            if ``collect_batch`` was given the learner's version, else None.
        lag_min: the smallest lag over the batch's steps (from
            ``agent_info.policy_version`` if the tree records it, else equal
            to ``lag``), or None without the learner's version.
        lag_mean: the mean lag over the batch's steps, likewise.
        sampler_state: the background sampler's transform and observation
            normalizer state after this batch (see
            :meth:`BackgroundSampler.state_dict`).
    """

    sample_tree: ArrayDict
    completed: list[TrajInfo]
    policy_version: int
    batch_index: int
    lag: int | None
    lag_min: int | None = None
    lag_mean: float | None = None
    sampler_state: dict[str, Any] | None = None


def batch_lags(
    tree: ArrayDict, learner_version: int, stamp: int
) -> tuple[int, int, float]:
    """Largest, smallest and mean lag of a batch's steps behind ``learner_version``.

    The largest is the batch stamp's (the version at its start): a handler
    that refreshes between steps only moves to newer versions.
    """
    lag = learner_version - stamp
    agent_info = tree[fields.AGENT_INFO] if fields.AGENT_INFO in tree else None
    if agent_info is None or fields.POLICY_VERSION not in agent_info:
        return lag, lag, float(lag)
    lags = learner_version - agent_info[fields.POLICY_VERSION].to_ndarray()
    return lag, int(lags.min()), float(lags.mean())


def checked_batch(
    tree: ArrayDict,
    completed: list[TrajInfo],
    version: int,
    number: int,
    state: dict[str, Any] | None,
    learner_version: int | None,
    max_lag: int | None,
) -> BackgroundBatch:
    """The :class:`BackgroundBatch` of batch ``number``, its lag computed
    against ``learner_version`` (if given) and checked against ``max_lag``.

    Raises:
        PolicyLagError: the batch is more than ``max_lag`` versions behind.
    """
    if learner_version is None:
        return BackgroundBatch(
            tree, completed, version, number, None, None, None, state
        )
    lag, lag_min, lag_mean = batch_lags(tree, int(learner_version), version)
    if max_lag is not None and lag > max_lag:
        raise PolicyLagError(
            f"batch {number} was collected with policy version {version}, "
            f"{lag} behind the learner's {learner_version} (max_lag="
            f"{max_lag}); publish weights once per batch"
        )
    return BackgroundBatch(
        tree, completed, version, number, lag, lag_min, lag_mean, state
    )
