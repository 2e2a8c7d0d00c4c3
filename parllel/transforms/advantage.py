"""Advantage estimation and advantage normalization transforms."""

from __future__ import annotations

from typing import Any

import numpy as np

from parllel.fields import (
    ADVANTAGE,
    AGENT_INFO,
    BOOTSTRAP_VALUE,
    FINAL_VALUE,
    RETURN,
    REWARD,
    TERMINATED,
    TRUNCATED,
    VALID,
    VALUE,
)
from parllel.transforms.base import (
    Transform,
    allocate_field,
    as_ndarray,
    field_name,
    get_field,
)
from parllel.transforms.functional import (
    generalized_advantage_estimation,
    normalize_advantage,
)
from parllel.validation import check_fraction, check_positive


class EstimateAdvantage(Transform):
    """Write GAE advantages and returns into ``advantage`` and ``return_``.

    Reads ``reward``, the value at ``value_field`` (``agent_info.value`` by
    default), ``terminated``, ``truncated``, ``bootstrap_value`` (``[B, ...]``,
    the value of ``observation[T]``) and ``final_value`` (value of the final
    observation at truncations). A truncated episode is bootstrapped from
    ``final_value``; a terminated one is not. Allocates ``advantage`` and
    ``return_`` like the value. ``gae_lambda = 1`` gives discounted returns.

    Example:
        >>> gae = EstimateAdvantage(sample_tree, gamma=0.99, gae_lambda=0.95)
        >>> gae(sample_tree).advantage.shape   # [T, B]
    """

    def __init__(
        self,
        sample_tree: Any,
        gamma: float,
        gae_lambda: float,
        *,
        value_field: str | tuple[str, ...] = (AGENT_INFO, VALUE),
        truncation_as_termination: bool = False,
    ) -> None:
        self.gamma = check_fraction("gamma", gamma)
        self.gae_lambda = check_fraction("gae_lambda", gae_lambda)
        self.value_field = value_field
        self.truncation_as_termination = bool(truncation_as_termination)
        value = get_field(sample_tree, value_field, "advantage estimation")
        value_array = as_ndarray(value, field_name(value_field))
        for path in (REWARD, TERMINATED, TRUNCATED, BOOTSTRAP_VALUE):
            get_field(sample_tree, path, "advantage estimation")
        if not self.truncation_as_termination:
            get_field(
                sample_tree,
                FINAL_VALUE,
                "to bootstrap truncated episodes; or pass "
                "truncation_as_termination=True",
            )
        feature_shape = value_array.shape[2:]
        allocate_field(sample_tree, ADVANTAGE, value, feature_shape, value_array.dtype)
        allocate_field(sample_tree, RETURN, value, feature_shape, value_array.dtype)
        self(sample_tree)  # validates every shape and dtype once, up front

    def __call__(self, sample_tree: Any) -> Any:
        """Compute ``advantage`` and ``return_`` in place."""
        final_value = None
        if not self.truncation_as_termination:
            final_value = as_ndarray(sample_tree[FINAL_VALUE], FINAL_VALUE)
        generalized_advantage_estimation(
            as_ndarray(sample_tree[REWARD], REWARD),
            as_ndarray(get_field(sample_tree, self.value_field), "value"),
            as_ndarray(sample_tree[TERMINATED], TERMINATED),
            as_ndarray(sample_tree[TRUNCATED], TRUNCATED),
            as_ndarray(sample_tree[BOOTSTRAP_VALUE], BOOTSTRAP_VALUE),
            final_value,
            gamma=self.gamma,
            gae_lambda=self.gae_lambda,
            truncation_as_termination=self.truncation_as_termination,
            advantage_out=as_ndarray(sample_tree[ADVANTAGE], ADVANTAGE),
            return_out=as_ndarray(sample_tree[RETURN], RETURN),
        )
        return sample_tree


class NormalizeAdvantage(Transform):
    """Standardize ``advantage`` in place to mean 0 and std 1.

    With ``only_valid=True`` the statistics come from, and only rewrite, the
    steps where ``valid`` is True (wait-reset sampling; build
    :class:`ComputeValidMask` first). Usually the algorithm normalizes per
    minibatch instead; this is the per-batch variant.

    Example:
        >>> NormalizeAdvantage(sample_tree, only_valid=True)(sample_tree)
    """

    def __init__(
        self, sample_tree: Any, *, only_valid: bool = False, epsilon: float = 1e-8
    ) -> None:
        self.only_valid = bool(only_valid)
        self.epsilon = check_positive("epsilon", epsilon)
        get_field(sample_tree, ADVANTAGE, "build EstimateAdvantage first")
        if self.only_valid:
            get_field(
                sample_tree, VALID, "only_valid=True; build ComputeValidMask first"
            )
        advantage = as_ndarray(sample_tree[ADVANTAGE], ADVANTAGE)
        normalize_advantage(  # validation only, on a scratch copy
            np.zeros_like(advantage), self._valid(sample_tree), epsilon=self.epsilon
        )

    def _valid(self, sample_tree: Any) -> np.ndarray | None:
        return as_ndarray(sample_tree[VALID], VALID) if self.only_valid else None

    def __call__(self, sample_tree: Any) -> Any:
        """Normalize ``advantage`` in place."""
        normalize_advantage(
            as_ndarray(sample_tree[ADVANTAGE], ADVANTAGE),
            self._valid(sample_tree),
            epsilon=self.epsilon,
        )
        return sample_tree
