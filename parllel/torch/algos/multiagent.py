"""The training view of a multi-agent batch: agents folded into the env dim.

A multi-agent sample tree is ``[T, B, A, ...]`` per agent. A parameter-sharing
policy trains on every (env, agent) column as if it were one more env:
:func:`flatten_agents` reshapes the per-agent fields to ``[T, B * A, ...]``
and sets ``valid`` to the rows where the agent acted (and, with a policy
mapping, where policy ``policy_index`` acted), so the existing
:class:`~parllel.torch.algos.PPO`, which masks its losses with ``valid``,
trains on it unchanged. :class:`FlattenAgents` wraps an algorithm so a runner
can hand it the sampler's tree directly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from parllel import fields
from parllel.errors import (
    CheckpointMismatchError,
    ConfigError,
    ShapeError,
    TreeStructureError,
)
from parllel.torch.utils import numpy_to_torch_tree
from parllel.tree import tree_items, tree_map

__all__ = ["FlattenAgents", "flatten_agents"]

PER_AGENT_FIELDS = (
    fields.OBSERVATION,
    fields.ACTION,
    fields.ADVANTAGE,
    fields.RETURN,
    fields.AGENT_INFO,
)


def _require(batch: Mapping[str, Any], *path: str) -> Any:
    node: Any = batch
    for depth, key in enumerate(path):
        if not isinstance(node, Mapping) or key not in node:
            raise TreeStructureError(
                f"the multi-agent batch has no field {'.'.join(path[: depth + 1])!r}"
            )
        node = node[key]
    return node


def flatten_agents(
    batch: Mapping[str, Any],
    policy_index: int | None = None,
    *,
    extra_fields: Sequence[str] = (),
) -> dict[str, Any]:
    """A ``[T, B * A]`` training batch from a ``[T, B, A]`` multi-agent batch.

    Per-agent fields (``observation``, ``action``, ``advantage``, ``return_``,
    ``agent_info`` leaves, ``extra_fields``) become ``[T, B * A, ...]`` (column
    ``b * A + a``, views where possible); ``valid`` is ``env_info.agent_mask``
    (and ``policy_index`` matches, and the env-level ``valid``). Other fields
    are left out. Returns a dict of torch tensors. Run
    :class:`~parllel.transforms.MultiAgentGAE` first (see docs/multiagent.md,
    "The training view").

    Args:
        batch: the multi-agent sample tree (Arrays, numpy or torch), observation
            without its bootstrap row ``T``.
        policy_index: keep only this policy's rows (None: every acted row).
        extra_fields: further per-agent fields (e.g. ``fields.PREV_ACTION``).

    Raises:
        TreeStructureError: a needed field is missing.
        ShapeError: a per-agent field's leading dims are not ``[T, B, A]``.

    Example:
        >>> flat = flatten_agents(sample_tree)        # [T, B * A] leading dims
        >>> metrics = ppo.optimize(flat)
    """
    batch = numpy_to_torch_tree(batch)
    mask = _require(batch, fields.ENV_INFO, fields.AGENT_MASK)
    if mask.dim() != 3:
        raise ShapeError(
            f"{fields.ENV_INFO}.{fields.AGENT_MASK} must be [T, B, A]; got "
            f"{tuple(mask.shape)}"
        )
    T, B, A = mask.shape
    valid = mask.to(torch.bool)
    if policy_index is not None:
        acting_policy = _require(batch, fields.AGENT_INFO, fields.POLICY_INDEX)
        if tuple(acting_policy.shape) != (T, B, A):
            raise ShapeError(
                f"{fields.AGENT_INFO}.{fields.POLICY_INDEX} must be [T, B, A] = "
                f"{(T, B, A)}; got {tuple(acting_policy.shape)}"
            )
        valid = valid & (acting_policy == int(policy_index))
    if fields.VALID in batch:
        env_valid = batch[fields.VALID].to(torch.bool)
        if tuple(env_valid.shape) != (T, B):
            raise ShapeError(
                f"{fields.VALID} must be [T, B] = {(T, B)}; got {tuple(env_valid.shape)}"
            )
        valid = valid & env_valid[:, :, None]

    def check_leading(
        name: str, tree: Any, leading: tuple[int, ...], like: str
    ) -> None:
        for path, leaf in tree_items(tree, name):
            if tuple(leaf.shape[: len(leading)]) != leading:
                hint = (
                    " (pass the observation without its bootstrap row T)"
                    if name == fields.OBSERVATION
                    else ""
                )
                raise ShapeError(
                    f"{path} has shape {tuple(leaf.shape)}; expected leading dims "
                    f"{like} = {leading}{hint}"
                )

    flat: dict[str, Any] = {}
    for name in (*PER_AGENT_FIELDS, *extra_fields):
        tree = _require(batch, name)
        check_leading(name, tree, (T, B, A), "[T, B, A]")
        flat[name] = tree_map(
            lambda leaf: leaf.reshape(T, B * A, *leaf.shape[3:]), tree
        )
    flat[fields.VALID] = valid.reshape(T, B * A)
    if fields.DONE in batch:
        done = batch[fields.DONE]
        check_leading(fields.DONE, done, (T, B), "[T, B]")
        flat[fields.DONE] = done[:, :, None].expand(T, B, A).reshape(T, B * A)
    initial_state = batch.get(fields.INITIAL_STATE)
    if initial_state is not None:
        check_leading(fields.INITIAL_STATE, initial_state, (B, A), "[B, A]")
        flat[fields.INITIAL_STATE] = tree_map(
            lambda leaf: leaf.reshape(B * A, *leaf.shape[2:]), initial_state
        )
    return flat


class FlattenAgents:
    """An algorithm that trains on :func:`flatten_agents` of every batch.

    ``optimize(batch, progress)`` calls ``algorithm.optimize(
    flatten_agents(batch, policy_index, extra_fields=...), progress)``;
    ``state_dict`` and ``load_state_dict`` are the algorithm's, so a runner
    checkpoints it as it would the algorithm.

    Example:
        >>> ppo = FlattenAgents(PPO(ActorCriticEvaluator(model, dist), optimizer))
        >>> runner = OnPolicyRunner(sampler, ppo, total_steps=1_000_000)

    Args:
        algorithm: e.g. :class:`~parllel.torch.algos.PPO`.
        policy_index: train only on the rows of this policy (None: all).
        extra_fields: per-agent fields to carry along, see :func:`flatten_agents`.
    """

    def __init__(
        self,
        algorithm: Any,
        policy_index: int | None = None,
        *,
        extra_fields: Sequence[str] = (),
    ) -> None:
        self.algorithm = algorithm
        self.policy_index = policy_index
        self.extra_fields = tuple(extra_fields)

    def optimize(
        self, batch: Mapping[str, Any], progress: float | None = None
    ) -> dict[str, float]:
        """Optimize the wrapped algorithm on the flattened batch; its metrics."""
        flat = flatten_agents(batch, self.policy_index, extra_fields=self.extra_fields)
        return self.algorithm.optimize(flat, progress=progress)

    def state_dict(self) -> dict[str, Any]:
        """The wrapped algorithm's state."""
        return self.algorithm.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the wrapped algorithm's state."""
        self.algorithm.load_state_dict(state)


class PerPolicy:
    """Separate policies trained side by side: one algorithm per policy index.

    For a :class:`~parllel.multiagent.PolicyMapping` with several learning
    policies (no parameter sharing), ``algorithms[k]`` trains policy ``k``
    on its own rows (``agent_info.policy_index == k``, see
    :func:`flatten_agents`). ``optimize`` runs them in turn on the same
    batch and returns every algorithm's metrics prefixed ``policy<k>/``;
    ``state_dict`` holds each one's state under its index, so a runner
    checkpoints all of them as one algorithm.

    Args:
        algorithms: policy index -> algorithm (e.g. the PPO of that policy's model).
        extra_fields: per-agent fields to carry along, see :func:`flatten_agents`.

    Raises:
        ConfigError: no algorithm, or a policy index that is not an int >= 0.

    Example:
        >>> algorithm = PerPolicy({0: PPO(evaluator_0, optimizer_0),
        ...                        1: PPO(evaluator_1, optimizer_1)})
        >>> runner = OnPolicyRunner(sampler, algorithm, total_steps=1_000_000)
    """

    def __init__(
        self, algorithms: Mapping[int, Any], *, extra_fields: Sequence[str] = ()
    ) -> None:
        if not algorithms:
            raise ConfigError("PerPolicy needs at least one algorithm")
        for index in algorithms:
            if isinstance(index, bool) or not isinstance(index, int) or index < 0:
                raise ConfigError(
                    f"PerPolicy keys are policy indices (ints >= 0), got {index!r}"
                )
        self.algorithms = {
            index: FlattenAgents(algorithm, index, extra_fields=extra_fields)
            for index, algorithm in sorted(algorithms.items())
        }

    def optimize(
        self, batch: Mapping[str, Any], progress: float | None = None
    ) -> dict[str, float]:
        """Optimize every policy's algorithm on its rows; their metrics, prefixed."""
        metrics: dict[str, float] = {}
        for index, algorithm in self.algorithms.items():
            for name, value in algorithm.optimize(batch, progress).items():
                metrics[f"policy{index}/{name}"] = value
        return metrics

    def state_dict(self) -> dict[int, Any]:
        """Each algorithm's state, by policy index."""
        return {index: a.state_dict() for index, a in self.algorithms.items()}

    def load_state_dict(self, state: Mapping[int, Any]) -> None:
        """Restore each algorithm's state (the same policy indices).

        Raises:
            CheckpointMismatchError: the saved policies are not these.
        """
        if set(state) != set(self.algorithms):
            raise CheckpointMismatchError(
                f"the checkpoint trains policies {sorted(state)}, this PerPolicy "
                f"{sorted(self.algorithms)}"
            )
        for index, algorithm in self.algorithms.items():
            algorithm.load_state_dict(state[index])
