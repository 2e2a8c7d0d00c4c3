"""Per-agent advantage estimation for multi-agent sample trees.

A multi-agent sample tree has one more dim, the agents: ``[T, B, A]`` per
agent (``env_info.agent_reward``, ``agent_info.value``, ...) next to the
env-level ``[T, B]`` fields. :func:`multiagent_gae` runs GAE separately for
every (env, agent) column over the steps where the agent acted
(``agent_mask``); :class:`MultiAgentGAE` is the Transform reading those
fields from the tree and writing ``advantage`` and ``return_`` ``[T, B, A]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from parllel.errors import ConfigError, ShapeError
from parllel.fields import (
    ADVANTAGE,
    AGENT_INFO,
    AGENT_MASK,
    AGENT_REWARD,
    AGENT_TERMINATED,
    AGENT_TRUNCATED,
    BOOTSTRAP_VALUE,
    DONE,
    ENV_INFO,
    FINAL_VALUE,
    OBSERVATION,
    RETURN,
    VALUE,
)
from parllel.transforms._checks import (
    check_flag_array,
    check_float_array,
    check_shape,
    output_columns,
)
from parllel.transforms.base import (
    Transform,
    allocate_field,
    as_ndarray,
    field_name,
    get_field,
    has_field,
)
from parllel.transforms.functional import normalize_advantage
from parllel.transforms.kernels.multiagent_gae import multiagent_gae_kernel
from parllel.validation import check_fraction, check_positive

__all__ = ["MultiAgentGAE", "multiagent_gae"]

AGENT_REWARD_PATH = (ENV_INFO, AGENT_REWARD)
AGENT_MASK_PATH = (ENV_INFO, AGENT_MASK)
AGENT_TERMINATED_PATH = (ENV_INFO, AGENT_TERMINATED)
AGENT_TRUNCATED_PATH = (ENV_INFO, AGENT_TRUNCATED)
ACTION_MASK_PATH = (OBSERVATION, "action_mask")  # the turn-based adapter's mover mask


def _columns(array: np.ndarray) -> np.ndarray:
    """``[T, B, A]`` as ``[T, B * A]`` (a view: the inputs are checked 3-D)."""
    T, B, A = array.shape
    return array.reshape(T, B * A)


def multiagent_gae(
    agent_reward: np.ndarray,
    value: np.ndarray,
    agent_mask: np.ndarray,
    agent_terminated: np.ndarray,
    agent_truncated: np.ndarray,
    done: np.ndarray,
    bootstrap_value: np.ndarray,
    final_value: np.ndarray | None = None,
    *,
    gamma: float,
    gae_lambda: float,
    truncation_as_termination: bool = False,
    bootstrap_acting: np.ndarray | None = None,
    advantage_out: np.ndarray | None = None,
    return_out: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """GAE per (env, agent) column over the steps where the agent acted.

    The recursion runs from decision to decision (``agent_mask``; one ``gamma``
    per decision); rewards and episode ends between an agent's decisions belong
    to its previous one. Advantage and return are 0 where the agent did not
    act; with ``A = 1`` and every step acted this is
    :func:`~parllel.transforms.functional.generalized_advantage_estimation`.
    Returns ``(advantage, return_)`` ``[T, B, A]``. Episode ends, waiting
    agents and a worked example: docs/multiagent.md ("Per-agent advantages").

    Args:
        agent_reward: ``[T, B, A]`` float32/float64; ``value``, ``agent_mask``,
            ``agent_terminated``, ``agent_truncated`` are ``[T, B, A]`` too.
        done: ``[T, B]`` env-level episode ends.
        bootstrap_value: ``[B, A]`` values of ``observation[T]``.
        final_value: ``[T, B, A]``; required unless ``truncation_as_termination``.
        bootstrap_acting: ``[B, A]`` flags: the agent is to act at
            ``observation[T]``; None: every agent is (a parallel env).

    Raises:
        ShapeError: an input has the wrong shape (DtypeError: dtype).
        ConfigError: a bad hyperparameter, or ``final_value`` is missing.
    """
    gamma = check_fraction("gamma", gamma)
    gae_lambda = check_fraction("gae_lambda", gae_lambda)
    agent_reward = check_float_array("agent_reward", agent_reward)
    if agent_reward.ndim != 3:
        raise ShapeError(
            f"field 'agent_reward' must be 3-D [T, B, A], got shape {agent_reward.shape}"
        )
    shape = agent_reward.shape
    T, B, A = shape
    value = check_float_array("value", value)
    check_shape("value", value, shape)
    flags = {}
    for name, flag in (
        ("agent_mask", agent_mask),
        ("agent_terminated", agent_terminated),
        ("agent_truncated", agent_truncated),
    ):
        flags[name] = check_flag_array(name, flag)
        check_shape(name, flags[name], shape)
    done = check_flag_array("done", done)
    check_shape("done", done, (T, B))
    bootstrap_value = check_float_array("bootstrap_value", bootstrap_value)
    check_shape("bootstrap_value", bootstrap_value, (B, A))
    if bootstrap_acting is None:
        bootstrap_acting = np.ones((B, A), np.bool_)
    bootstrap_acting = check_flag_array("bootstrap_acting", bootstrap_acting)
    check_shape("bootstrap_acting", bootstrap_acting, (B, A))
    if final_value is None:
        if not truncation_as_termination:
            raise ConfigError(
                "field 'final_value' is required to bootstrap truncated agents; "
                "pass truncation_as_termination=True to treat truncations as "
                "terminations instead"
            )
        final_value = value  # never read
    else:
        final_value = check_float_array("final_value", final_value)
        check_shape("final_value", final_value, shape)
    advantage_out, advantage_columns = output_columns(
        "advantage", advantage_out, shape, value.dtype
    )
    return_out, return_columns = output_columns(
        "return_", return_out, shape, value.dtype
    )
    scratch = np.empty((3, B * A), dtype=np.float64)
    multiagent_gae_kernel(
        _columns(agent_reward),
        _columns(value),
        _columns(flags["agent_mask"]),
        _columns(flags["agent_terminated"]),
        _columns(flags["agent_truncated"]),
        done,
        bootstrap_value.reshape(B * A),
        np.ascontiguousarray(bootstrap_acting).reshape(B * A),
        _columns(final_value),
        gamma,
        gae_lambda,
        not truncation_as_termination,
        max(A, 1),
        scratch[0],
        scratch[1],
        scratch[2],
        advantage_columns,
        return_columns,
    )
    return advantage_out, return_out


class MultiAgentGAE(Transform):
    """Write per-agent GAE ``advantage`` and ``return_`` ``[T, B, A]``.

    Reads the ``env_info.agent_*`` fields, ``agent_info.value``, ``done``,
    ``bootstrap_value`` and ``final_value``; see :func:`multiagent_gae`. An
    agent whose ``action_mask`` row at ``observation[T]`` allows nothing is
    taken to be waiting there. ``normalize_advantage`` standardizes over the
    acted rows only (see docs/multiagent.md, "Per-agent advantages").

    Example:
        >>> gae = MultiAgentGAE(sample_tree, gamma=0.99, gae_lambda=0.95)
        >>> gae(sample_tree).advantage.shape   # [T, B, A]

    Args:
        sample_tree: an example multi-agent sample tree (outputs are allocated
            in it).
        gamma: discount per decision in ``[0, 1]``.
        truncation_as_termination: treat agent truncations as terminations
            (then ``final_value`` is not needed).
    """

    def __init__(
        self,
        sample_tree: Any,
        gamma: float,
        gae_lambda: float,
        *,
        normalize_advantage: bool = False,
        truncation_as_termination: bool = False,
        epsilon: float = 1e-8,
    ) -> None:
        self.gamma = check_fraction("gamma", gamma)
        self.gae_lambda = check_fraction("gae_lambda", gae_lambda)
        self.normalize_advantage = bool(normalize_advantage)
        self.truncation_as_termination = bool(truncation_as_termination)
        self.epsilon = check_positive("epsilon", epsilon)
        purpose = "multi-agent advantage estimation"
        value = get_field(sample_tree, (AGENT_INFO, VALUE), purpose)
        value_array = as_ndarray(value, field_name((AGENT_INFO, VALUE)))
        for path in (
            AGENT_REWARD_PATH,
            AGENT_MASK_PATH,
            AGENT_TERMINATED_PATH,
            AGENT_TRUNCATED_PATH,
        ):
            get_field(sample_tree, path, f"{purpose}; the env adapter writes it")
        for name in (DONE, BOOTSTRAP_VALUE):
            get_field(sample_tree, name, purpose)
        if not self.truncation_as_termination:
            get_field(
                sample_tree,
                FINAL_VALUE,
                "to bootstrap truncated agents; or pass truncation_as_termination=True",
            )
        if value_array.ndim != 3:
            raise ShapeError(
                f"field 'agent_info.value' must be [T, B, A] for multi-agent "
                f"advantage estimation, got shape {value_array.shape}"
            )
        feature_shape = value_array.shape[2:]
        allocate_field(sample_tree, ADVANTAGE, value, feature_shape, value_array.dtype)
        allocate_field(sample_tree, RETURN, value, feature_shape, value_array.dtype)
        self(sample_tree)  # validates every shape and dtype once, up front

    def __call__(self, sample_tree: Any) -> Any:
        """Compute ``advantage`` and ``return_`` in place (then normalize)."""

        def read(path: str | tuple[str, ...]) -> np.ndarray:
            return as_ndarray(get_field(sample_tree, path), field_name(path))

        final_value = None if self.truncation_as_termination else read(FINAL_VALUE)
        advantage = read(ADVANTAGE)
        bootstrap_acting = None
        if has_field(sample_tree, ACTION_MASK_PATH):
            leaf = get_field(sample_tree, ACTION_MASK_PATH)[len(advantage)]
            next_mask = as_ndarray(leaf, field_name(ACTION_MASK_PATH))
            bootstrap_acting = np.asarray(
                next_mask.reshape(*next_mask.shape[:2], -1).any(-1)
            )
        agent_mask = read(AGENT_MASK_PATH)
        multiagent_gae(
            read(AGENT_REWARD_PATH),
            read((AGENT_INFO, VALUE)),
            agent_mask,
            read(AGENT_TERMINATED_PATH),
            read(AGENT_TRUNCATED_PATH),
            read(DONE),
            read(BOOTSTRAP_VALUE),
            final_value,
            gamma=self.gamma,
            gae_lambda=self.gae_lambda,
            truncation_as_termination=self.truncation_as_termination,
            bootstrap_acting=bootstrap_acting,
            advantage_out=advantage,
            return_out=read(RETURN),
        )
        if self.normalize_advantage:
            normalize_advantage(advantage, agent_mask, epsilon=self.epsilon)
        return sample_tree
