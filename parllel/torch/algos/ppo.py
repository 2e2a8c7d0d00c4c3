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
from parllel.torch.algos.ppo_loss import (
    STAT_NAMES,
    clipped_surrogate_loss,
    explained_variance,
)
from parllel.torch.algos.vtrace_correction import VTraceCorrection
from parllel.torch.utils import check_device, numpy_to_torch_tree
from parllel.validation import check_ppo_options

__all__ = ["PPO"]


class PPO:
    """PPO with clipped surrogate, optional value clipping and KL early stopping.

    Each :meth:`optimize` runs ``epochs`` passes over one batch, each split
    into ``minibatches`` shuffled minibatches (whole env columns with
    ``recurrent=True``), one optimizer step per minibatch. The loss, masks,
    schedules, V-trace ``correction``, ``compile`` and every option are
    described in docs/torch.md ("PPO").

    Example:
        >>> ppo = PPO(ActorCriticEvaluator(model, distribution),
        ...           torch.optim.Adam(model.parameters(), lr=3e-4),
        ...           epochs=4, minibatches=4, target_kl=0.02)
        >>> metrics = ppo.optimize(numpy_to_torch_tree(sample_tree))

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
        check_ppo_options(
            learning_rate=learning_rate,
            clip_range=clip_range,
            value_clip_range=value_clip_range,
            value_loss_coef=value_loss_coef,
            entropy_coef=entropy_coef,
            max_grad_norm=max_grad_norm,
            target_kl=target_kl,
            epochs=epochs,
            minibatches=minibatches,
            total_updates=total_updates,
        )
        if correction is not None and not isinstance(correction, VTraceCorrection):
            raise ConfigError(
                "correction must be None or a VTraceCorrection (e.g. "
                f"VTraceCorrection(gamma=0.99, trace_lambda=0.95)); got {correction!r}"
            )
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
        metrics = dict(zip(STAT_NAMES, means))
        metrics.update(
            grad_norm=float(torch.stack(grad_norms).mean()) if steps else 0.0,
            explained_variance=explained_variance(
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
        """Loss of one minibatch and its detached statistics (``STAT_NAMES``)."""
        evaluation = PolicyEvaluation(
            *self.evaluator.evaluate(
                minibatch.observation,
                minibatch.action,
                minibatch.initial_state,
                minibatch.resets,
                **minibatch.extra_inputs,
            )
        )
        return clipped_surrogate_loss(
            evaluation,
            minibatch,
            clip_range,
            value_clip_range,
            value_loss_coef=self.value_loss_coef,
            entropy_coef=self.entropy_coef,
            normalize_advantage=self.normalize_advantage,
        )
