"""Proximal Policy Optimization (clipped surrogate objective)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, overload

import torch

from parllel.checkpoints.finite import check_finite_update
from parllel.errors import ConfigError
from parllel.schedules import Schedule
from parllel.torch.algos.batch import PolicyBatch
from parllel.torch.algos.evaluator import PolicyEvaluation, PolicyEvaluator
from parllel.torch.algos.frame_batch import refuse_frames
from parllel.torch.algos.gradients import clip_grad_norm
from parllel.torch.algos.vtrace_correction import VTraceCorrection
from parllel.torch.utils import check_device, numpy_to_torch_tree
from parllel.validation import (
    check_at_least,
    check_count,
    check_positive,
    check_positive_or_schedule,
)

__all__ = ["PPO"]

_STAT_NAMES = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")


def _masked_mean(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is None:
        return x.mean()
    # ``where`` rather than a product: invalid steps may hold anything, even NaN.
    total = torch.where(mask, x, torch.zeros((), dtype=x.dtype, device=x.device))
    return total.sum() / mask.sum().clamp(min=1).to(x.dtype)


def _normalized(advantage: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """``(a - mean) / (std + 1e-8)`` over the valid entries, with the sample std
    (``ddof=1``) as SB3 and CleanRL; fewer than two entries stay as they are."""
    n = (
        torch.tensor(advantage.numel(), dtype=advantage.dtype, device=advantage.device)
        if mask is None
        else mask.sum().to(advantage.dtype)
    )
    mean = _masked_mean(advantage, mask)
    bessel = n / (n - 1).clamp(min=1)
    std = (_masked_mean((advantage - mean).pow(2), mask) * bessel).sqrt()
    return torch.where(n > 1, (advantage - mean) / (std + 1e-8), advantage)


def _explained_variance(
    prediction: torch.Tensor, target: torch.Tensor, mask: torch.Tensor | None
) -> float:
    """``1 - Var(target - prediction) / Var(target)`` (NaN if the target is constant)."""
    if mask is not None:
        prediction, target = prediction[mask], target[mask]
    if target.numel() < 2:
        return math.nan
    target_var = target.var()
    if target_var <= 0:
        return math.nan
    return float(1.0 - (target - prediction).var() / target_var)


class PPO:
    """PPO with clipped surrogate, optional value clipping and KL early stopping.

    Each :meth:`optimize` call runs ``epochs`` passes over one batch, each
    split into ``minibatches`` shuffled minibatches, one optimizer step per
    minibatch. Per minibatch (masked by ``VALID`` where present)::

        ratio       = exp(log_prob - old_log_prob)
        policy_loss = -mean(min(ratio * A, clip(ratio, 1 - c, 1 + c) * A))
        value_loss  = 0.5 * mean((value - return)^2)   # or the max with the
                                                       # clipped value's error
        loss        = policy_loss + value_loss_coef * value_loss
                      - entropy_coef * mean(entropy)

    Feed-forward minibatches shuffle all ``T * B`` samples; recurrent ones
    (``recurrent=True``) shuffle env columns and keep whole sequences with
    their ``INITIAL_STATE`` and resets. With ``target_kl``, the update stops
    as soon as a minibatch's approximate KL (``mean((r - 1) - log r)``,
    measured before its step) exceeds ``target_kl``; that step is skipped.

    Under policy lag (asynchronous sampling), ``old_log_prob`` is the
    behaviour policy's, recorded while sampling: the ratio is ``pi / mu``.
    ``correction=VTraceCorrection(...)`` also replaces the batch's advantages
    and value targets by V-trace's, computed from the current policy at the
    start of each :meth:`optimize` (see :class:`VTraceCorrection`).

    Schedules are callables of training progress in ``[0, 1]`` (see
    :mod:`parllel.schedules`). Progress is passed to
    :meth:`optimize`, or derived from ``total_updates`` and the number of
    calls so far.

    Example:
        >>> model, distribution = build_actor_critic(obs_space, action_space)
        >>> optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
        >>> ppo = PPO(ActorCriticEvaluator(model, distribution), optimizer,
        ...           epochs=4, minibatches=4, target_kl=0.02)
        >>> metrics = ppo.optimize(numpy_to_torch_tree(sample_tree))

    Args:
        evaluator: the agent side; see :class:`PolicyEvaluator`.
        optimizer: optimizer over the evaluator's parameters (gradients are
            clipped over all of its parameter groups).
        learning_rate: None (keep the optimizer's), a float, or a schedule;
            set on every parameter group at each :meth:`optimize`.
        clip_range: ratio clip ``c`` (float or schedule).
        value_clip_range: if given, clip the value change from the old value
            to this range (float or schedule).
        value_loss_coef: weight of the value loss.
        entropy_coef: weight of the entropy bonus.
        max_grad_norm: clip the global gradient norm (None: no clipping;
            the norm is still reported).
        epochs: passes over each batch.
        minibatches: minibatches per pass.
        target_kl: optional KL threshold for early stopping.
        normalize_advantage: normalize advantages per minibatch (masked), on
            by default as in SB3 and CleanRL.
        recurrent: minibatch over whole env columns and pass states/resets.
        batch_shape: optional ``(T, B)``, checked against ``minibatches`` now
            rather than at the first batch.
        total_updates: number of :meth:`optimize` calls in training, used to
            compute progress when it is not passed.
        extra_input_fields: batch fields passed to the evaluator as keyword
            arguments (e.g. ``(fields.PREV_ACTION, fields.PREV_REWARD)``).
        device: if given, the batch is moved there first.
        correction: None (use the batch's ``ADVANTAGE`` and ``RETURN``) or a
            :class:`VTraceCorrection` (off-policy targets for lagged samples).
        compile: ``torch.compile`` each minibatch's gradient computation
            (loss, backward, clipping) and the optimizer's step: True with
            inductor, or a backend's name. Small networks on a CPU, where
            per-call overhead dominates, gain most; the first update compiles
            (tens of seconds). The optimizer's learning rates become 0-dim
            tensors, so a schedule does not recompile the step.

    Raises:
        ConfigError: any invalid hyperparameter, with the reason.
    """

    def __init__(
        self,
        evaluator: PolicyEvaluator,
        optimizer: torch.optim.Optimizer,
        *,
        learning_rate: float | Schedule | None = None,
        clip_range: float | Schedule = 0.2,
        value_clip_range: float | Schedule | None = None,
        value_loss_coef: float = 0.5,
        entropy_coef: float = 0.0,
        max_grad_norm: float | None = 0.5,
        epochs: int = 4,
        minibatches: int = 4,
        target_kl: float | None = None,
        normalize_advantage: bool = True,
        recurrent: bool = False,
        batch_shape: tuple[int, int] | None = None,
        total_updates: int | None = None,
        extra_input_fields: Sequence[str] = (),
        device: torch.device | str | None = None,
        correction: VTraceCorrection | None = None,
        compile: bool | str = False,
    ) -> None:
        if not callable(getattr(evaluator, "evaluate", None)):
            raise ConfigError(
                "evaluator must have an evaluate(observation, action, "
                f"initial_state, resets) method; got {type(evaluator).__name__}"
            )
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise ConfigError(
                f"optimizer must be a torch.optim.Optimizer; got {type(optimizer).__name__}"
            )
        check_positive_or_schedule("learning_rate", learning_rate, allow_none=True)
        check_positive_or_schedule("clip_range", clip_range, allow_none=False)
        check_positive_or_schedule("value_clip_range", value_clip_range, True)
        for name, value in (
            ("value_loss_coef", value_loss_coef),
            ("entropy_coef", entropy_coef),
        ):
            if not (value >= 0 and math.isfinite(value)):
                raise ConfigError(f"{name} must be non-negative; got {value}")
        for name, limit in (("max_grad_norm", max_grad_norm), ("target_kl", target_kl)):
            if limit is not None:
                check_positive(name, limit, allow_inf=True)
        check_count("epochs", epochs)
        check_count("minibatches", minibatches)
        if correction is not None and not isinstance(correction, VTraceCorrection):
            raise ConfigError(
                "correction must be None or a VTraceCorrection (e.g. "
                f"VTraceCorrection(gamma=0.99, trace_lambda=0.95)); got {correction!r}"
            )
        if total_updates is not None:
            check_at_least("total_updates", total_updates)
        if batch_shape is not None:
            T, B = batch_shape
            units, what = (B, "env columns B") if recurrent else (T * B, "T * B")
            if units % minibatches != 0:
                raise ConfigError(
                    f"batch_shape {tuple(batch_shape)}: {what} = {units} is not "
                    f"divisible into {minibatches} minibatches"
                    + (
                        " (recurrent PPO minibatches whole env columns)"
                        if recurrent
                        else ""
                    )
                )
        self.evaluator = evaluator
        self.optimizer = optimizer
        self.learning_rate = learning_rate
        self.clip_range = clip_range
        self.value_clip_range = value_clip_range
        self.value_loss_coef = float(value_loss_coef)
        self.entropy_coef = float(entropy_coef)
        self.max_grad_norm = max_grad_norm
        self.epochs = epochs
        self.minibatches = minibatches
        self.target_kl = target_kl
        self.normalize_advantage = normalize_advantage
        self.recurrent = recurrent
        self.total_updates = total_updates
        self.extra_input_fields = tuple(extra_input_fields)
        self.device = None if device is None else check_device(device)
        self.correction = correction
        self.updates_done = 0
        self.parameters = [p for g in optimizer.param_groups for p in g["params"]]
        self._gradients = self._minibatch_gradients
        self._optimizer_step = optimizer.step
        self._compiled = bool(compile)
        if compile:
            backend = "inductor" if compile is True else str(compile)
            self._gradients = torch.compile(self._minibatch_gradients, backend=backend)
            self._optimizer_step = torch.compile(  # type: ignore[assignment]
                optimizer.step, backend=backend
            )
            self._tensor_learning_rates()

    def _tensor_learning_rates(self) -> None:
        """Compiled: each group's learning rate a 0-dim tensor, set in place
        (a compiled step would recompile for every new float)."""
        for group in self.optimizer.param_groups:
            group["lr"] = torch.tensor(float(group["lr"]))

    def _progress(self, progress: float | None) -> float:
        if progress is not None:
            return min(max(float(progress), 0.0), 1.0)
        if self.total_updates is not None:
            return min(self.updates_done / self.total_updates, 1.0)
        if any(
            callable(v)
            for v in (self.learning_rate, self.clip_range, self.value_clip_range)
        ):
            raise ConfigError(
                "PPO has a schedule but no way to know progress: pass "
                "optimize(batch, progress=...) or PPO(total_updates=...)"
            )
        return 0.0

    @overload
    @staticmethod
    def _resolve(value: float | Schedule, progress: float) -> float: ...

    @overload
    @staticmethod
    def _resolve(value: float | Schedule | None, progress: float) -> float | None: ...

    @staticmethod
    def _resolve(value: float | Schedule | None, progress: float) -> float | None:
        return value(progress) if callable(value) else value

    def state_dict(self) -> dict[str, Any]:
        """Checkpoint state: the optimizer's and the update counter."""
        return {
            "optimizer": self.optimizer.state_dict(),
            "updates_done": self.updates_done,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.optimizer.load_state_dict(state["optimizer"])
        if self._compiled:  # a state saved uncompiled holds float rates
            self._tensor_learning_rates()
        self.updates_done = int(state["updates_done"])

    def optimize(
        self, batch: Mapping[str, Any], progress: float | None = None
    ) -> dict[str, float]:
        """Run the PPO update on one batch.

        Args:
            batch: the sample tree, or a mapping of torch tensors, with fields
                from :mod:`parllel.fields`: ``OBSERVATION`` ``[T, B, ...]``
                (no bootstrap row), ``ACTION``, ``ADVANTAGE``, ``RETURN``,
                ``AGENT_INFO.LOG_PROB`` and ``AGENT_INFO.VALUE`` (or top-level
                ``LOG_PROB``/``VALUE``), optional ``VALID`` ``[T, B]``; a
                tree built with ``frame_stack`` gives ``FRAMES`` and
                ``FRAME_DEPTH`` instead, and each minibatch rebuilds the
                stacks of its samples; for
                recurrent PPO also ``INITIAL_STATE`` ``[B, ...]`` (optional:
                zeros) and ``DONE`` (or ``TERMINATED`` and ``TRUNCATED``).
                With a correction, see :meth:`VTraceCorrection.correct`.
            progress: training progress in ``[0, 1]`` for the schedules.

        Returns:
            Metrics: ``policy_loss``, ``value_loss``, ``entropy``,
            ``approx_kl``, ``clip_fraction`` (means over evaluated
            minibatches), ``grad_norm`` (mean over steps taken),
            ``explained_variance`` (of the old values), ``learning_rate``,
            ``clip_range``, ``epochs_run`` (fractional if stopped early),
            ``minibatch_updates``, ``early_stopped`` (0 or 1); with a
            correction also ``vtrace_rho_mean`` and ``vtrace_clipped_fraction``.
        """
        progress = self._progress(progress)
        correction_metrics: dict[str, float] = {}
        if self.correction is None:
            batch = numpy_to_torch_tree(batch)  # zero-copy views of a sampler's tree
            data = PolicyBatch.from_sample_tree(
                batch, self.recurrent, self.extra_input_fields
            )
            if self.device is not None:  # only what the loss reads
                data = data.to_device(self.device)
        else:
            refuse_frames(batch, "VTraceCorrection")
            data, correction_metrics = self.correction.correct(
                self.evaluator,
                batch,
                recurrent=self.recurrent,
                extra_input_fields=self.extra_input_fields,
                device=self.device,
            )
        if self.learning_rate is not None:
            learning_rate = self._resolve(self.learning_rate, progress)
            for group in self.optimizer.param_groups:
                if isinstance(group["lr"], torch.Tensor):  # compiled: set in place
                    group["lr"].fill_(learning_rate)
                else:
                    group["lr"] = learning_rate
        clip_range = self._resolve(self.clip_range, progress)
        value_clip_range = self._resolve(self.value_clip_range, progress)

        # Statistics stay detached tensors until the end: one conversion per
        # update, not one per statistic per minibatch.
        stat_rows: list[torch.Tensor] = []
        grad_norms: list[torch.Tensor] = []
        steps = 0
        early_stopped = False
        max_norm = self.max_grad_norm if self.max_grad_norm is not None else math.inf
        clip_ranges = self._clip_arguments(clip_range, value_clip_range)
        for _ in range(self.epochs):
            for minibatch in data.minibatches(self.minibatches, self.recurrent):
                loss, stats, grad_norm = self._gradients(
                    minibatch, *clip_ranges, max_norm
                )
                stat_rows.append(stats)
                if self.target_kl is not None and float(stats[3]) > self.target_kl:
                    early_stopped = True  # its gradients are left unused
                    break
                check_finite_update(
                    "PPO", self.updates_done, loss=loss, grad_norm=grad_norm
                )
                grad_norms.append(grad_norm)
                self._optimizer_step()
                steps += 1
            if early_stopped:
                break
        self.updates_done += 1

        means = torch.stack(stat_rows).mean(dim=0).tolist() if stat_rows else []
        metrics = dict(zip(_STAT_NAMES, means))
        metrics.update(
            grad_norm=float(torch.stack(grad_norms).mean()) if steps else 0.0,
            explained_variance=_explained_variance(
                data.old_value.detach(), data.return_.detach(), data.valid
            ),
            learning_rate=float(self.optimizer.param_groups[0]["lr"]),
            clip_range=float(clip_range),
            epochs_run=steps / self.minibatches,
            minibatch_updates=float(steps),
            early_stopped=float(early_stopped),
            **correction_metrics,
        )
        return metrics

    def _clip_arguments(
        self, clip_range: float, value_clip_range: float | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The clip ranges as 0-dim tensors on the parameters' device (a
        compiled step would recompile for every new float of a schedule)."""
        device = self.parameters[0].device
        return torch.tensor(clip_range, device=device), (
            None
            if value_clip_range is None
            else torch.tensor(value_clip_range, device=device)
        )

    def _minibatch_gradients(
        self,
        minibatch: PolicyBatch,
        clip_range: torch.Tensor,
        value_clip_range: torch.Tensor | None,
        max_norm: float,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Loss, statistics and clipped gradient norm of one minibatch (the
        gradients left in the parameters for the optimizer's step)."""
        loss, stats = self._loss(minibatch, clip_range, value_clip_range)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        return loss, stats, clip_grad_norm(self.parameters, max_norm)

    def _loss(
        self,
        minibatch: PolicyBatch,
        clip_range: torch.Tensor,
        value_clip_range: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Loss of one minibatch and its detached statistics (``_STAT_NAMES``)."""
        evaluation = PolicyEvaluation(
            *self.evaluator.evaluate(
                minibatch.observation,
                minibatch.action,
                minibatch.initial_state,
                minibatch.resets,
                **minibatch.extra_inputs,
            )
        )
        mask = minibatch.valid
        advantage, return_ = minibatch.advantage, minibatch.return_
        old_log_prob, old_value = minibatch.old_log_prob, minibatch.old_value
        if mask is not None:
            # Zero stored data at invalid steps: masking the loss alone would
            # still let NaN there reach the gradients (0 * NaN).
            advantage, return_, old_log_prob, old_value = (
                torch.where(mask, x, torch.zeros((), dtype=x.dtype, device=x.device))
                for x in (advantage, return_, old_log_prob, old_value)
            )
        if self.normalize_advantage:
            advantage = _normalized(advantage, mask)

        log_ratio = evaluation.log_prob - old_log_prob
        ratio = log_ratio.exp()
        surrogate = torch.min(
            ratio * advantage,
            ratio.clamp(1.0 - clip_range, 1.0 + clip_range) * advantage,
        )
        policy_loss = -_masked_mean(surrogate, mask)

        value_error = (evaluation.value - return_).pow(2)
        if value_clip_range is not None:
            clipped_value = old_value + (evaluation.value - old_value).clamp(
                -value_clip_range, value_clip_range
            )
            value_error = torch.max(value_error, (clipped_value - return_).pow(2))
        value_loss = 0.5 * _masked_mean(value_error, mask)
        loss = policy_loss + self.value_loss_coef * value_loss
        if self.entropy_coef:
            entropy = _masked_mean(evaluation.entropy, mask)
            loss = loss - self.entropy_coef * entropy
        with torch.no_grad():
            if not self.entropy_coef:  # only a statistic: keep it off the graph
                entropy = _masked_mean(evaluation.entropy.detach(), mask)
            approx_kl = _masked_mean((ratio - 1.0) - log_ratio, mask)
            clipped = ((ratio - 1.0).abs() > clip_range).to(ratio.dtype)
            clip_fraction = _masked_mean(clipped, mask)
            stats = torch.stack(
                [
                    policy_loss.detach(),
                    value_loss.detach(),
                    entropy.detach(),
                    approx_kl,
                    clip_fraction,
                ]
            ).to(torch.float64)  # in the order of _STAT_NAMES
        return loss, stats
