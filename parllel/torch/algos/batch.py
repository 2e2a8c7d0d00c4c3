"""Reading an on-policy batch and cutting it into minibatches.

:class:`PolicyBatch` gathers what a policy-gradient update reads from the
sample tree (torch tensors named by :mod:`parllel.fields`), checks their
leading dims, and yields minibatches: shuffled samples (feed-forward) or
shuffled whole env columns (recurrent).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from parllel import fields
from parllel.errors import ConfigError, ShapeError, TreeStructureError
from parllel.torch.algos.frame_batch import FrameStacks
from parllel.torch.transfer import batch_to_device
from parllel.torch.utils import index_leaf, tree_index
from parllel.tree import tree_items, tree_map

__all__ = ["PolicyBatch"]


def _field(batch: Mapping[str, Any], name: str) -> Any:
    try:
        return batch[name]
    except KeyError:
        raise TreeStructureError(
            f"the batch has no field {name!r} (fields: {list(batch)})"
        ) from None


def _agent_info_field(batch: Mapping[str, Any], name: str) -> torch.Tensor:
    """``batch[AGENT_INFO][name]``, or ``batch[name]`` for a flat batch."""
    if fields.AGENT_INFO in batch and name in batch[fields.AGENT_INFO]:
        return batch[fields.AGENT_INFO][name]
    if name in batch:
        return batch[name]
    raise TreeStructureError(
        f"the batch has no field {fields.AGENT_INFO}.{name} (nor {name}); "
        "the agent must record it while sampling"
    )


@dataclass(frozen=True)
class PolicyBatch:
    """The fields of one on-policy batch, all ``[T, B, ...]`` (or ``[N, ...]``).

    Attributes:
        observation: tensor or tree of tensors (without the bootstrap row),
            or :class:`~parllel.torch.algos.frame_batch.FrameStacks` for a
            batch that stores one frame per step (``frames``); minibatches
            then hold the rebuilt ``[n, k, ...]`` stacks.
        action: stored actions.
        advantage: advantage estimates.
        return_: value targets.
        old_log_prob: log-probabilities recorded while sampling.
        old_value: values recorded while sampling.
        valid: bool mask or None (all valid).
        initial_state: ``[B, ...]`` recurrent state at the batch start, or None.
        resets: ``[T, B]`` bool, True where a step starts a new episode, or None.
        extra_inputs: further fields passed to the evaluator by name.
    """

    observation: Any
    action: torch.Tensor
    advantage: torch.Tensor
    return_: torch.Tensor
    old_log_prob: torch.Tensor
    old_value: torch.Tensor
    valid: torch.Tensor | None
    initial_state: Any
    resets: torch.Tensor | None
    extra_inputs: dict[str, Any]

    @classmethod
    def from_sample_tree(
        cls,
        batch: Mapping[str, Any],
        recurrent: bool,
        extra_input_fields: Sequence[str] = (),
        *,
        targets: bool = True,
    ) -> PolicyBatch:
        """Read and check the fields PPO needs from a mapping of tensors.

        Args:
            batch: mapping of tensors named by :mod:`parllel.fields`.
            recurrent: also read ``INITIAL_STATE`` and compute the resets.
            extra_input_fields: further fields for the evaluator.
            targets: read ``ADVANTAGE`` and ``RETURN``; with False they are
                not read but allocated (uninitialized, like the value) for
                the caller to fill, e.g. with an off-policy correction.

        Raises:
            TreeStructureError: a required field is missing.
            ShapeError: a field's leading dims differ from ``ADVANTAGE``'s
                (or, without targets, the value's) ``[T, B]`` (e.g. an
                observation with the bootstrap row).
        """
        if targets:
            advantage, leading_name = _field(batch, fields.ADVANTAGE), fields.ADVANTAGE
        else:
            advantage, leading_name = (
                _agent_info_field(batch, fields.VALUE),
                fields.VALUE,
            )
        if advantage.dim() != 2:
            hint = (
                "; a multi-agent batch [T, B, A] is trained through "
                "FlattenAgents(algo) (or FlattenAgents(algo, policy_index=0) for a "
                "self-play learner's rows), which folds the agents into [T, B * A]"
                if advantage.dim() == 3
                else ""
            )
            raise ShapeError(
                f"{leading_name} must be [T, B]; got {tuple(advantage.shape)}{hint}"
            )
        leading = tuple(advantage.shape)
        if targets:
            return_ = _field(batch, fields.RETURN)
        else:  # outputs for the caller to fill, shaped like the value
            advantage = torch.empty_like(advantage)
            return_ = torch.empty_like(advantage)
        valid = batch.get(fields.VALID)
        initial_state = resets = None
        if recurrent:
            initial_state = batch.get(fields.INITIAL_STATE)
            if fields.DONE in batch:
                done = batch[fields.DONE]
            elif fields.TERMINATED in batch and fields.TRUNCATED in batch:
                done = batch[fields.TERMINATED] | batch[fields.TRUNCATED]
            else:
                raise TreeStructureError(
                    f"recurrent PPO needs {fields.DONE} (or {fields.TERMINATED} "
                    f"and {fields.TRUNCATED}) in the batch to reset the state "
                    "where episodes start"
                )
            done = done.to(torch.bool)
            resets = torch.zeros_like(done)  # [T, B]
            resets[1:] = done[:-1]
        observation: Any
        if fields.FRAMES in batch:  # one stored frame per step: stacks on demand
            if recurrent:
                raise ConfigError(
                    "recurrent PPO needs whole observations; the batch stores one "
                    "frame per step (a sample tree built with frame_stack)"
                )
            observation = FrameStacks.from_batch(batch, leading)
        else:
            observation = _field(batch, fields.OBSERVATION)
        result = cls(
            observation=observation,
            action=_field(batch, fields.ACTION),
            advantage=advantage,
            return_=return_,
            old_log_prob=_agent_info_field(batch, fields.LOG_PROB),
            old_value=_agent_info_field(batch, fields.VALUE),
            valid=None if valid is None else valid.to(torch.bool),
            initial_state=initial_state,
            resets=resets,
            extra_inputs={name: _field(batch, name) for name in extra_input_fields},
        )
        result._check_leading(leading)
        return result

    def _check_leading(self, leading: tuple[int, ...]) -> None:
        checked = {
            fields.OBSERVATION: self.observation,
            fields.ACTION: self.action,
            fields.RETURN: self.return_,
            fields.LOG_PROB: self.old_log_prob,
            fields.VALUE: self.old_value,
            fields.VALID: self.valid,
            **self.extra_inputs,
        }
        if isinstance(self.observation, FrameStacks):  # checked in from_batch
            del checked[fields.OBSERVATION]
        for name, tree in checked.items():
            for path, leaf in tree_items(tree, name):
                if leaf is not None and tuple(leaf.shape[:2]) != leading:
                    hint = (
                        " (pass the observation without its bootstrap row T)"
                        if name == fields.OBSERVATION
                        else ""
                    )
                    raise ShapeError(
                        f"{path} has leading dims {tuple(leaf.shape[:2])}; "
                        f"expected [T, B] = {leading} like {fields.ADVANTAGE}{hint}"
                    )

    @property
    def shape(self) -> tuple[int, int]:
        """``(T, B)``."""
        T, B = self.advantage.shape[:2]
        return T, B

    def to_device(self, device: torch.device | str) -> PolicyBatch:
        """This batch on ``device``: only the fields a loss reads are copied
        (the sample tree's ``final_observation`` and the rest stay on the
        host), one non-blocking copy per leaf and one wait."""
        observation = self.observation
        moved = batch_to_device(
            {
                "observation": (
                    (observation.frames, observation.first)
                    if isinstance(observation, FrameStacks)
                    else observation
                ),
                "action": self.action,
                "advantage": self.advantage,
                "return_": self.return_,
                "old_log_prob": self.old_log_prob,
                "old_value": self.old_value,
                "valid": self.valid,
                "initial_state": self.initial_state,
                "resets": self.resets,
                "extra_inputs": self.extra_inputs,
            },
            device,
        )
        if isinstance(observation, FrameStacks):
            frames, first = moved["observation"]
            moved["observation"] = replace(observation, frames=frames, first=first)
        return replace(self, **moved)

    def flatten_samples(self) -> PolicyBatch:
        """Merge ``[T, B]`` into one sample dim ``[T * B]`` (feed-forward)."""
        T, B = self.shape

        def flat(leaf: Any) -> Any:
            return None if leaf is None else leaf.reshape(T * B, *leaf.shape[2:])

        return replace(
            self,
            observation=self.observation
            if isinstance(self.observation, FrameStacks)  # indexed by flat sample
            else tree_map(flat, self.observation),
            action=flat(self.action),
            advantage=flat(self.advantage),
            return_=flat(self.return_),
            old_log_prob=flat(self.old_log_prob),
            old_value=flat(self.old_value),
            valid=flat(self.valid),
            extra_inputs=tree_map(flat, self.extra_inputs),
        )

    def select(self, index: Any, state_index: Any = None) -> PolicyBatch:
        """Index every per-step field with ``index`` and the state with ``state_index``.

        A :class:`FrameStacks` observation (flat samples only) gathers the
        stacks of the samples taken.
        """
        observation = self.observation
        return replace(
            self,
            observation=observation.gather(index)
            if isinstance(observation, FrameStacks)
            else tree_index(observation, index),
            action=index_leaf(self.action, index),
            advantage=index_leaf(self.advantage, index),
            return_=index_leaf(self.return_, index),
            old_log_prob=index_leaf(self.old_log_prob, index),
            old_value=index_leaf(self.old_value, index),
            valid=tree_index(self.valid, index),
            initial_state=None
            if self.initial_state is None or state_index is None
            else tree_index(self.initial_state, state_index),
            resets=tree_index(self.resets, index),
            extra_inputs=tree_index(self.extra_inputs, index),
        )

    def minibatches(
        self, num_minibatches: int, recurrent: bool
    ) -> Iterator[PolicyBatch]:
        """Yield ``num_minibatches`` shuffled minibatches covering the batch once.

        Feed-forward: samples ``[T * B]`` shuffled, each minibatch ``[N, ...]``.
        Recurrent: env columns shuffled, each minibatch ``[T, B_mb, ...]`` of
        whole sequences with their initial states.

        Raises:
            ConfigError: the batch does not split evenly into minibatches.
        """
        T, B = self.shape
        units = B if recurrent else T * B
        what = "env columns B" if recurrent else "samples T * B"
        if units % num_minibatches != 0:
            raise ConfigError(
                f"{what} = {units} does not split into {num_minibatches} equal "
                "minibatches"
            )
        source = self if recurrent else self.flatten_samples()
        if num_minibatches == 1:
            # One minibatch is the whole batch: the loss is a mean over all
            # of it, so shuffling (a gather of every field) would change nothing.
            if isinstance(source.observation, FrameStacks):
                source = replace(source, observation=source.observation.all())
            yield source
            return
        device = self.advantage.device
        order = torch.randperm(units, device=device)
        for chunk in order.chunk(num_minibatches):
            if recurrent:
                yield source.select((slice(None), chunk), state_index=chunk)
            else:
                yield source.select(chunk)
