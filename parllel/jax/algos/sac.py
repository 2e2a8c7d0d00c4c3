"""Soft Actor-Critic in JAX: every update of an ``optimize`` call in one
compiled ``lax.scan`` (critic, actor, alpha and target update per step)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from parllel.errors import CheckpointMismatchError, ConfigError, NonFiniteError
from parllel.jax.agents.sac_agent import SacAgent
from parllel.jax.algos.replay_updates import ReplayArrays, run_update_calls
from parllel.jax.algos.sac_setup import (
    EntropyCoefficient,
    SacOptimizers,
    build_sac_optimizers,
)
from parllel.jax.algos.sac_update import CHECKED_METRICS, SacState, SacUpdate
from parllel.jax.models.params import load_params, params_to_numpy
from parllel.replays.updates import Replay, UpdateCount, takes_priorities
from parllel.seeding import check_seed
from parllel.validation import check_count, check_fraction, check_positive

__all__ = ["SAC", "EntropyCoefficient", "build_sac_optimizers"]

_TAG = 0x5AC  # folded into the seed's key: SAC's noise, not the agent's init
_ACTOR_METRICS = ("pi_loss", "alpha_loss", "entropy", "actor_grad_norm")


class SAC:
    """Soft Actor-Critic over batches sampled from a replay, compiled whole.

    The algorithm of :class:`parllel.torch.algos.SAC`. One :meth:`optimize`
    call samples its ``K`` batches on the host and runs the ``K`` updates as
    one jitted ``lax.scan``; the noise comes from :attr:`key`, so a seed gives
    the same run bit for bit (see docs/jax.md, "SAC").

    Example:
        >>> agent = build_sac_agent(obs_space, action_space, seed=seeds.torch)
        >>> sac = SAC(agent, build_sac_optimizers(3e-4), EntropyCoefficient(1.0),
        ...           seed=seeds.torch, replay_ratio=1.0)
        >>> metrics = sac.optimize(replay, new_steps=T * B)

    Args:
        agent: the :class:`~parllel.jax.agents.SacAgent` (trained in place).
        alpha: an :class:`EntropyCoefficient`, or a float for a fixed alpha.
        seed: seed of the reparameterization noise (e.g. ``seeds.torch``).
        target_entropy: default ``-action_dim``.
        replay_ratio: gradient updates per env step (or ``updates_per_optimize``).
        policy_delay: ``d``: actor and alpha take ``d`` steps every ``d``-th update.

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
        self.program = SacUpdate(
            agent,
            optimizers,
            tau=self.tau,
            target_entropy=self.target_entropy,
            learn_alpha=self.learn_alpha,
            max_grad_norm=self.max_grad_norm,
            policy_delay=self.policy_delay,
        )
        # the state is donated: updated in place, as the last call's outputs
        self._with_keys = jax.jit(self.program.scan_with_keys, donate_argnums=0)
        self._with_noise = jax.jit(self.program.scan_with_noise, donate_argnums=0)
        self._owned: SacState | None = None
        names = self.program.metric_names
        self._checked_columns = [
            i for i, name in enumerate(names) if name in CHECKED_METRICS
        ]

    @property
    def alpha(self) -> float:
        """The current entropy coefficient."""
        return float(jnp.exp(self.log_alpha))

    # -- the host side ---------------------------------------------------------
    def _state(self) -> SacState:
        """The state the next call donates: the last call's own outputs, or a
        copy where anything else was set (a loaded checkpoint, new weights), so
        arrays the caller holds stay valid and no buffer is donated twice."""
        actor_opt, critic_opt, alpha_opt = self.opt_states
        state = SacState(
            self.agent.actor_params,
            self.agent.critic_params,
            self.target_critic,
            self.log_alpha,
            actor_opt,
            critic_opt,
            alpha_opt,
            np.int32(self.updates_done),
        )
        owned = self._owned
        if owned is None or any(a is not b for a, b in zip(state[:7], owned[:7])):
            state = jax.tree.map(lambda leaf: jnp.array(leaf, copy=True), state)
        return state

    def _keep(self, state: SacState) -> None:
        """Make a call's output state the current one (agent, target, optimizers)."""
        self._owned = state
        self.agent.actor_params, self.agent.critic_params = state[:2]
        self.target_critic, self.log_alpha = state[2:4]
        self.opt_states = tuple(state[4:7])

    def update_batches(
        self, batches: ReplayArrays, noise: Any = None
    ) -> dict[str, Any]:
        """Run ``K`` updates on stacked ``[K, batch, ...]`` batches in one call.

        Args:
            batches: replay batches stacked ``[K, batch, ...]``
                (``ReplayArrays.stack(batches, np.float32)``).
            noise: optional standard-normal reparameterization noise
                ``[K, 1 + policy_delay, batch, A]`` (row 0 the target's, then
                each actor step's); default drawn from :attr:`key`.

        Returns:
            The per-update metrics as numpy arrays ``[K]`` (``td_error``
            ``[K, batch]``, ``actor_stepped`` whether the actor stepped).

        Raises:
            NonFiniteError: a loss or gradient norm is NaN or infinite; that
                update and every later one of the call are not kept (the
                parameters, optimizer states and counters are those before it).
        """
        return self._metrics(*self._update(batches, noise))

    def _update(
        self, batches: ReplayArrays, noise: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`update_batches`' work: the metrics as host arrays (``[K,
        metrics]`` in ``program.metric_names``' order, ``|TD error| [K,
        batch]``), checked finite, then the new state kept. The hot path of
        :meth:`optimize`: few host operations, as caches are cold after the
        compiled call."""
        state = self._state()
        if noise is None:
            new_state, metrics, key = self._with_keys(state, batches, self.key)
        else:
            new_state, metrics = self._with_noise(state, batches, noise)
            key = self.key
        self._keep(new_state)  # donated: the old state is gone either way
        vectors, td_errors = (np.asarray(metric) for metric in metrics)
        checked = vectors[:, self._checked_columns]
        if not np.isfinite(checked).all():
            # the program kept the state before the first bad update
            first = int(np.flatnonzero(~np.isfinite(checked).all(axis=1))[0])
            try:
                self._check_finite(self._metrics(vectors, td_errors))
            finally:
                self.updates_done += first
        self.key = key
        self.updates_done += len(vectors)
        self.last_td_error = td_errors[-1]
        return vectors, td_errors

    def _metrics(self, vectors: np.ndarray, td_errors: np.ndarray) -> dict[str, Any]:
        """Per-update metrics by name from :meth:`_update`'s arrays."""
        metrics: dict[str, Any] = {
            name: vectors[:, i] for i, name in enumerate(self.program.metric_names)
        }
        metrics["actor_stepped"] = metrics["actor_stepped"] != 0
        metrics["td_error"] = td_errors
        return metrics

    def _check_finite(self, metrics: Mapping[str, np.ndarray]) -> None:
        names = [name for name in CHECKED_METRICS if name in metrics]
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
        raise NonFiniteError(
            f"SAC update {self.updates_done + first}: non-finite {shown}. It and "
            "any later update of the call were not kept, so the weights are those "
            "before it, and "
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
        names = self.program.metric_names
        if not takes_priorities(replay):  # one call, no per-update dict
            batches = [replay.sample() for _ in range(count)]
            vectors, _ = self._update(ReplayArrays.stack(batches, np.float32))
            return _mean_metrics(names, vectors)
        metrics = run_update_calls(
            replay,
            count,
            lambda batches: self.update_batches(
                ReplayArrays.stack(batches, np.float32)
            ),
        )
        return _mean_metrics(names, np.stack([metrics[n] for n in names], axis=1))

    # -- checkpoints -------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Optimizer states, target critic, ``log_alpha``, key, counters (not
        the agent); numpy leaves."""
        return {
            "optimizers": {
                name: [np.array(leaf, copy=True) for leaf in jax.tree.leaves(opt_state)]
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


def _mean_metrics(names: Sequence[str], table: np.ndarray) -> dict[str, float]:
    """Means over the updates (rows) of a ``[K, metrics]`` table with columns
    ``names``, the actor's metrics over the updates where it stepped; one
    update's row is its own mean (this runs every env step)."""
    stepped = table[:, names.index("actor_stepped")] != 0
    if len(table) == 1:
        means = actor_means = table[0].tolist()
    else:
        means = table.mean(axis=0, dtype=np.float64).tolist()
        actor_means = (
            table[stepped].mean(axis=0, dtype=np.float64).tolist()
            if stepped.any()
            else means
        )
    result = {}
    for name, mean, actor_mean in zip(names, means, actor_means):
        if name == "actor_stepped":
            continue
        if name not in _ACTOR_METRICS:
            result[name] = float(mean)
        elif stepped.any():
            result[name] = float(actor_mean)
    result["updates"] = float(len(table))
    return result
