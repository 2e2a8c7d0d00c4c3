"""V-trace value targets and advantages for PPO on lagged samples (IMPACT / APPO style).

PPO's clipped surrogate already uses ``pi / mu``; :class:`VTraceCorrection`
also corrects the value targets and advantages, evaluating the current
policy on the whole batch before the epochs and running
:func:`parllel.transforms.functional.vtrace` on the result. Which values it
reads (current or recorded): docs/async.md ("PPO under policy lag").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np
import torch

from parllel import fields
from parllel.arrays import Array
from parllel.errors import ConfigError, TreeStructureError
from parllel.torch.algos.batch import PolicyBatch
from parllel.torch.algos.evaluator import PolicyEvaluation, PolicyEvaluator
from parllel.torch.transfer import batch_to_device
from parllel.torch.utils import numpy_to_torch_tree, tree_index
from parllel.transforms.functional import vtrace
from parllel.tree import tree_items, tree_map
from parllel.validation import check_fraction, check_positive

__all__ = ["VTraceCorrection"]

# A ratio counts as clipped only if it exceeds rho_bar by more than this
# (relative): re-evaluating the behaviour policy itself gives ratios of
# 1 +- float noise, which the clip does not change in any material way.
CLIP_TOLERANCE = 1e-4


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name} must be a number; got {value!r}")
    return float(value)


def _unit_interval(name: str, value: Any) -> float:
    return check_fraction(name, _number(name, value))


def _clip_threshold(name: str, value: Any) -> float:
    # inf disables the clip
    return check_positive(name, _number(name, value), allow_inf=True)


class _BootstrapRows(NamedTuple):
    """Observation and extra inputs ``[T + 1, B, ...]``: row ``T`` follows the batch."""

    observation: Any
    extra_inputs: dict[str, Any]


def _through_row_T(tree: Any) -> Any:
    """Zero-copy ``[T + 1]`` numpy views of padded Array leaves, or None."""
    leaves = [leaf for _, leaf in tree_items(tree)]
    if not leaves or not all(
        isinstance(leaf, Array) and leaf.padding >= 1 for leaf in leaves
    ):
        return None
    return tree_map(
        lambda leaf: leaf.padded_ndarray()[leaf.padding : leaf.padding + len(leaf) + 1],
        tree,
    )


def _bootstrap_rows(
    batch: Mapping[str, Any], extra_input_fields: Sequence[str]
) -> _BootstrapRows | None:
    """Rows ``0..T`` of the observation and extra inputs, if all are reachable."""
    observation = _through_row_T(batch.get(fields.OBSERVATION))
    extra = {name: _through_row_T(batch.get(name)) for name in extra_input_fields}
    if observation is None or any(rows is None for rows in extra.values()):
        return None
    return _BootstrapRows(observation, extra)


def _required(batch: Mapping[str, Any], name: str, purpose: str) -> torch.Tensor:
    if name not in batch:
        raise TreeStructureError(
            f"V-trace needs the batch field {name!r} ({purpose}); fields: {list(batch)}"
        )
    return batch[name]


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    """A numpy view (a copy only if the tensor is not on the CPU)."""
    return tensor.detach().cpu().numpy()


def _evaluate(
    evaluator: PolicyEvaluator, *args: Any, **kwargs: Any
) -> PolicyEvaluation:
    return PolicyEvaluation(*evaluator.evaluate(*args, **kwargs))


@dataclass(frozen=True)
class VTraceCorrection:
    """V-trace targets and advantages for PPO, from the policy being trained.

    Pass it as ``PPO(correction=VTraceCorrection(gamma=0.99, ...))``: at the
    start of every :meth:`PPO.optimize <parllel.torch.algos.PPO.optimize>` it
    evaluates the current policy on the batch without gradients and replaces
    ``RETURN`` and ``ADVANTAGE`` with V-trace's (see docs/async.md, "PPO
    under policy lag", and :func:`parllel.transforms.functional.vtrace`).

    Example:
        >>> correction = VTraceCorrection(gamma=0.99, trace_lambda=0.95)
        >>> ppo = PPO(ActorCriticEvaluator(model, distribution), optimizer,
        ...           correction=correction)
        >>> ppo.optimize(sample_tree)["vtrace_rho_mean"]  # 1.0 when on-policy

    Args:
        trace_lambda: scale of the trace coefficients, GAE's ``gae_lambda``.
        rho_bar: clip of the TD errors' importance weights (``math.inf``: none).
        c_bar: clip of the trace coefficients (``math.inf``: none).
        pg_rho_bar: clip of the advantages' weights; None means ``rho_bar``.
        truncation_as_termination: do not bootstrap truncated episodes.

    Raises:
        ConfigError: a parameter is out of range or not a number.
    """

    gamma: float
    trace_lambda: float = 1.0
    rho_bar: float = 1.0
    c_bar: float = 1.0
    pg_rho_bar: float | None = None
    truncation_as_termination: bool = False

    def __post_init__(self) -> None:
        checked = {
            "gamma": _unit_interval("gamma", self.gamma),
            "trace_lambda": _unit_interval("trace_lambda", self.trace_lambda),
            "rho_bar": _clip_threshold("rho_bar", self.rho_bar),
            "c_bar": _clip_threshold("c_bar", self.c_bar),
        }
        if self.pg_rho_bar is not None:
            checked["pg_rho_bar"] = _clip_threshold("pg_rho_bar", self.pg_rho_bar)
        if not isinstance(self.truncation_as_termination, bool):
            raise ConfigError(
                "truncation_as_termination must be a bool; got "
                f"{self.truncation_as_termination!r}"
            )
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    def correct(
        self,
        evaluator: PolicyEvaluator,
        batch: Mapping[str, Any],
        *,
        recurrent: bool = False,
        extra_input_fields: Sequence[str] = (),
        device: torch.device | None = None,
    ) -> tuple[PolicyBatch, dict[str, float]]:
        """The batch PPO trains on, with V-trace targets, and the metrics.

        Args:
            evaluator: the policy being trained (see :class:`PolicyEvaluator`).
            batch: the sample tree (Arrays: the bootstrap row is reachable)
                or a mapping of tensors, with the fields of
                :meth:`PPO.optimize <parllel.torch.algos.PPO.optimize>` minus
                ``ADVANTAGE`` and ``RETURN``, plus ``REWARD``, ``TERMINATED``,
                ``TRUNCATED``, and ``BOOTSTRAP_VALUE`` / ``FINAL_VALUE`` where
                the current values cannot be computed (docs/async.md).
            recurrent: evaluate whole sequences with their states.
            extra_input_fields: batch fields passed to the evaluator.
            device: if given, the batch is moved there first.

        Returns:
            A :class:`PolicyBatch` whose ``advantage`` and ``return_`` are the
            V-trace advantages and targets and whose ``old_value`` is the
            current value; and ``vtrace_rho_mean`` (mean of
            ``min(rho_bar, pi / mu)``) and ``vtrace_clipped_fraction`` (share
            of steps whose ratio exceeds ``rho_bar``), over valid steps.

        Raises:
            TreeStructureError: a field V-trace needs is missing.
        """
        rows = _bootstrap_rows(batch, extra_input_fields)
        batch = numpy_to_torch_tree(batch)  # zero-copy views of a sampler's tree
        rows = None if rows is None else numpy_to_torch_tree(rows)
        data = PolicyBatch.from_sample_tree(
            batch, recurrent, extra_input_fields, targets=False
        )
        if device is not None:  # only what is evaluated; the rest stays on the host
            data = data.to_device(device)
            rows = None if rows is None else batch_to_device(rows, device)
        reward = _required(batch, fields.REWARD, "rewards")
        terminated = _required(batch, fields.TERMINATED, "episode ends")
        truncated = _required(batch, fields.TRUNCATED, "time limits")
        with torch.no_grad():
            if recurrent:
                log_prob, value, bootstrap = self._evaluate_sequences(
                    evaluator, data, rows, terminated[-1] | truncated[-1]
                )
            else:
                log_prob, value, bootstrap = self._evaluate_samples(
                    evaluator, data, rows
                )
            if bootstrap is None:
                bootstrap = _required(
                    batch,
                    fields.BOOTSTRAP_VALUE,
                    "the value of observation[T], which is not reachable in "
                    "this batch (pass the sample tree itself)",
                )
            final_value = self._final_value(
                evaluator, data, batch, value, terminated, truncated, recurrent
            )
            log_ratio = _numpy(log_prob - data.old_log_prob)  # [T, B], a new array
        valid = None if data.valid is None else _numpy(data.valid)
        if valid is not None:
            log_ratio[~valid] = 0.0  # invalid steps may hold anything
        on_cpu = data.advantage.device.type == "cpu"
        return_, advantage = vtrace(
            _numpy(reward),
            _numpy(value),
            _numpy(terminated),
            _numpy(truncated),
            _numpy(bootstrap),
            None if final_value is None else _numpy(final_value),
            log_ratio=log_ratio,
            gamma=self.gamma,
            trace_lambda=self.trace_lambda,
            rho_bar=self.rho_bar,
            c_bar=self.c_bar,
            pg_rho_bar=self.pg_rho_bar,
            truncation_as_termination=self.truncation_as_termination,
            return_out=data.return_.numpy() if on_cpu else None,
            advantage_out=data.advantage.numpy() if on_cpu else None,
        )
        if not on_cpu:
            data.return_.copy_(torch.from_numpy(return_))
            data.advantage.copy_(torch.from_numpy(advantage))
        return replace(data, old_value=value), self._metrics(log_ratio, valid)

    def _evaluate_samples(
        self, evaluator: PolicyEvaluator, data: PolicyBatch, rows: _BootstrapRows | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Feed-forward: all ``T * B`` samples at once, then row ``T`` alone."""
        T, B = data.shape
        flat = data.flatten_samples()
        evaluation = _evaluate(
            evaluator, flat.observation, flat.action, None, None, **flat.extra_inputs
        )
        bootstrap = None
        if rows is not None:
            # Any action will do: only the value of observation[T] is kept.
            bootstrap = _evaluate(
                evaluator,
                tree_index(rows.observation, T),
                data.action[T - 1],
                None,
                None,
                **tree_index(rows.extra_inputs, T),
            ).value  # [B]
        return (
            evaluation.log_prob.reshape(T, B),
            evaluation.value.reshape(T, B),
            bootstrap,
        )

    def _evaluate_sequences(
        self,
        evaluator: PolicyEvaluator,
        data: PolicyBatch,
        rows: _BootstrapRows | None,
        done_last: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Recurrent: whole columns from their initial states, row ``T`` included."""
        if rows is None:
            evaluation = _evaluate(
                evaluator,
                data.observation,
                data.action,
                data.initial_state,
                data.resets,
                **data.extra_inputs,
            )
            return evaluation.log_prob, evaluation.value, None
        T = data.shape[0]
        assert data.resets is not None  # recurrent batches always have them
        done_last = done_last.to(device=data.resets.device, dtype=torch.bool)
        resets = torch.cat([data.resets, done_last[None]])  # [T + 1, B]
        action = torch.cat([data.action, data.action[-1:]])  # row T: any action
        evaluation = _evaluate(
            evaluator,
            rows.observation,
            action,
            data.initial_state,
            resets,
            **rows.extra_inputs,
        )
        return evaluation.log_prob[:T], evaluation.value[:T], evaluation.value[T]

    def _final_value(
        self,
        evaluator: PolicyEvaluator,
        data: PolicyBatch,
        batch: Mapping[str, Any],
        value: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        recurrent: bool,
    ) -> torch.Tensor | None:
        """Values of the final observations of truncated episodes ``[T, B]``."""
        if self.truncation_as_termination:
            return None
        final_observation = batch.get(fields.FINAL_OBSERVATION)
        if recurrent or data.extra_inputs or final_observation is None:
            return _required(
                batch,
                fields.FINAL_VALUE,
                "to bootstrap truncated episodes; or use "
                "VTraceCorrection(truncation_as_termination=True)",
            )
        final_value = torch.zeros_like(value)
        rows = torch.nonzero(
            truncated.to(torch.bool) & ~terminated.to(torch.bool), as_tuple=True
        )
        if len(rows[0]):
            # only the final observations of truncated episodes go to the device
            index = tuple(row.to(value.device) for row in rows)
            final_value[index] = _evaluate(
                evaluator,
                batch_to_device(tree_index(final_observation, rows), value.device),
                data.action[index],
                None,
                None,
            ).value
        return final_value

    def _metrics(
        self, log_ratio: np.ndarray, valid: np.ndarray | None
    ) -> dict[str, float]:
        if valid is not None:
            log_ratio = log_ratio[valid]
        if not log_ratio.size:
            return {"vtrace_rho_mean": math.nan, "vtrace_clipped_fraction": math.nan}
        ratio = np.exp(log_ratio.astype(np.float64))
        return {
            "vtrace_rho_mean": float(np.minimum(ratio, self.rho_bar).mean()),
            "vtrace_clipped_fraction": float(
                (ratio > self.rho_bar * (1.0 + CLIP_TOLERANCE)).mean()
            ),
        }
