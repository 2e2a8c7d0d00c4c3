"""Deep Q-learning in JAX: every update of an ``optimize`` call in one
compiled ``lax.scan`` (targets, loss, optimizer step, target update per step)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from parllel.errors import ConfigError, NonFiniteError
from parllel.jax.agents.dqn_agent import DqnAgent
from parllel.jax.algos.dqn_update import METRIC_NAMES, DqnState, DqnUpdate
from parllel.jax.algos.replay_updates import ReplayArrays, run_update_calls
from parllel.jax.models.encoders import is_image_encoder
from parllel.jax.models.params import load_params, params_to_numpy
from parllel.replays.transitions import ReplayBatch
from parllel.replays.updates import Replay, UpdateCount
from parllel.validation import check_positive, check_target_update

__all__ = ["DQN"]

_CHECKED = ("loss", "grad_norm")


class DQN:
    """Deep Q-learning over batches sampled from a replay, compiled whole.

    The algorithm and options of :class:`parllel.torch.algos.DQN`. One
    :meth:`optimize` call samples its ``K`` batches on the host and runs the
    ``K`` updates as one jitted ``lax.scan`` (one host synchronization); how and
    when it does not scan: docs/jax.md ("DQN").

    Example:
        >>> agent = build_dqn_agent(obs_space, action_space, seed=seeds.torch)
        >>> dqn = DQN(agent, adam(1e-3), target_update_interval=500, replay_ratio=0.5)
        >>> metrics = dqn.optimize(replay, new_steps=T * B)

    Args:
        agent: the :class:`~parllel.jax.agents.DqnAgent` (trained in place).
        optimizer: an optax transformation (e.g. :func:`~parllel.jax.algos.adam`).
        target_update_interval: hard target update every this many updates
            (default 1000 when ``tau`` is not given).
        tau: or polyak coefficient per update (exclusive with the interval).
        replay_ratio: gradient updates per env step (or ``updates_per_optimize``).
        scan: one ``lax.scan`` per call (None: unless a CNN runs on the CPU).

    Raises:
        ConfigError: invalid hyperparameters, another agent or optimizer.
    """

    def __init__(
        self,
        agent: DqnAgent,
        optimizer: optax.GradientTransformation,
        *,
        double_dqn: bool = True,
        target_update_interval: int | None = None,
        tau: float | None = None,
        huber_delta: float = 1.0,
        max_grad_norm: float | None = 10.0,
        updates_per_optimize: int | None = None,
        replay_ratio: float | None = None,
        scan: bool | None = None,
    ) -> None:
        if not isinstance(agent, DqnAgent):
            raise ConfigError(
                f"agent must be a parllel.jax DqnAgent; got {type(agent).__name__}"
            )
        if not isinstance(optimizer, optax.GradientTransformation):
            raise ConfigError(
                "optimizer must be an optax GradientTransformation (e.g. "
                f"parllel.jax.algos.adam(1e-3)); got {type(optimizer).__name__}"
            )
        target_update_interval = check_target_update(target_update_interval, tau)
        check_positive("huber_delta", huber_delta, allow_inf=True)
        if max_grad_norm is not None:
            check_positive("max_grad_norm", max_grad_norm, allow_inf=True)
        self.agent = agent
        self.optimizer = optimizer
        self.double_dqn = bool(double_dqn)
        self.target_update_interval = target_update_interval
        self.tau = None if tau is None else float(tau)
        self.huber_delta = float(huber_delta)
        self.max_grad_norm = None if max_grad_norm is None else float(max_grad_norm)
        self.update_count = UpdateCount(updates_per_optimize, replay_ratio)
        self.target_params = agent.q_params
        self.opt_state = jax.jit(optimizer.init)(agent.q_params)
        self.updates_done = 0
        self.program = DqnUpdate(
            agent,
            optimizer,
            double_dqn=self.double_dqn,
            target_update_interval=self.target_update_interval,
            tau=self.tau,
            huber_delta=self.huber_delta,
            max_grad_norm=self.max_grad_norm,
        )
        if scan is None:
            cpu = jax.default_backend() == "cpu"
            scan = not (cpu and is_image_encoder(agent.q_network.encoder))
        self.scan = bool(scan)
        self._scan = jax.jit(self.program.scan)
        self._update = jax.jit(self.program.update)

    def update_batches(self, batches: Sequence[ReplayBatch]) -> dict[str, np.ndarray]:
        """Run one update per replay batch, ``K`` in one compiled call.

        Returns:
            The per-update metrics as numpy arrays ``[K]`` (``loss``, ``q``,
            ``target``, ``td_abs``, ``grad_norm``; ``td_error`` ``[K, batch]``,
            the new priorities).

        Raises:
            NonFiniteError: a loss or gradient norm is NaN or infinite;
                nothing of this call is kept (parameters, optimizer state and
                counters are those before it).
        """
        state = DqnState(
            self.agent.q_params,
            self.target_params,
            self.opt_state,
            np.int32(self.updates_done),
        )
        stacked = ReplayArrays.stack(batches, np.int32)
        if self.scan:
            new_state, outputs = self._scan(state, stacked)
        else:
            new_state, outputs = self._loop(state, stacked)
        vectors, td_errors = jax.device_get(outputs)
        metrics = {name: vectors[:, i] for i, name in enumerate(METRIC_NAMES)}
        self._check_finite(metrics)
        metrics["td_error"] = td_errors
        self.agent.q_params = new_state.q
        self.target_params = new_state.target_q
        self.opt_state = new_state.opt_state
        self.updates_done += int(vectors.shape[0])
        return metrics

    def _loop(self, state: DqnState, stacked: ReplayArrays) -> Any:
        """The ``K`` updates as ``K`` calls of the jitted update (dispatched
        without waiting); the outputs stacked as the scan stacks them."""
        outputs = []
        for k in range(len(stacked.reward)):
            state, output = self._update(
                state, jax.tree.map(lambda x, k=k: x[k], stacked)
            )
            outputs.append(output)
        return state, jax.tree.map(lambda *x: jnp.stack(x), *outputs)

    def _check_finite(self, metrics: Mapping[str, np.ndarray]) -> None:
        bad = [n for n in _CHECKED if not np.isfinite(metrics[n]).all()]
        if not bad:
            return
        first = min(int(np.flatnonzero(~np.isfinite(metrics[n]))[0]) for n in bad)
        terms = tuple(n for n in bad if not np.isfinite(metrics[n][first]))
        shown = ", ".join(f"{n} = {metrics[n][first]}" for n in terms)
        raise NonFiniteError(
            f"DQN update {self.updates_done + first}: non-finite {shown}. This "
            "call's updates were not kept, so the weights are those before it, and "
            "the newest checkpoint on disk is the last good one. Usual causes: "
            "NaN/inf in the batch (observations, rewards), a learning rate that "
            "makes the weights diverge",
            terms=terms,
        )

    def optimize(
        self, replay: Replay, new_steps: int | None = None
    ) -> dict[str, float]:
        """Run this call's updates; return their mean metrics and ``updates``.

        ``new_steps``: environment steps since the last call (needed with a
        ``replay_ratio``). The metrics are :class:`parllel.torch.algos.DQN`'s
        (``loss``, ``q``, ``target``, ``td_abs``, ``grad_norm``), averaged
        over the updates. A prioritized replay receives ``|TD error|`` of
        each sample after its update.
        """
        count = self.update_count(new_steps)
        if count == 0:
            return {"updates": 0.0}
        metrics = run_update_calls(replay, count, self.update_batches)
        means = {
            name: float(np.mean(metrics[name], dtype=np.float64))
            for name in METRIC_NAMES
        }
        means["updates"] = float(count)
        return means

    # -- checkpoints -------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Optimizer state, target network and counters (not the agent); numpy
        leaves."""
        return {
            "optimizer": params_to_numpy(self.opt_state),
            "target_network": params_to_numpy(self.target_params),
            "updates_done": self.updates_done,
            "update_count": self.update_count.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`.

        Raises:
            CheckpointMismatchError: other structures or shapes.
        """
        self.opt_state = load_params(self.opt_state, state["optimizer"], "optimizer")
        self.target_params = load_params(
            self.target_params, state["target_network"], "target network"
        )
        self.updates_done = int(state["updates_done"])
        self.update_count.load_state_dict(state["update_count"])
