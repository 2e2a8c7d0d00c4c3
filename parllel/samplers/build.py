"""Allocate a sample tree from examples: the one place that lays out a batch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from parllel import fields
from parllel.arrays import Array
from parllel.arrays.array import Storage
from parllel.cages.env_info import numeric_info_example
from parllel.errors import ConfigError
from parllel.samplers.frame_stacks import allocate_frame_fields
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

    Layout (``T = batch_T``, ``B = n_envs``; "pad" = one padding row each
    side, so ``array[T]`` exists and ``array.padded[t - 1]`` is the previous
    step even at ``t = 0``; :meth:`ArrayDict.rotate` carries them over):

    =====================  ===============  ==========================================
    field                  shape            notes
    =====================  ===============  ==========================================
    ``observation``        ``[T(+1), B]``   pad; ``observation[T]`` = next batch's 0
    ``action``             ``[T, B]``       pad; from ``agent_example.action``
    ``reward``             ``[T, B]``       pad; float32
    ``terminated``         ``[T, B]``       bool
    ``truncated``          ``[T, B]``       bool
    ``done``               ``[T, B]``       bool, terminated or truncated
    ``env_info``           ``[T, B]``       numeric keys of the env's info dict
    ``agent_info``         ``[T, B]``       tree from ``agent_example.agent_info``
    ``prev_action``        ``[T(+1), B]``   pad; zero at each episode's first step
    ``prev_reward``        ``[T(+1), B]``   pad; zero at each episode's first step
    ``final_observation``  ``[T, B]``       last observation where an episode ended
    ``bootstrap_value``    ``[B]``          value of ``observation[T]``
    ``final_value``        ``[T, B]``       value of ``final_observation`` if truncated
    ``valid``              ``[T, B]``       bool, wait-reset only
    ``initial_state``      ``[B]``          agent state at the batch start
    =====================  ===============  ==========================================

    Transforms then allocate their own fields (``advantage``, ``return_``).

    Args:
        env_example: a cage's ``example`` (observation, action, reward,
            terminated, truncated, env_info).
        agent_example: ``handler.example_outputs(...)`` (action, agent_info, state).
        batch_T: time steps per batch.
        n_envs: envs in all cages together.
        storage: ``"shared"`` (needed by process cages) or ``"local"``.
        recurrent: add ``initial_state`` (needs ``agent_example.state``).
        previous: add ``prev_action``/``prev_reward`` (default: ``recurrent``).
        bootstrap: add ``bootstrap_value`` and ``final_value`` (default: if
            ``agent_info`` has a ``value``, i.e. advantage estimation can run).
        final_observation: add ``final_observation`` (default: ``bootstrap``).
        wait_reset: add ``valid``.
        env_info: add the numeric env-info keys.
        full_size: allocate the ``[T, B]`` fields as full-size rotating Arrays
            of ``full_size`` rows (a multiple of ``T``), e.g. a replay tree
            (:func:`parllel.patterns.build_replay_tree`); ``[B]`` fields stay
            as they are, and ``final_observation`` stays a ``[T, B]`` slot
            (replays keep final observations sparsely). Samplers write into
            ordinary trees.
        observation_dtype: store the floating leaves of ``observation`` and
            ``final_observation`` in this floating dtype (e.g. ``np.float32``
            for MuJoCo's float64 observations: half the memory); the cages
            cast as they write. Default: the env's dtype (torch models cast
            their input to the model's dtype either way). Integer leaves
            (images, discrete values) keep theirs.
        frame_stack: ``k`` to store one frame per step of the env's
            ``(k, ...)`` frame stacks (``FrameStackObservation(k)``, EnvPool's
            ``stack_num``) instead of whole stacks: ``observation`` and
            ``final_observation`` become ``[B]`` staging slots, ``frames``
            ``[k + T, B]`` and ``frame_depth`` ``[T, B]`` hold what PPO
            rebuilds the stacks from (:mod:`parllel.samplers.frame_stacks`).
            For feed-forward agents in ``FeedForwardSampler`` or
            ``AlternatingSampler``; not with ``recurrent`` or ``full_size``
            (replays store one frame per step themselves:
            :func:`~parllel.replays.frames.build_frame_replay_tree`).

    Returns:
        An ArrayDict keyed by :mod:`parllel.fields` names.

    Example:
        >>> example = handler.example_outputs(cage.example[fields.OBSERVATION])
        >>> tree = sample_tree_from_examples(cage.example, example, 128, cage.n_envs)
        >>> tree.observation.shape, tree.action.padded[-1].shape
        ((128, 8, 4), (8,))
    """
    check_at_least("batch_T", int(batch_T))
    check_at_least("n_envs", int(n_envs))
    shape = (int(batch_T), int(n_envs))
    agent_info = dict(agent_example.agent_info or {})
    action = agent_example.action
    if action is None:
        action = env_example[fields.ACTION]
    if bootstrap is None:
        bootstrap = fields.VALUE in agent_info
    if bootstrap and fields.VALUE not in agent_info:
        raise ConfigError(
            f"bootstrap=True needs the agent to record {fields.AGENT_INFO}.{fields.VALUE}"
        )
    if final_observation is None:
        final_observation = bootstrap
    if previous is None:
        previous = recurrent
    reward = np.asarray(env_example[fields.REWARD], np.float32)[()]
    observation = with_float_dtype(env_example[fields.OBSERVATION], observation_dtype)

    def alloc(
        example: Any, batch_shape: tuple[int, ...] = shape, padding: int = 0
    ) -> Any:
        rows = full_size if len(batch_shape) == 2 else None
        return buffer_from_example(
            example, batch_shape, storage, padding=padding, full_size=rows
        )

    tree = ArrayDict()
    if frame_stack is not None:
        if recurrent or full_size is not None:
            raise ConfigError(
                f"frame_stack is for the [T, B] trees of feed-forward samplers, "
                f"not with recurrent=True or full_size (got recurrent={recurrent}, "
                f"full_size={full_size}); a replay stores one frame per step with "
                "build_frame_replay_tree and UniformReplay(frame_stack=k)"
            )
        allocate_frame_fields(
            tree, observation, frame_stack, shape, storage, final_observation
        )
    else:
        tree[fields.OBSERVATION] = alloc(observation, padding=1)
    tree[fields.ACTION] = alloc(action, padding=1)
    tree[fields.REWARD] = alloc(reward, padding=1)
    for key in (fields.TERMINATED, fields.TRUNCATED, fields.DONE):
        tree[key] = alloc(np.bool_(False))
    if env_info:
        info = numeric_info_example(dict(env_example.get(fields.ENV_INFO) or {}))
        tree[fields.ENV_INFO] = alloc(info)
    tree[fields.AGENT_INFO] = alloc(agent_info)
    if previous:
        tree[fields.PREV_ACTION] = alloc(action, padding=1)
        tree[fields.PREV_REWARD] = alloc(reward, padding=1)
    if final_observation and frame_stack is None:
        # a replay tree keeps only a [T, B] slot: the replay stores the few
        # final observations of ended episodes sparsely when a batch is recorded
        tree[fields.FINAL_OBSERVATION] = buffer_from_example(
            observation, shape, storage
        )
    if bootstrap:
        value = np.asarray(agent_info[fields.VALUE])
        tree[fields.BOOTSTRAP_VALUE] = Array(
            (shape[1],), value.shape, value.dtype, storage=storage
        )
        if final_observation:
            tree[fields.FINAL_VALUE] = alloc(value)
    if wait_reset:
        tree[fields.VALID] = alloc(np.bool_(True))
    if recurrent:
        if agent_example.state is None:
            raise ConfigError(
                "recurrent=True but the agent has no state (agent_example.state is None)"
            )
        tree[fields.INITIAL_STATE] = alloc(agent_example.state, batch_shape=shape[1:])
    return tree
