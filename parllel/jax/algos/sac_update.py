"""The compiled part of the JAX SAC: one update (critic, actor, alpha, polyak
target) as a pure function of the state, and ``K`` of them as a ``lax.scan``.

An update whose losses or gradient norms are not finite changes nothing, nor
does any later update of the same scan: the steps run in a branch taken only
when every checked value is finite, so the state can be donated (updated in
place) and still ends before the first bad update (docs/jax.md, "SAC")."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from parllel.jax.agents.sac_agent import SacAgent
from parllel.jax.algos.optimizers import clip_grad_norm
from parllel.jax.algos.replay_updates import ReplayArrays
from parllel.jax.algos.sac_setup import SacOptimizers

__all__ = ["CHECKED_METRICS", "SacState", "SacUpdate"]

CHECKED_METRICS = (
    "q1_loss", "q2_loss", "pi_loss", "alpha_loss", "critic_grad_norm", "actor_grad_norm"
)  # fmt: skip
"""The metrics whose non-finite value stops an update (and every later one)."""


class SacState(NamedTuple):
    """Everything one update reads and writes (a pytree of arrays)."""

    actor: Any
    critic: Any
    target_critic: Any
    log_alpha: Any
    actor_opt: Any
    critic_opt: Any
    alpha_opt: Any
    updates_done: Any


class SacUpdate:
    """SAC's update as pure functions of a :class:`SacState` (jit them).

    :meth:`update` is one gradient update (see
    :class:`~parllel.jax.algos.SAC`); :meth:`scan_with_keys` runs one per
    stacked batch, drawing each update's noise from a key, and
    :meth:`scan_with_noise` takes the noise given. Both return the scalar
    metrics of every update as rows of one array (columns in the order of
    :attr:`metric_names`) and the ``|TD error|`` of every sample.

    Args:
        agent: the :class:`~parllel.jax.agents.sac_agent.SacAgent` (its networks and
            distribution; its parameters are in the state).
        optimizers: the :class:`~parllel.jax.algos.SacOptimizers`.
        tau: polyak coefficient of the target update.
        target_entropy: alpha's target.
        learn_alpha: whether alpha steps.
        max_grad_norm: gradient-norm clip of actor and critic (None: none).
        policy_delay: critic updates per actor update (see SAC).
    """

    def __init__(
        self,
        agent: SacAgent,
        optimizers: SacOptimizers,
        *,
        tau: float,
        target_entropy: float,
        learn_alpha: bool,
        max_grad_norm: float | None,
        policy_delay: int,
    ) -> None:
        self.agent = agent
        self.optimizers = optimizers
        self.tau = tau
        self.target_entropy = target_entropy
        self.learn_alpha = learn_alpha
        self.max_grad_norm = max_grad_norm
        self.policy_delay = policy_delay
        self.metric_names: tuple[str, ...] = (
            "q1_loss", "q2_loss", "q1", "q2", "target_q", "alpha", "actor_stepped",
            "pi_loss", "entropy",
            *(("alpha_loss",) if learn_alpha else ()),
            *(() if max_grad_norm is None else ("critic_grad_norm", "actor_grad_norm")),
        )  # fmt: skip

    def _squashed(self, actor_params: Any, observation: Any, noise: Any) -> Any:
        """Reparameterized actions and log-probs with the standard-normal ``noise``."""
        distribution = self.agent.distribution
        dist_params = self.agent.dist_params(actor_params, observation)
        mean, log_std = distribution.gaussian.mean_and_log_std(dist_params)
        u = mean + jnp.exp(log_std) * noise
        log_prob = distribution._log_prob_pre_squash(u, dist_params)
        return distribution.squash(u), log_prob

    def _min_q(self, critic_params: Any, observation: Any, action: Any) -> Any:
        q = self.agent.q_values(critic_params, observation, action)  # [2, batch]
        return jnp.minimum(q[0], q[1])

    def _target_q(self, state: SacState, batch: ReplayArrays, noise: Any) -> Any:
        next_action, next_log_prob = self._squashed(
            state.actor, batch.next_observation, noise
        )
        q_next = self._min_q(state.target_critic, batch.next_observation, next_action)
        soft_value = q_next - jnp.exp(state.log_alpha) * next_log_prob
        not_terminated = 1.0 - batch.terminated.astype(soft_value.dtype)
        target = batch.reward + batch.discount * not_terminated * soft_value
        return jax.lax.stop_gradient(target)

    def _critic_loss(self, critic_params: Any, batch: ReplayArrays, target: Any) -> Any:
        q = self.agent.q_values(critic_params, batch.observation, batch.action)
        td = q - target  # [2, batch]
        losses = 0.5 * jnp.mean(batch.weights * jnp.square(td), axis=-1)
        return losses.sum(), (losses, q, td)

    def _actor_loss(
        self,
        actor_params: Any,
        log_alpha: Any,
        critic_params: Any,
        obs: Any,
        noise: Any,
    ) -> Any:
        action, log_prob = self._squashed(actor_params, obs, noise)
        q_new = self._min_q(jax.lax.stop_gradient(critic_params), obs, action)
        alpha = jnp.exp(jax.lax.stop_gradient(log_alpha))
        pi_loss = jnp.mean(alpha * log_prob - q_new)
        log_prob = jax.lax.stop_gradient(log_prob)
        alpha_loss = -jnp.mean(log_alpha * (log_prob + self.target_entropy))
        if not self.learn_alpha:
            alpha_loss = jnp.zeros_like(alpha_loss)
        return pi_loss + alpha_loss, (pi_loss, alpha_loss, -jnp.mean(log_prob))

    @staticmethod
    def _step(optimizer: Any, grads: Any, opt_state: Any, params: Any) -> Any:
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    def _polyak(self, target: Any, online: Any) -> Any:
        """The target critic moved ``tau`` of the way to the online one."""
        tau = self.tau
        return jax.tree.map(lambda t, c: t + tau * (c - t), target, online)

    def _critic_grads(
        self, state: SacState, batch: ReplayArrays, noise: Any, metrics: dict[str, Any]
    ) -> Any:
        """The twin critics' (clipped) gradients; their metrics into ``metrics``."""
        target = self._target_q(state, batch, noise)
        grads, (losses, q, td) = jax.grad(self._critic_loss, has_aux=True)(
            state.critic, batch, target
        )
        if self.max_grad_norm is not None:
            grads, metrics["critic_grad_norm"] = clip_grad_norm(
                grads, self.max_grad_norm
            )
        q_mean = q.mean(axis=-1)
        metrics.update(
            q1_loss=losses[0],
            q2_loss=losses[1],
            q1=q_mean[0],
            q2=q_mean[1],
            target_q=target.mean(),
            td_error=0.5 * (jnp.abs(td[0]) + jnp.abs(td[1])),
        )
        return grads

    def _actor_grads(
        self, parts: tuple[Any, Any, Any, Any], critic: Any, obs: Any, noise: Any
    ) -> tuple[tuple[Any, Any], dict[str, Any]]:
        """The actor's (clipped) and ``log_alpha``'s gradients, and their metrics."""
        actor, log_alpha = parts[:2]
        grad_fn = jax.grad(self._actor_loss, argnums=(0, 1), has_aux=True)
        (actor_grads, alpha_grad), (pi_loss, alpha_loss, entropy) = grad_fn(
            actor, log_alpha, critic, obs, noise
        )
        metrics = dict(pi_loss=pi_loss, entropy=entropy)
        if self.learn_alpha:
            metrics["alpha_loss"] = alpha_loss
        if self.max_grad_norm is not None:
            actor_grads, metrics["actor_grad_norm"] = clip_grad_norm(
                actor_grads, self.max_grad_norm
            )
        return (actor_grads, alpha_grad), metrics

    def _actor_apply(
        self, parts: tuple[Any, Any, Any, Any], grads: tuple[Any, Any]
    ) -> tuple[Any, Any, Any, Any]:
        """Actor's and alpha's optimizer steps on ``grads``."""
        actor, log_alpha, actor_opt, alpha_opt = parts
        actor_grads, alpha_grad = grads
        actor, actor_opt = self._step(
            self.optimizers.actor, actor_grads, actor_opt, actor
        )
        if self.learn_alpha:
            log_alpha, alpha_opt = self._step(
                self.optimizers.alpha, alpha_grad, alpha_opt, log_alpha
            )
        return actor, log_alpha, actor_opt, alpha_opt

    def update(
        self, state: SacState, batch: ReplayArrays, noise: Any, healthy: Any = True
    ) -> tuple[SacState, Any, tuple[Any, Any]]:
        """One update; ``noise [1 + policy_delay, batch, A]``: the target's, then
        each actor step's. Unless ``healthy`` and every checked loss and
        gradient norm is finite, the state stays as it was.

        Returns:
            The new state, whether it is still healthy, and ``(the scalar
            metrics as a vector in metric_names' order, |TD error| [batch])``.
        """
        metrics: dict[str, Any] = {}
        parts = (state.actor, state.log_alpha, state.actor_opt, state.alpha_opt)
        if self.policy_delay == 1:
            # every loss on the parameters before this step, so every gradient
            # and the finite check come before the first write
            actor_grads, actor_metrics = self._actor_grads(
                parts, state.critic, batch.observation, noise[1]
            )
            critic_grads = self._critic_grads(state, batch, noise[0], metrics)
            keep = jnp.logical_and(healthy, _all_finite(metrics, actor_metrics))

            def apply(operands: Any) -> Any:
                parts, critic, critic_opt, target_critic = operands
                parts = self._actor_apply(parts, actor_grads)
                critic, critic_opt = self._step(
                    self.optimizers.critic, critic_grads, critic_opt, critic
                )
                return parts, critic, critic_opt, self._polyak(target_critic, critic)

            # a branch, not a select: a donated state is written in place
            parts, critic, critic_opt, target_critic = jax.lax.cond(
                keep,
                apply,
                lambda operands: operands,
                (parts, state.critic, state.critic_opt, state.target_critic),
            )
            stepped = jnp.asarray(True)
        else:
            # the actor's losses read the stepped critic: select afterwards
            critic_grads = self._critic_grads(state, batch, noise[0], metrics)
            critic, critic_opt = self._step(
                self.optimizers.critic, critic_grads, state.critic_opt, state.critic
            )
            stepped = state.updates_done % self.policy_delay == 0

            def actor_steps(parts: Any) -> Any:
                def one(carry: Any, step_noise: Any) -> Any:
                    grads, step_metrics = self._actor_grads(
                        carry, critic, batch.observation, step_noise
                    )
                    return self._actor_apply(carry, grads), step_metrics

                parts, history = jax.lax.scan(one, parts, noise[1:])
                return parts, jax.tree.map(lambda x: x[-1], history)

            def skip(parts: Any) -> Any:
                shapes = jax.eval_shape(actor_steps, parts)[1]
                return parts, jax.tree.map(
                    lambda s: jnp.zeros(s.shape, s.dtype), shapes
                )

            parts, actor_metrics = jax.lax.cond(stepped, actor_steps, skip, parts)
            keep = jnp.logical_and(healthy, _all_finite(metrics, actor_metrics))
            parts = _select(
                keep, parts, (state.actor, state.log_alpha, state.actor_opt,
                              state.alpha_opt),
            )  # fmt: skip
            critic, critic_opt, target_critic = _select(
                keep,
                (critic, critic_opt, self._polyak(state.target_critic, critic)),
                (state.critic, state.critic_opt, state.target_critic),
            )
        actor, log_alpha, actor_opt, alpha_opt = parts
        metrics.update(actor_metrics)
        metrics.update(alpha=jnp.exp(log_alpha), actor_stepped=stepped)
        td_error = metrics.pop("td_error")
        # the scalars as one vector: one transfer to the host per call
        vector = jnp.stack(
            [jnp.asarray(metrics[n], jnp.float32) for n in self.metric_names]
        )
        new_state = SacState(
            actor,
            critic,
            target_critic,
            log_alpha,
            actor_opt,
            critic_opt,
            alpha_opt,
            state.updates_done + keep.astype(state.updates_done.dtype),
        )
        return new_state, keep, (vector, td_error)

    def _noise_shape(self, batch: ReplayArrays) -> tuple[int, ...]:
        batch_size = batch.reward.shape[-1]
        return (1 + self.policy_delay, batch_size, self.agent.action_dim)

    def scan_with_noise(
        self, state: SacState, batches: ReplayArrays, noise: Any
    ) -> Any:
        """``K`` updates on ``batches [K, ...]`` with ``noise [K, ...]``:
        ``(state, (vectors [K, metrics], td_errors [K, batch]))``."""
        return self._scan(state, (batches, noise), lambda inputs: inputs[1])

    def scan_with_keys(self, state: SacState, batches: ReplayArrays, key: Any) -> Any:
        """``K`` updates on ``batches [K, ...]``, noise drawn from ``key``:
        ``(state, (vectors, td_errors), the next key)``."""
        count = batches.reward.shape[0]
        key, *keys = jax.random.split(key, count + 1)
        shape = self._noise_shape(batches)
        state, metrics = self._scan(
            state,
            (batches, jnp.stack(keys)),
            lambda inputs: jax.random.normal(inputs[1], shape, jnp.float32),
        )
        return state, metrics, key

    def _scan(self, state: SacState, inputs: Any, noise_of: Any) -> Any:
        """The updates as one ``lax.scan`` over ``(batch, ...)`` inputs; once
        an update is not finite, it and every later one leave the state."""

        def body(carry: Any, step_inputs: Any) -> Any:
            state, healthy, out = self.update(
                carry[0], step_inputs[0], noise_of(step_inputs), carry[1]
            )
            return (state, healthy), out

        (state, _), metrics = jax.lax.scan(body, (state, jnp.asarray(True)), inputs)
        return state, metrics


def _select(keep: Any, new: Any, old: Any) -> Any:
    """``new`` where ``keep``, else ``old``, leaf by leaf."""
    return jax.tree.map(lambda a, b: jnp.where(keep, a, b), new, old)


def _all_finite(*metric_dicts: dict[str, Any]) -> Any:
    """Whether every checked loss and gradient norm in the dicts is finite."""
    checked = [
        jnp.isfinite(metrics[name])
        for metrics in metric_dicts
        for name in CHECKED_METRICS
        if name in metrics
    ]
    return jnp.stack(checked).all()
