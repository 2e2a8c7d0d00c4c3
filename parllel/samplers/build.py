"""Allocate a sample tree from examples: the one place that lays out a batch."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from parllel import fields
from parllel.arrays import Array
from parllel.arrays.array import Storage
from parllel.cages.env_info import numeric_info_example
from parllel.errors import ConfigError
from parllel.frame_stacks.sample_tree import allocate_frame_fields
from parllel.tree import ArrayDict, buffer_from_example, tree_map
from parllel.validation import check_at_least


def with_float_dtype(example: Any, dtype: DTypeLike | None) -> Any:
    """``example`` with its floating leaves as ``dtype`` (None: unchanged)."""
    if dtype is None:
        return example
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise ConfigError(
            f"observation_dtype must be a floating dtype (e.g. np.float32); got {dtype}"
        )

    def cast(leaf: Any) -> Any:
        array = np.asarray(leaf)
        return array.astype(dtype) if array.dtype.kind == "f" else leaf

    return tree_map(cast, example)


def sample_tree_from_examples(
    env_example: Mapping[str, Any],
    agent_example: Any,
    batch_T: int,
    n_envs: int,
    storage: Storage = "shared",
    *,
    recurrent: bool = False,
    previous: bool | None = None,
    bootstrap: bool | None = None,
    final_observation: bool | None = None,
    wait_reset: bool = False,
    env_info: bool = True,
    full_size: int | None = None,
    observation_dtype: DTypeLike | None = None,
    frame_stack: int | None = None,
) -> ArrayDict:
    """Allocate every field a sampler writes, ``[T, B, ...]``, from examples.

    ``env_example`` is a cage's ``example``, ``agent_example`` what
    ``handler.example_outputs(...)`` returns; ``storage`` is ``"shared"``
    (process cages) or ``"local"``. The keyword options choose the optional
    fields; docs/samplers.md ("Buffer layout") lists every field, option and
    default.

    Example:
        >>> example = handler.example_outputs(cage.example[fields.OBSERVATION])
        >>> tree = sample_tree_from_examples(cage.example, example, 128, cage.n_envs)
        >>> tree.observation.shape, tree.action.padded[-1].shape
        ((128, 8, 4), (8,))
    """
    check_at_least("batch_T", int(batch_T))
    check_at_least("n_envs", int(n_envs))
    alloc = _Allocator((int(batch_T), int(n_envs)), storage, full_size)
    agent_info = dict(agent_example.agent_info or {})
    bootstrap = _resolve_bootstrap(bootstrap, agent_info)
    final_observation = bootstrap if final_observation is None else final_observation
    previous = recurrent if previous is None else previous
    observation = with_float_dtype(env_example[fields.OBSERVATION], observation_dtype)
    tree = ArrayDict()
    if frame_stack is None:
        tree[fields.OBSERVATION] = alloc(observation, padding=1)
    else:
        allocate_frame_fields(
            tree,
            observation,
            frame_stack,
            alloc.shape,
            storage,
            final_observation,
            recurrent=recurrent,
            full_size=full_size,
        )
    _add_step_fields(tree, alloc, env_example, agent_example, previous, env_info)
    if final_observation and frame_stack is None:
        # a replay tree keeps only a [T, B] slot: the replay stores the few
        # final observations of ended episodes sparsely when a batch is recorded
        tree[fields.FINAL_OBSERVATION] = buffer_from_example(
            observation, alloc.shape, storage
        )
    if bootstrap:
        _add_value_fields(tree, alloc, agent_info, final_observation)
    if wait_reset:
        tree[fields.VALID] = alloc(np.bool_(True))
    if recurrent:
        if agent_example.state is None:
            raise ConfigError(
                "recurrent=True but the agent has no state (agent_example.state is None)"
            )
        tree[fields.INITIAL_STATE] = alloc.per_env(agent_example.state)
    return tree


@dataclass(frozen=True)
class _Allocator:
    """Allocates one tree's fields: ``[T, B]`` (full-size rows if asked) or ``[B]``."""

    shape: tuple[int, int]
    storage: Storage
    full_size: int | None

    def __call__(self, example: Any, padding: int = 0) -> Any:
        """A ``[T, B]`` field of ``example``'s structure."""
        return buffer_from_example(
            example, self.shape, self.storage, padding=padding, full_size=self.full_size
        )

    def per_env(self, example: Any) -> Any:
        """A ``[B]`` field of ``example``'s structure."""
        return buffer_from_example(example, self.shape[1:], self.storage)


def _resolve_bootstrap(bootstrap: bool | None, agent_info: Mapping[str, Any]) -> bool:
    """``bootstrap``, by default whether the agent records a ``value``.

    Raises:
        ConfigError: ``bootstrap=True`` but the agent records no value.
    """
    if bootstrap is None:
        return fields.VALUE in agent_info
    if bootstrap and fields.VALUE not in agent_info:
        raise ConfigError(
            f"bootstrap=True needs the agent to record {fields.AGENT_INFO}.{fields.VALUE}"
        )
    return bootstrap


def _add_step_fields(
    tree: ArrayDict,
    alloc: _Allocator,
    env_example: Mapping[str, Any],
    agent_example: Any,
    previous: bool,
    env_info: bool,
) -> None:
    """Add what every step writes: action, reward, flags, infos, previous action/reward."""
    action = agent_example.action
    if action is None:
        action = env_example[fields.ACTION]
    reward = np.asarray(env_example[fields.REWARD], np.float32)[()]
    tree[fields.ACTION] = alloc(action, padding=1)
    tree[fields.REWARD] = alloc(reward, padding=1)
    for key in (fields.TERMINATED, fields.TRUNCATED, fields.DONE):
        tree[key] = alloc(np.bool_(False))
    if env_info:
        info = numeric_info_example(dict(env_example.get(fields.ENV_INFO) or {}))
        tree[fields.ENV_INFO] = alloc(info)
    tree[fields.AGENT_INFO] = alloc(dict(agent_example.agent_info or {}))
    if previous:
        tree[fields.PREV_ACTION] = alloc(action, padding=1)
        tree[fields.PREV_REWARD] = alloc(reward, padding=1)


def _add_value_fields(
    tree: ArrayDict,
    alloc: _Allocator,
    agent_info: Mapping[str, Any],
    final_observation: bool,
) -> None:
    """Add ``bootstrap_value`` and, with final observations, ``final_value``."""
    value = np.asarray(agent_info[fields.VALUE])
    tree[fields.BOOTSTRAP_VALUE] = Array(
        (alloc.shape[1],), value.shape, value.dtype, storage=alloc.storage
    )
    if final_observation:
        tree[fields.FINAL_VALUE] = alloc(value)
