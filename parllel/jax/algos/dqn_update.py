"""The compiled part of the JAX DQN: one update (targets, Huber loss, optional
gradient clipping, the optimizer step, the target update) as a pure function
of the state, and ``K`` of them as a ``lax.scan``."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from parllel.jax.agents.dqn_agent import DqnAgent
from parllel.jax.algos.optimizers import clip_grad_norm
from parllel.jax.algos.replay_updates import ReplayArrays

__all__ = ["DqnState", "DqnUpdate", "huber"]

METRIC_NAMES = ("loss", "q", "target", "td_abs", "grad_norm")
"""The scalar metrics of an update, in the order of its metric vector."""


class DqnState(NamedTuple):
    """Everything one update reads and writes (a pytree of arrays)."""

    q: Any
    target_q: Any
    opt_state: Any
    updates_done: Any


def huber(error: Any, delta: float) -> Any:
    """torch's ``huber_loss`` of ``error`` elementwise: ``0.5 * e^2`` where
    ``|e| <= delta``, else ``delta * (|e| - 0.5 * delta)``; ``delta=inf`` is
    ``0.5 * e^2`` (finite gradients, unlike the general form)."""
    if math.isinf(delta):
        return 0.5 * jnp.square(error)
    abs_error = jnp.abs(error)
    quadratic = jnp.minimum(abs_error, delta)
    return 0.5 * jnp.square(quadratic) + delta * (abs_error - quadratic)


class DqnUpdate:
    """DQN's update as pure functions of a :class:`DqnState` (jit them).

    :meth:`update` is one gradient update (see
    :class:`~parllel.jax.algos.DQN`); :meth:`scan` runs one per stacked
    batch and returns the scalar metrics of every update as rows of one
    array (columns in the order of ``METRIC_NAMES``) and the ``|TD error|``
    of every sample, ``[K, batch]``.

    Args:
        agent: the :class:`~parllel.jax.agents.dqn_agent.DqnAgent` (its pure Q function).
        optimizer: the optax transformation of the Q-network's parameters.
        double_dqn: choose next actions with the online network.
        target_update_interval: hard target copy every this many updates
            (None with ``tau``).
        tau: or the polyak coefficient per update.
        huber_delta: threshold of the Huber loss (``inf``: half the squared error).
        max_grad_norm: gradient-norm clip (None: measured, not clipped).
    """

    def __init__(
        self,
        agent: DqnAgent,
        optimizer: optax.GradientTransformation,
        *,
        double_dqn: bool,
        target_update_interval: int | None,
        tau: float | None,
        huber_delta: float,
        max_grad_norm: float | None,
    ) -> None:
        self.agent = agent
        self.optimizer = optimizer
        self.double_dqn = double_dqn
        self.target_update_interval = target_update_interval
        self.tau = tau
        self.huber_delta = huber_delta
        self.max_grad_norm = max_grad_norm

    def _targets(self, state: DqnState, batch: ReplayArrays) -> Any:
        """``y = r + discount * (1 - terminated) * Q_targ(s', a*)``, ``[batch]``."""
        next_target_q = self.agent.q_values(state.target_q, batch.next_observation)
        if self.double_dqn:
            online = self.agent.q_values(state.q, batch.next_observation)
            next_action = jnp.argmax(online, axis=-1)[..., None]
            next_q = jnp.take_along_axis(next_target_q, next_action, axis=-1)[..., 0]
        else:
            next_q = jnp.max(next_target_q, axis=-1)
        not_terminated = 1.0 - batch.terminated.astype(next_q.dtype)
        target = batch.reward + batch.discount * not_terminated * next_q
        return jax.lax.stop_gradient(target)

    def _loss(self, q_params: Any, batch: ReplayArrays, target: Any) -> Any:
        q_all = self.agent.q_values(q_params, batch.observation)
        action = batch.action.reshape(q_all.shape[:-1])[..., None]
        q = jnp.take_along_axis(q_all, action, axis=-1)[..., 0]
        losses = huber(q - target, self.huber_delta)
        return jnp.mean(batch.weights * losses), q

    def _target_update(self, target_q: Any, q: Any, updates_done: Any) -> Any:
        if self.tau is not None:
            tau = self.tau
            return jax.tree.map(lambda t, p: t + tau * (p - t), target_q, q)
        copy = updates_done % self.target_update_interval == 0
        return jax.tree.map(lambda t, p: jnp.where(copy, p, t), target_q, q)

    def update(
        self, state: DqnState, batch: ReplayArrays
    ) -> tuple[DqnState, tuple[Any, Any]]:
        """One update: the new state and ``(metric vector, |TD error| [batch])``."""
        target = self._targets(state, batch)
        (loss, q), grads = jax.value_and_grad(self._loss, has_aux=True)(
            state.q, batch, target
        )
        grads, grad_norm = clip_grad_norm(grads, self.max_grad_norm)
        updates, opt_state = self.optimizer.update(grads, state.opt_state, state.q)
        q_params = optax.apply_updates(state.q, updates)
        updates_done = state.updates_done + 1
        target_q = self._target_update(state.target_q, q_params, updates_done)
        td_abs = jnp.abs(q - target)
        metrics = (loss, q.mean(), target.mean(), td_abs.mean(), grad_norm)
        vector = jnp.stack([jnp.asarray(m, jnp.float32) for m in metrics])
        new_state = DqnState(q_params, target_q, opt_state, updates_done)
        return new_state, (vector, td_abs)

    def scan(self, state: DqnState, batches: ReplayArrays) -> Any:
        """One :meth:`update` per ``[K, batch, ...]`` batch, as a ``lax.scan``."""
        return jax.lax.scan(self.update, state, batches)
