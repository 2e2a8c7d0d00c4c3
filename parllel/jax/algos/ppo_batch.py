"""The on-policy batch as the JAX PPO reads it, and its minibatch orders."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from parllel import fields
from parllel.arrays import Array
from parllel.errors import ConfigError, ShapeError, TreeStructureError
from parllel.tree.utils import tree_to_builtin

__all__ = ["PolicyData", "minibatch_permutations", "read_policy_batch"]


class PolicyData(NamedTuple):
    """The batch as the compiled update reads it, every leaf ``[N, ...]``."""

    observation: Any
    action: Any
    advantage: Any
    return_: Any
    old_log_prob: Any
    old_value: Any
    valid: Any  # bool [N] or None


def minibatch_permutations(key: jax.Array, epochs: int, samples: int) -> jax.Array:
    """The sample order of each epoch, ``[epochs, samples]`` (int32), from ``key``.

    PPO splits each row into its minibatches in order (``row.reshape(minibatches,
    -1)``), as the torch PPO chunks its ``randperm``. Pass the result (or any
    such array) to ``PPO.optimize(batch, permutations=...)`` to fix the order.
    """
    keys = jax.random.split(key, epochs)
    return jax.vmap(lambda k: jax.random.permutation(k, samples))(keys).astype(
        jnp.int32
    )


def _numpy(leaf: Any) -> np.ndarray:
    return leaf.to_ndarray() if isinstance(leaf, Array) else np.asarray(leaf)


def _field(batch: Mapping[str, Any], name: str) -> Any:
    if name not in batch:
        raise TreeStructureError(
            f"the batch has no field {name!r} (fields: {list(batch)})"
        )
    return batch[name]


def _agent_info(batch: Mapping[str, Any], name: str) -> Any:
    info = batch.get(fields.AGENT_INFO)
    if info is not None and name in info:
        return info[name]
    if name in batch:
        return batch[name]
    raise TreeStructureError(
        f"the batch has no field {fields.AGENT_INFO}.{name} (nor {name}); the "
        "agent must record it while sampling"
    )


def read_policy_batch(batch: Mapping[str, Any], minibatches: int) -> PolicyData:
    """The batch's fields as numpy ``[T * B, ...]`` views (no copy).

    Raises:
        TreeStructureError: a field is missing.
        ShapeError: a field's leading dims are not ``ADVANTAGE``'s ``[T, B]``.
        ConfigError: a frame-stacked batch, or ``T * B`` not divisible into
            ``minibatches``.
    """
    if fields.FRAMES in batch:
        raise ConfigError(
            "the JAX PPO reads whole observations; this batch stores one frame "
            "per step (frame_stack): use parllel.torch's PPO"
        )
    advantage = _numpy(_field(batch, fields.ADVANTAGE))
    if advantage.ndim != 2:
        raise ShapeError(f"{fields.ADVANTAGE} must be [T, B]; got {advantage.shape}")
    T, B = advantage.shape
    if (T * B) % minibatches:
        raise ConfigError(
            f"samples T * B = {T * B} does not split into {minibatches} "
            "equal minibatches"
        )

    def flat(leaf: Any, name: str) -> np.ndarray:
        array = _numpy(leaf)
        if array.shape[:2] != (T, B):
            hint = (
                " (pass the observation without its bootstrap row T)"
                if name == fields.OBSERVATION
                else ""
            )
            raise ShapeError(
                f"{name} has leading dims {array.shape[:2]}; expected [T, B] = "
                f"{(T, B)} like {fields.ADVANTAGE}{hint}"
            )
        return array.reshape(T * B, *array.shape[2:])

    valid = batch.get(fields.VALID)
    return PolicyData(
        observation=tree_to_builtin(
            _field(batch, fields.OBSERVATION),
            lambda leaf: flat(leaf, fields.OBSERVATION),
        ),
        action=flat(_field(batch, fields.ACTION), fields.ACTION),
        advantage=flat(advantage, fields.ADVANTAGE),
        return_=flat(_field(batch, fields.RETURN), fields.RETURN),
        old_log_prob=flat(_agent_info(batch, fields.LOG_PROB), fields.LOG_PROB),
        old_value=flat(_agent_info(batch, fields.VALUE), fields.VALUE),
        valid=None if valid is None else flat(valid, fields.VALID).astype(bool),
    )
