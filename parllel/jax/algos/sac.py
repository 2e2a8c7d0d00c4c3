"""Soft Actor-Critic in JAX: every update of an ``optimize`` call in one
compiled ``lax.scan`` (critic, actor, alpha and target update per step)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from parllel.errors import CheckpointMismatchError, ConfigError, NonFiniteLossError
from parllel.jax.agents.sac_agent import SacAgent
from parllel.jax.algos.optimizers import clip_grad_norm
from parllel.jax.algos.sac_setup import (
    EntropyCoefficient,
    SacOptimizers,
    build_sac_optimizers,
)
from parllel.jax.models.params import load_params, params_to_numpy
from parllel.replays.transitions import ReplayBatch
from parllel.replays.updates import Replay, UpdateCount, takes_priorities
from parllel.seeding import check_seed
from parllel.validation import check_count, check_fraction, check_positive

__all__ = ["SAC", "EntropyCoefficient", "SacBatch", "build_sac_optimizers"]

_TAG = 0x5AC  # folded into the seed's key: SAC's noise, not the agent's init
_ACTOR_METRICS = ("pi_loss", "alpha_loss", "entropy", "actor_grad_norm")
_CHECKED = ("q1_loss", "q2_loss", "pi_loss", "alpha_loss")


class SacBatch(NamedTuple):
    """The fields of a :class:`~parllel.replays.ReplayBatch` an update reads,
    ``[batch, ...]`` (or ``[K, batch, ...]`` for K updates)."""

    observation: Any
    action: Any
    reward: Any
    next_observation: Any
    terminated: Any
    discount: Any
    weights: Any

    @classmethod
    def from_replay(cls, batch: ReplayBatch) -> SacBatch:
        """The fields of a numpy ``ReplayBatch`` (float32 actions and rewards)."""
        return cls(
            batch.observation,
            np.asarray(batch.action, np.float32),
            np.asarray(batch.reward, np.float32),
            batch.next_observation,
            np.asarray(batch.terminated, bool),
            np.asarray(batch.discount, np.float32),
            np.asarray(batch.weights, np.float32),
        )

    @classmethod
    def stack(cls, batches: list[ReplayBatch]) -> SacBatch:
        """``K`` replay batches as one ``[K, batch, ...]`` batch."""
        return jax.tree.map(
            lambda *leaves: np.stack(leaves), *[cls.from_replay(b) for b in batches]
        )


class _State(NamedTuple):
    actor: Any
    critic: Any
    target_critic: Any
    log_alpha: Any
    actor_opt: Any
    critic_opt: Any
    alpha_opt: Any
    updates_done: Any


class SAC:
    """Soft Actor-Critic over batches sampled from a replay, compiled whole.

    The same algorithm as :class:`parllel.torch.algos.SAC` (see its
    docstring for the losses): twin critics (one batched network,
    :class:`~parllel.jax.agents.TwinQ`), a polyak-averaged target critic,
    automatic entropy tuning towards ``-action_dim``, ``policy_delay``,
    optional gradient-norm clipping, bootstrapping on truncation and not on
    termination. One :meth:`optimize` call samples its ``K`` batches from the
    replay on the host, stacks them ``[K, batch, ...]`` and runs the ``K``
    updates as one jitted ``lax.scan`` (one host synchronization per call,
    for the metrics). A prioritized replay gets its new priorities after
    every update instead (``K`` calls of one update).

    The reparameterization noise comes from :attr:`key` (split in the
    compiled call), so a seed gives the same run bit for bit.

    Example:
        >>> agent = build_sac_agent(obs_space, action_space, seed=seeds.torch)
        >>> sac = SAC(agent, build_sac_optimizers(3e-4), EntropyCoefficient(1.0),
        ...           seed=seeds.torch, replay_ratio=1.0)
        >>> metrics = sac.optimize(replay, new_steps=T * B)

    Args:
        agent: the :class:`~parllel.jax.agents.SacAgent` (its parameters are
            trained and written back after every call).
        optimizers: :class:`~parllel.jax.algos.SacOptimizers`
            (:func:`build_sac_optimizers`).
        alpha: an :class:`EntropyCoefficient`, or a float for a fixed alpha.
        seed: seed of the reparameterization noise (e.g. ``seeds.torch``; its
            key is folded with a tag of SAC's, so an agent initialized from
            the same seed draws other numbers).
        target_entropy: default ``-action_dim``.
        tau: polyak coefficient of the target update, in ``(0, 1]``.
        updates_per_optimize: fixed gradient updates per :meth:`optimize`.
        replay_ratio: or gradient updates per environment step.
        max_grad_norm: optional gradient-norm clip for actor and critic.
        policy_delay: 1: critic, actor and alpha step together on the same
            parameters; ``d > 1``: the critic steps every update, and every
            ``d``-th update the actor and alpha then take ``d`` steps.

    Raises:
        ConfigError: invalid hyperparameters.
    """

    def __init__(
        self,
        agent: SacAgent,
        optimizers: SacOptimizers,
        alpha: EntropyCoefficient | float | None = None,
        *,
        seed: int,
        target_entropy: float | None = None,
        tau: float = 0.005,
        updates_per_optimize: int | None = None,
        replay_ratio: float | None = None,
        max_grad_norm: float | None = None,
        policy_delay: int = 1,
    ) -> None:
        if not isinstance(agent, SacAgent):
            raise ConfigError(
                f"agent must be a parllel.jax SacAgent; got {type(agent).__name__}"
            )
        if not isinstance(optimizers, SacOptimizers):
            raise ConfigError(
                "optimizers must be SacOptimizers (build_sac_optimizers(learning_rate))"
            )
        if alpha is None:
            raise TypeError(
                "SAC() missing required argument: 'alpha' (an EntropyCoefficient, "
                "or a float for a fixed alpha)"
            )
        if not isinstance(alpha, EntropyCoefficient):
            alpha = EntropyCoefficient(float(alpha), learn=False)
        check_fraction("tau", tau, allow_zero=False)
        if max_grad_norm is not None:
            check_positive("max_grad_norm", max_grad_norm, allow_inf=True)
        self.policy_delay = check_count("policy_delay", policy_delay)
        self.agent = agent
        self.optimizers = optimizers
        self.update_count = UpdateCount(updates_per_optimize, replay_ratio)
        self.tau = float(tau)
        self.max_grad_norm = None if max_grad_norm is None else float(max_grad_norm)
        self.learn_alpha = bool(alpha.learn)
        self.target_entropy = (
            -float(agent.action_dim)
            if target_entropy is None
            else float(target_entropy)
        )
        self.key = jax.random.fold_in(jax.random.key(check_seed("seed", seed)), _TAG)
        self.target_critic = agent.critic_params
        self.log_alpha = jnp.asarray(alpha.initial_log_alpha, jnp.float32)
        self.opt_states: tuple[Any, Any, Any] = jax.jit(
            lambda *params: tuple(
                optimizer.init(p) for optimizer, p in zip(optimizers, params)
            )
        )(agent.actor_params, agent.critic_params, self.log_alpha)
        self.updates_done = 0
        self.last_td_error: np.ndarray | None = None
        self._metric_names = (
            "q1_loss", "q2_loss", "q1", "q2", "target_q", "alpha", "actor_stepped",
            "pi_loss", "entropy",
            *(("alpha_loss",) if self.learn_alpha else ()),
            *(() if max_grad_norm is None else ("critic_grad_norm", "actor_grad_norm")),
        )  # fmt: skip
        self._with_keys = jax.jit(self._scan_with_keys)
        self._with_noise = jax.jit(self._scan_with_noise)

    @property
    def alpha(self) -> float:
        """The current entropy coefficient."""
        return float(jnp.exp(self.log_alpha))

    # -- the compiled update ---------------------------------------------------
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

    def _target_q(self, state: _State, batch: SacBatch, noise: Any) -> Any:
        next_action, next_log_prob = self._squashed(
            state.actor, batch.next_observation, noise
        )
        q_next = self._min_q(state.target_critic, batch.next_observation, next_action)
        soft_value = q_next - jnp.exp(state.log_alpha) * next_log_prob
        not_terminated = 1.0 - batch.terminated.astype(soft_value.dtype)
        target = batch.reward + batch.discount * not_terminated * soft_value
        return jax.lax.stop_gradient(target)

    def _critic_loss(self, critic_params: Any, batch: SacBatch, target: Any) -> Any:
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

    def _critic_step(
        self, state: _State, batch: SacBatch, noise: Any, metrics: dict[str, Any]
    ) -> tuple[Any, Any, Any]:
        target = self._target_q(state, batch, noise)
        grads, (losses, q, td) = jax.grad(self._critic_loss, has_aux=True)(
            state.critic, batch, target
        )
        if self.max_grad_norm is not None:
            grads, metrics["critic_grad_norm"] = clip_grad_norm(
                grads, self.max_grad_norm
            )
        critic, critic_opt = self._step(
            self.optimizers.critic, grads, state.critic_opt, state.critic
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
        return critic, critic_opt, metrics

    def _actor_step(
        self, parts: tuple[Any, Any, Any, Any], critic: Any, obs: Any, noise: Any
    ) -> tuple[tuple[Any, Any, Any, Any], dict[str, Any]]:
        actor, log_alpha, actor_opt, alpha_opt = parts
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
        actor, actor_opt = self._step(
            self.optimizers.actor, actor_grads, actor_opt, actor
        )
        if self.learn_alpha:
            log_alpha, alpha_opt = self._step(
                self.optimizers.alpha, alpha_grad, alpha_opt, log_alpha
            )
        return (actor, log_alpha, actor_opt, alpha_opt), metrics

    def _update(
        self, state: _State, batch: SacBatch, noise: Any
    ) -> tuple[_State, tuple[Any, Any]]:
        """One update; ``noise [1 + policy_delay, batch, A]``: the target's, then
        each actor step's. Returns the new state and ``(the scalar metrics as a
        vector in the order of _metric_names, |TD error| [batch])``."""
        metrics: dict[str, Any] = {}
        parts = (state.actor, state.log_alpha, state.actor_opt, state.alpha_opt)
        if self.policy_delay == 1:
            # every loss on the parameters before this step, as one backward pass
            parts, actor_metrics = self._actor_step(
                parts, state.critic, batch.observation, noise[1]
            )
            critic, critic_opt, metrics = self._critic_step(
                state, batch, noise[0], metrics
            )
            stepped = jnp.asarray(True)
        else:
            critic, critic_opt, metrics = self._critic_step(
                state, batch, noise[0], metrics
            )
            stepped = state.updates_done % self.policy_delay == 0

            def actor_steps(parts: Any) -> Any:
                def one(carry: Any, step_noise: Any) -> Any:
                    return self._actor_step(
                        carry, critic, batch.observation, step_noise
                    )

                parts, history = jax.lax.scan(one, parts, noise[1:])
                return parts, jax.tree.map(lambda x: x[-1], history)

            def skip(parts: Any) -> Any:
                shapes = jax.eval_shape(actor_steps, parts)[1]
                return parts, jax.tree.map(
                    lambda s: jnp.zeros(s.shape, s.dtype), shapes
                )

            parts, actor_metrics = jax.lax.cond(stepped, actor_steps, skip, parts)
        actor, log_alpha, actor_opt, alpha_opt = parts
        tau = self.tau
        target_critic = jax.tree.map(
            lambda t, c: t + tau * (c - t), state.target_critic, critic
        )
        metrics.update(actor_metrics)
        metrics.update(alpha=jnp.exp(log_alpha), actor_stepped=stepped)
        td_error = metrics.pop("td_error")
        # the scalars as one vector: one transfer to the host per call
        vector = jnp.stack(
            [jnp.asarray(metrics[n], jnp.float32) for n in self._metric_names]
        )
        new_state = _State(
            actor,
            critic,
            target_critic,
            log_alpha,
            actor_opt,
            critic_opt,
            alpha_opt,
            state.updates_done + 1,
        )
        return new_state, (vector, td_error)

    def _noise_shape(self, batch: SacBatch) -> tuple[int, ...]:
        batch_size = batch.reward.shape[-1]
        return (1 + self.policy_delay, batch_size, self.agent.action_dim)

    def _scan_with_noise(self, state: _State, batches: SacBatch, noise: Any) -> Any:
        return jax.lax.scan(lambda s, x: self._update(s, *x), state, (batches, noise))

    def _scan_with_keys(self, state: _State, batches: SacBatch, key: Any) -> Any:
        count = batches.reward.shape[0]
        key, *keys = jax.random.split(key, count + 1)
        shape = self._noise_shape(batches)

        def body(state: _State, inputs: Any) -> Any:
            batch, step_key = inputs
            noise = jax.random.normal(step_key, shape, jnp.float32)
            return self._update(state, batch, noise)

        state, metrics = jax.lax.scan(body, state, (batches, jnp.stack(keys)))
        return state, metrics, key

    # -- the host side ---------------------------------------------------------
    def _state(self) -> _State:
        actor_opt, critic_opt, alpha_opt = self.opt_states
        return _State(
            self.agent.actor_params,
            self.agent.critic_params,
            self.target_critic,
            self.log_alpha,
            actor_opt,
            critic_opt,
            alpha_opt,
            np.int32(self.updates_done),
        )

    def update_batches(self, batches: SacBatch, noise: Any = None) -> dict[str, Any]:
        """Run ``K`` updates on stacked ``[K, batch, ...]`` batches in one call.

        Args:
            batches: a :class:`SacBatch` with a leading ``K`` dim
                (:meth:`SacBatch.stack`).
            noise: optional standard-normal reparameterization noise
                ``[K, 1 + policy_delay, batch, A]`` (row 0 the target's, then
                each actor step's); default drawn from :attr:`key`.

        Returns:
            The per-update metrics as numpy arrays ``[K]`` (``td_error``
            ``[K, batch]``, ``actor_stepped`` whether the actor stepped).

        Raises:
            NonFiniteLossError: a loss or gradient norm is NaN or infinite;
                nothing of this call is kept (parameters, optimizer states and
                counters are those before it).
        """
        state = self._state()
        if noise is None:
            new_state, metrics, key = self._with_keys(state, batches, self.key)
        else:
            new_state, metrics = self._with_noise(state, batches, noise)
            key = self.key
        vectors, td_errors = jax.device_get(metrics)
        metrics = {name: vectors[:, i] for i, name in enumerate(self._metric_names)}
        metrics["actor_stepped"] = metrics["actor_stepped"] != 0
        metrics["td_error"] = td_errors
        self._check_finite(metrics)
        self.key = key
        self.agent.actor_params, self.agent.critic_params = new_state[:2]
        self.target_critic, self.log_alpha = new_state[2:4]
        self.opt_states = tuple(new_state[4:7])
        self.updates_done += int(metrics["alpha"].shape[0])
        self.last_td_error = metrics["td_error"][-1]
        return metrics

    def _check_finite(self, metrics: Mapping[str, np.ndarray]) -> None:
        names = [
            name
            for name in (*_CHECKED, "critic_grad_norm", "actor_grad_norm")
            if name in metrics
        ]
        bad = {
            name: np.flatnonzero(~np.isfinite(metrics[name]))
            for name in names
            if not np.isfinite(metrics[name]).all()
        }
        if not bad:
            return
        first = min(int(where[0]) for where in bad.values())
        terms = tuple(name for name, where in bad.items() if first in where)
        shown = ", ".join(f"{name} = {metrics[name][first]}" for name in terms)
        raise NonFiniteLossError(
            f"SAC update {self.updates_done + first}: non-finite {shown}. This "
            "call's updates were not kept, so the weights are those before it, and "
            "the newest checkpoint on disk is the last good one. Usual causes: "
            "NaN/inf in the batch, a learning rate that makes the weights "
            "diverge, log(0) or x/0 in a custom model",
            terms=terms,
        )

    def optimize(
        self, replay: Replay, new_steps: int | None = None
    ) -> dict[str, float]:
        """Run this call's updates; return their mean metrics and ``updates``.

        ``new_steps``: environment steps since the last call (needed with a
        ``replay_ratio``). The metrics are :class:`parllel.torch.algos.SAC`'s
        (``q1_loss``, ``q2_loss``, ``q1``, ``q2``, ``target_q``, ``alpha``;
        ``pi_loss``, ``alpha_loss``, ``entropy`` averaged over the updates
        where the actor stepped; the gradient norms with ``max_grad_norm``).
        """
        count = self.update_count(new_steps)
        if count == 0:
            return {"updates": 0.0}
        if takes_priorities(replay):
            history = []
            for _ in range(count):
                batch = replay.sample()
                history.append(self.update_batches(SacBatch.stack([batch])))
                assert self.last_td_error is not None
                replay.update_priorities(batch.indices, self.last_td_error)
            metrics = {k: np.concatenate([h[k] for h in history]) for k in history[0]}
        else:
            batches = SacBatch.stack([replay.sample() for _ in range(count)])
            metrics = self.update_batches(batches)
        return _mean_metrics(metrics)

    # -- checkpoints -------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Optimizer states, target critic, ``log_alpha``, key, counters (not
        the agent); numpy leaves."""
        return {
            "optimizers": {
                name: [np.asarray(leaf) for leaf in jax.tree.leaves(opt_state)]
                for name, opt_state in zip(SacOptimizers._fields, self.opt_states)
            },
            "target_critic": params_to_numpy(self.target_critic),
            "log_alpha": np.asarray(self.log_alpha),
            "key": np.asarray(jax.random.key_data(self.key)),
            "updates_done": self.updates_done,
            "update_count": self.update_count.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`.

        Raises:
            CheckpointMismatchError: other structures or shapes.
        """
        opt_states = []
        for name, current in zip(SacOptimizers._fields, self.opt_states):
            leaves, treedef = jax.tree.flatten(current)
            saved = state["optimizers"][name]
            if len(saved) != len(leaves) or any(
                np.shape(a) != np.shape(b) for a, b in zip(saved, leaves)
            ):
                raise CheckpointMismatchError(
                    f"the saved {name} optimizer state does not fit this SAC's"
                )
            opt_states.append(
                jax.tree.unflatten(
                    treedef,
                    [
                        jnp.asarray(a, jnp.asarray(b).dtype)
                        for a, b in zip(saved, leaves)
                    ],
                )
            )
        self.opt_states = tuple(opt_states)
        self.target_critic = load_params(
            self.target_critic, state["target_critic"], "target critic"
        )
        self.log_alpha = jnp.asarray(state["log_alpha"], jnp.float32)
        self.key = jax.random.wrap_key_data(jnp.asarray(state["key"]))
        self.updates_done = int(state["updates_done"])
        self.update_count.load_state_dict(state["update_count"])


def _mean_metrics(metrics: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Means over the updates, actor metrics over those where the actor stepped."""
    stepped = np.asarray(metrics["actor_stepped"], bool)
    means = {}
    for name, values in metrics.items():
        if name in ("actor_stepped", "td_error"):
            continue
        if name in _ACTOR_METRICS:
            if not stepped.any():
                continue
            values = values[stepped]
        means[name] = float(np.mean(values, dtype=np.float64))
    means["updates"] = float(len(stepped))
    return means
