"""The V-trace transform: off-policy targets and advantages on a sample tree."""

from __future__ import annotations

from typing import Any

import numpy as np

from parllel.fields import (
    ADVANTAGE,
    AGENT_INFO,
    BOOTSTRAP_VALUE,
    FINAL_VALUE,
    LOG_PROB,
    RETURN,
    REWARD,
    TARGET_LOG_PROB,
    TERMINATED,
    TRUNCATED,
    VALUE,
)
from parllel.transforms._checks import (
    check_float_array,
    check_shape,
)
from parllel.transforms.base import (
    Transform,
    allocate_field,
    as_ndarray,
    field_name,
    get_field,
    has_field,
)
from parllel.transforms.functional_vtrace import vtrace
from parllel.validation import check_fraction, check_positive

FieldPath = str | tuple[str, ...]


class ComputeVTrace(Transform):
    """Write V-trace targets into ``return_`` and advantages into ``advantage``.

    Corrects samples of a lagged behaviour policy ``mu`` for the policy being
    trained (:func:`parllel.transforms.functional.vtrace`). The learner writes
    the target log-probs into ``target_log_prob_field`` before each call; a
    missing top-level field is allocated filled with NaN, so forgetting it
    shows. Field names and semantics: docs/transforms.md ("V-trace").

    Example:
        >>> vtrace = ComputeVTrace(sample_tree, gamma=0.99, trace_lambda=0.95)
        >>> sample_tree["target_log_prob"][...] = learner_log_prob  # [T, B]
        >>> vtrace(sample_tree).return_.shape   # [T, B]
    """

    def __init__(
        self,
        sample_tree: Any,
        gamma: float,
        trace_lambda: float = 1.0,
        *,
        rho_bar: float = 1.0,
        c_bar: float = 1.0,
        pg_rho_bar: float | None = None,
        value_field: FieldPath = (AGENT_INFO, VALUE),
        bootstrap_value_field: FieldPath = BOOTSTRAP_VALUE,
        final_value_field: FieldPath = FINAL_VALUE,
        behaviour_log_prob_field: FieldPath = (AGENT_INFO, LOG_PROB),
        target_log_prob_field: FieldPath = TARGET_LOG_PROB,
        truncation_as_termination: bool = False,
    ) -> None:
        self.gamma = check_fraction("gamma", gamma)
        self.trace_lambda = check_fraction("trace_lambda", trace_lambda)
        self.rho_bar = check_positive("rho_bar", rho_bar, allow_inf=True)
        self.c_bar = check_positive("c_bar", c_bar, allow_inf=True)
        self.pg_rho_bar = (
            self.rho_bar
            if pg_rho_bar is None
            else check_positive("pg_rho_bar", pg_rho_bar, allow_inf=True)
        )
        self.value_field = value_field
        self.bootstrap_value_field = bootstrap_value_field
        self.final_value_field = final_value_field
        self.behaviour_log_prob_field = behaviour_log_prob_field
        self.target_log_prob_field = target_log_prob_field
        self.truncation_as_termination = bool(truncation_as_termination)
        purpose = "V-trace"
        for path in (REWARD, TERMINATED, TRUNCATED, bootstrap_value_field):
            get_field(sample_tree, path, purpose)
        if not self.truncation_as_termination:
            get_field(
                sample_tree,
                final_value_field,
                "to bootstrap truncated episodes; or pass "
                "truncation_as_termination=True",
            )
        behaviour = get_field(
            sample_tree,
            behaviour_log_prob_field,
            "the behaviour policy's log-probs, recorded while sampling",
        )
        behaviour_array = as_ndarray(behaviour, field_name(behaviour_log_prob_field))
        if isinstance(target_log_prob_field, str) and not has_field(
            sample_tree, target_log_prob_field
        ):
            target = allocate_field(
                sample_tree,
                target_log_prob_field,
                behaviour,
                behaviour_array.shape[2:],
                behaviour_array.dtype,
            )
            as_ndarray(target, target_log_prob_field)[...] = np.nan
        get_field(
            sample_tree,
            target_log_prob_field,
            "the learner writes the target policy's log-probs there",
        )
        self._log_ratio = np.empty(0)  # scratch, reallocated to fit the batch
        value = get_field(sample_tree, value_field, purpose)
        value_array = as_ndarray(value, field_name(value_field))
        feature_shape = value_array.shape[2:]
        allocate_field(sample_tree, ADVANTAGE, value, feature_shape, value_array.dtype)
        allocate_field(sample_tree, RETURN, value, feature_shape, value_array.dtype)
        self(sample_tree)  # validates every shape and dtype once, up front

    def _read(self, sample_tree: Any, path: FieldPath) -> np.ndarray:
        return as_ndarray(get_field(sample_tree, path), field_name(path))

    def _log_ratio_of(self, sample_tree: Any) -> np.ndarray:
        """``target - behaviour`` log-probs, into a reused scratch array."""
        target_name = field_name(self.target_log_prob_field)
        behaviour_name = field_name(self.behaviour_log_prob_field)
        target = check_float_array(
            target_name, self._read(sample_tree, self.target_log_prob_field)
        )
        behaviour = check_float_array(
            behaviour_name, self._read(sample_tree, self.behaviour_log_prob_field)
        )
        check_shape(target_name, target, behaviour.shape)
        dtype = np.result_type(target, behaviour)
        if self._log_ratio.shape != target.shape or self._log_ratio.dtype != dtype:
            self._log_ratio = np.empty(target.shape, dtype)
        return np.subtract(target, behaviour, out=self._log_ratio)

    def __call__(self, sample_tree: Any) -> Any:
        """Compute ``return_`` (targets) and ``advantage`` in place."""
        final_value = None
        if not self.truncation_as_termination:
            final_value = self._read(sample_tree, self.final_value_field)
        log_ratio = self._log_ratio_of(sample_tree)
        vtrace(
            self._read(sample_tree, REWARD),
            self._read(sample_tree, self.value_field),
            self._read(sample_tree, TERMINATED),
            self._read(sample_tree, TRUNCATED),
            self._read(sample_tree, self.bootstrap_value_field),
            final_value,
            log_ratio=log_ratio,
            gamma=self.gamma,
            trace_lambda=self.trace_lambda,
            rho_bar=self.rho_bar,
            c_bar=self.c_bar,
            pg_rho_bar=self.pg_rho_bar,
            truncation_as_termination=self.truncation_as_termination,
            return_out=self._read(sample_tree, RETURN),
            advantage_out=self._read(sample_tree, ADVANTAGE),
        )
        return sample_tree
