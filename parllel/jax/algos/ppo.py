"""PPO whose whole update (every epoch and minibatch) is one compiled call."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from parllel.checkpoints.finite import check_finite_update
from parllel.errors import (
    ConfigError,
    ShapeError,
)
from parllel.jax.algos.optimizers import (
    clip_grad_norm,
    has_learning_rate,
    learning_rate_of,
    set_learning_rate,
)
from parllel.jax.algos.ppo_batch import (
    PolicyData,
    minibatch_permutations,
    read_policy_batch,
)
from parllel.jax.algos.ppo_math import (
    explained_variance,
    masked_mean,
    normalized_advantage,
)
from parllel.jax.models.params import load_params, params_to_numpy
from parllel.schedules import Schedule
from parllel.validation import check_ppo_options

__all__ = ["PPO"]


_STAT_NAMES = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")


class PPO:
    """PPO (clipped surrogate, optional value clipping, KL early stop), compiled whole.

    The semantics of the feed-forward :class:`parllel.torch.algos.PPO`. Each
    :meth:`optimize` runs every epoch and minibatch in one ``jax.lax.scan`` of
    one jitted call; schedules enter as arguments (no recompilation). A
    non-finite loss keeps the last finite weights and raises
    :class:`~parllel.errors.NonFiniteError`. Hyperparameters as the torch
    PPO's (see docs/jax.md).

    Example:
        >>> ppo = PPO(agent, adam(3e-4), learning_rate=linear_schedule(3e-4, 0.0),
        ...           total_updates=n_batches, seed=seeds.torch)
        >>> metrics = ppo.optimize(sample_tree)

    Args:
        agent: e.g. :class:`~parllel.jax.agents.ActorCriticAgent` (trained in place).
        optimizer: an optax transformation; with ``learning_rate`` it must keep
            its learning rate in its state (``optax.inject_hyperparams``).
        target_kl: skip the rest of the update once a minibatch's KL exceeds it.
        seed: seed of the minibatch order (e.g. ``seeds.torch``).

    Raises:
        ConfigError: an invalid hyperparameter.
    """

    def __init__(
        self,
        agent: Any,
        optimizer: optax.GradientTransformation,
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
        batch_shape: tuple[int, int] | None = None,
        total_updates: int | None = None,
        seed: int = 0,
    ) -> None:
        if not callable(getattr(agent, "evaluate", None)) or not hasattr(
            agent, "params"
        ):
            raise ConfigError(
                "agent must have params and evaluate(params, observation, action); "
                f"got {type(agent).__name__}"
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
        if batch_shape is not None and (batch_shape[0] * batch_shape[1]) % minibatches:
            raise ConfigError(
                f"batch_shape {tuple(batch_shape)}: T * B = "
                f"{batch_shape[0] * batch_shape[1]} is not divisible into "
                f"{minibatches} minibatches"
            )
        self.agent = agent
        self.optimizer = optimizer
        self.opt_state = optimizer.init(agent.params)
        if learning_rate is not None and not has_learning_rate(self.opt_state):
            raise ConfigError(
                "PPO(learning_rate=...) sets the optimizer's learning rate, which "
                "needs it in the optimizer state: build the optimizer with "
                "parllel.jax.algos.adam(...) or optax.inject_hyperparams, or "
                "leave learning_rate=None"
            )
        self.learning_rate = learning_rate
        self.clip_range = clip_range
        self.value_clip_range = value_clip_range
        self.value_loss_coef = float(value_loss_coef)
        self.entropy_coef = float(entropy_coef)
        self.max_grad_norm = (
            None
            if max_grad_norm is None or math.isinf(max_grad_norm)
            else float(max_grad_norm)
        )
        self.epochs = int(epochs)
        self.minibatches = int(minibatches)
        self.target_kl = target_kl
        self.normalize_advantage = bool(normalize_advantage)
        self.total_updates = total_updates
        self.updates_done = 0
        self.key = jax.random.key(int(seed))
        self._update = jax.jit(self._update_fn)

    # -- schedules and checkpoints ---------------------------------------------
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

    @staticmethod
    def _resolve(value: Any, progress: float) -> float | None:
        if value is None:
            return None
        return float(value(progress) if callable(value) else value)

    def state_dict(self) -> dict[str, Any]:
        """Checkpoint state (numpy leaves): optimizer state, update count, key."""
        return {
            "optimizer": params_to_numpy(self.opt_state),
            "updates_done": self.updates_done,
            "key": np.asarray(jax.random.key_data(self.key)),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.opt_state = load_params(self.opt_state, state["optimizer"], "optimizer")
        self.updates_done = int(state["updates_done"])
        self.key = jax.random.wrap_key_data(jnp.asarray(state["key"]))

    # -- the update ---------------------------------------------------------------
    def _data(self, batch: Mapping[str, Any]) -> PolicyData:
        """The batch's fields as numpy ``[T * B, ...]`` views (no copy)."""
        return read_policy_batch(batch, self.minibatches)

    def optimize(
        self,
        batch: Mapping[str, Any],
        progress: float | None = None,
        *,
        permutations: Any = None,
    ) -> dict[str, float]:
        """Run the PPO update on one batch (one compiled call).

        Args:
            batch: the sample tree (or a mapping of arrays) with
                ``OBSERVATION [T, B, ...]`` (no bootstrap row), ``ACTION``,
                ``ADVANTAGE``, ``RETURN``, ``AGENT_INFO.LOG_PROB`` and
                ``AGENT_INFO.VALUE``, optional ``VALID``.
            progress: training progress in ``[0, 1]`` for the schedules.
            permutations: optional ``[epochs, T * B]`` sample orders (see
                :func:`minibatch_permutations`) instead of the key's; the
                key is not advanced then.

        Returns:
            The torch PPO's metrics: ``policy_loss``, ``value_loss``,
            ``entropy``, ``approx_kl``, ``clip_fraction`` (means over the
            evaluated minibatches), ``grad_norm`` (mean over steps taken),
            ``explained_variance``, ``learning_rate``, ``clip_range``,
            ``epochs_run``, ``minibatch_updates``, ``early_stopped``.

        Raises:
            NonFiniteError: a loss or gradient norm was NaN or infinite.
        """
        progress = self._progress(progress)
        data = self._data(batch)
        samples = data.advantage.shape[0]
        clip_range = self._resolve(self.clip_range, progress)
        value_clip_range = self._resolve(self.value_clip_range, progress)
        learning_rate = self._resolve(self.learning_rate, progress)
        if permutations is not None:
            permutations = np.asarray(permutations, np.int32)
            if permutations.shape != (self.epochs, samples):
                raise ShapeError(
                    f"permutations must be [epochs, T * B] = "
                    f"{(self.epochs, samples)}; got {permutations.shape}"
                )
        key = self.key
        if permutations is None and self.minibatches > 1:
            self.key, key = jax.random.split(self.key)
        params, opt_state, out = self._update(
            self.agent.params,
            self.opt_state,
            key,
            data,
            learning_rate,
            clip_range,
            value_clip_range,
            permutations,
        )
        out = jax.device_get(out)  # the one host synchronization
        self.agent.params, self.opt_state = params, opt_state
        self.updates_done += 1
        metrics = self._metrics(out, clip_range)
        if bool(out["failed"]):
            check_finite_update(
                "PPO",
                self.updates_done - 1,
                loss=float(out["bad_loss"]),
                grad_norm=float(out["bad_grad_norm"]),
            )
        return metrics

    def _metrics(
        self, out: Mapping[str, Any], clip_range: float | None
    ) -> dict[str, float]:
        """The metrics of one update from the compiled call's host outputs
        (also read per run by :class:`~parllel.jax.algos.SeededPPO`)."""
        steps = int(out["steps"])
        evaluated = max(int(out["evaluated"]), 1)
        metrics = {
            name: float(total) / evaluated
            for name, total in zip(_STAT_NAMES, out["stats"])
        }
        metrics.update(
            grad_norm=float(out["grad_norm"]) / steps if steps else 0.0,
            explained_variance=float(out["explained_variance"]),
            learning_rate=float(out["learning_rate"]),
            clip_range=float(clip_range) if clip_range is not None else math.nan,
            epochs_run=steps / self.minibatches,
            minibatch_updates=float(steps),
            early_stopped=float(bool(out["early_stopped"])),
        )
        return metrics

    def _loss(
        self, params: Any, mb: PolicyData, clip_range: Any, value_clip_range: Any
    ) -> tuple[Any, Any]:
        evaluation = self.agent.evaluate(params, mb.observation, mb.action)
        mask = mb.valid
        advantage, return_, old_log_prob, old_value = (
            mb.advantage,
            mb.return_,
            mb.old_log_prob,
            mb.old_value,
        )
        if mask is not None:
            advantage, return_, old_log_prob, old_value = (
                jnp.where(mask, x, jnp.zeros((), x.dtype))
                for x in (advantage, return_, old_log_prob, old_value)
            )
        if self.normalize_advantage:
            advantage = normalized_advantage(advantage, mask)
        log_ratio = evaluation.log_prob - old_log_prob
        ratio = jnp.exp(log_ratio)
        surrogate = jnp.minimum(
            ratio * advantage,
            jnp.clip(ratio, 1.0 - clip_range, 1.0 + clip_range) * advantage,
        )
        policy_loss = -masked_mean(surrogate, mask)
        value_error = (evaluation.value - return_) ** 2
        if value_clip_range is not None:
            clipped_value = old_value + jnp.clip(
                evaluation.value - old_value, -value_clip_range, value_clip_range
            )
            value_error = jnp.maximum(value_error, (clipped_value - return_) ** 2)
        value_loss = 0.5 * masked_mean(value_error, mask)
        loss = policy_loss + self.value_loss_coef * value_loss
        entropy = masked_mean(evaluation.entropy, mask)
        if self.entropy_coef:
            loss = loss - self.entropy_coef * entropy
        ratio, log_ratio = jax.lax.stop_gradient((ratio, log_ratio))
        approx_kl = masked_mean((ratio - 1.0) - log_ratio, mask)
        clipped = (jnp.abs(ratio - 1.0) > clip_range).astype(ratio.dtype)
        stats = jax.lax.stop_gradient(
            jnp.stack(
                [
                    policy_loss,
                    value_loss,
                    entropy,
                    approx_kl,
                    masked_mean(clipped, mask),
                ]
            )
        )
        return loss, stats

    def _update_fn(
        self,
        params: Any,
        opt_state: Any,
        key: jax.Array,
        data: PolicyData,
        learning_rate: Any,
        clip_range: Any,
        value_clip_range: Any,
        permutations: Any,
    ) -> tuple[Any, Any, dict[str, Any]]:
        """The whole update: every epoch and minibatch in one ``lax.scan``."""
        samples = data.advantage.shape[0]
        size = samples // self.minibatches
        if learning_rate is not None:
            opt_state = set_learning_rate(opt_state, learning_rate)
        if self.minibatches == 1:  # the whole batch: order changes nothing
            order = jnp.broadcast_to(jnp.arange(samples), (self.epochs, samples))
        elif permutations is None:
            order = minibatch_permutations(key, self.epochs, samples)
        else:
            order = permutations
        indices = order.reshape(self.epochs * self.minibatches, size)
        grad_fn = jax.value_and_grad(self._loss, has_aux=True)
        early_stop = self.target_kl is not None
        zero = jnp.zeros((), jnp.float32)

        def step(carry: dict[str, Any], index: Any) -> tuple[dict[str, Any], None]:
            if self.minibatches == 1:
                minibatch = data
            else:
                minibatch = jax.tree.map(lambda leaf: jnp.take(leaf, index, 0), data)
            (loss, stats), grads = grad_fn(
                carry["params"], minibatch, clip_range, value_clip_range
            )
            grads, grad_norm = clip_grad_norm(grads, self.max_grad_norm)
            updates, new_opt_state = self.optimizer.update(
                grads, carry["opt_state"], carry["params"]
            )
            new_params = optax.apply_updates(carry["params"], updates)
            running = ~carry["stopped"]
            exceeded = stats[3] > self.target_kl if early_stop else jnp.zeros((), bool)
            finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
            take = running & ~exceeded & finite
            failed = running & ~exceeded & ~finite

            def pick(new: Any, old: Any) -> Any:
                return jax.tree.map(lambda n, o: jnp.where(take, n, o), new, old)

            carry = dict(
                params=pick(new_params, carry["params"]),
                opt_state=pick(new_opt_state, carry["opt_state"]),
                stopped=carry["stopped"] | exceeded | ~finite,
                early_stopped=carry["early_stopped"] | (running & exceeded),
                failed=carry["failed"] | failed,
                bad_loss=jnp.where(failed, loss, carry["bad_loss"]),
                bad_grad_norm=jnp.where(failed, grad_norm, carry["bad_grad_norm"]),
                stats=carry["stats"] + jnp.where(running, stats, 0.0),
                evaluated=carry["evaluated"] + running.astype(jnp.int32),
                grad_norm=carry["grad_norm"] + jnp.where(take, grad_norm, 0.0),
                steps=carry["steps"] + take.astype(jnp.int32),
            )
            return carry, None

        initial = dict(
            params=params,
            opt_state=opt_state,
            stopped=jnp.zeros((), bool),
            early_stopped=jnp.zeros((), bool),
            failed=jnp.zeros((), bool),
            bad_loss=zero,
            bad_grad_norm=zero,
            stats=jnp.zeros(len(_STAT_NAMES), jnp.float32),
            evaluated=jnp.zeros((), jnp.int32),
            grad_norm=zero,
            steps=jnp.zeros((), jnp.int32),
        )
        final, _ = jax.lax.scan(step, initial, indices)
        params, opt_state = final.pop("params"), final.pop("opt_state")
        final["explained_variance"] = explained_variance(
            data.old_value, data.return_, data.valid
        )
        final["learning_rate"] = (
            learning_rate_of(opt_state) if has_learning_rate(opt_state) else jnp.nan
        )
        return params, opt_state, final
