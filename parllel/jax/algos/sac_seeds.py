"""SeededSAC: K runs' SAC updates as one vmapped, compiled call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from parllel.errors import ConfigError, NonFiniteError
from parllel.jax.agents.sac_agent import SacPolicyParams
from parllel.jax.algos.replay_updates import ReplayArrays
from parllel.jax.algos.sac import SAC, _mean_metrics
from parllel.jax.algos.seeded import OnNonFinite, SeededRuns
from parllel.jax.seeds import SeedStack, put_run, stack_trees, take_run
from parllel.replays.per_run import PerRunReplay

__all__ = ["SeededSAC"]

_STATIC = ("tau", "max_grad_norm", "learn_alpha", "target_entropy", "policy_delay")


class SeededSAC(SeededRuns):
    """K runs of :class:`~parllel.jax.algos.SAC`, updated in one call.

    Each run keeps its own actor, critics, ``log_alpha``, optimizer states and
    PRNG key, stacked on a leading axis; one ``jax.jit(jax.vmap(...))`` runs
    every run's updates, run ``k`` sampling its own env columns
    (:class:`~parllel.replays.per_run.PerRunReplay`). A non-finite loss never
    touches another run (``on_nonfinite``: docs/seeds.md).

    Example:
        >>> sacs = [SAC(agent, build_sac_optimizers(1e-3), EntropyCoefficient(1.0),
        ...             seed=s.torch, replay_ratio=1.0) for agent, s in zip(stack.agents, run_seeds)]
        >>> seeded = SeededSAC(sacs, stack, seeds=[s.master for s in run_seeds])
        >>> per_run_metrics = seeded.optimize(replay, new_steps=T * B)

    Args:
        sacs: one SAC per run, on ``stack.agents[k]``, same hyperparameters.
        stack: the runs' stacked acting parameters (``SacPolicyParams``).
        seeds: each run's master seed, named in errors.
        on_nonfinite: ``"stop_run"`` or ``"stop_all"``.

    Raises:
        ConfigError: not one SAC per run, or SACs with other hyperparameters.
    """

    def __init__(
        self,
        sacs: Sequence[SAC],
        stack: SeedStack,
        *,
        seeds: Sequence[int],
        on_nonfinite: OnNonFinite = "stop_all",
    ) -> None:
        super().__init__("SAC", sacs, stack, seeds, on_nonfinite, _STATIC)
        for run, sac in enumerate(sacs):
            if sac.agent is not stack.agents[run]:
                raise ConfigError(f"run {run}'s SAC must train stack.agents[{run}]")
        self.sacs = list(sacs)
        self.state = stack.place(stack_trees([sac._state() for sac in sacs]))
        self.keys = stack.place(jnp.stack([sac.key for sac in sacs]))
        self._scan = jax.jit(jax.vmap(sacs[0].program.scan_with_keys))
        self._set_policy()

    @property
    def random_actions(self) -> bool:
        """Whether every run acts uniformly at random (the warm-up; e.g. set
        by ``AttributeSchedule(seeded, "random_actions", ...)``)."""
        return bool(np.asarray(self.stack.params.random_actions).all())

    @random_actions.setter
    def random_actions(self, value: bool) -> None:
        for sac in self.sacs:
            sac.agent.random_actions = bool(value)
        self._set_policy()

    def _set_policy(self) -> None:
        """The stack's acting parameters: every run's actor and warm-up flag."""
        flags = np.array([sac.agent.random_actions for sac in self.sacs], np.bool_)
        self.stack.params = SacPolicyParams(self.state.actor, flags)

    def optimize(
        self, replay: PerRunReplay, new_steps: int | None = None
    ) -> list[dict[str, float] | None]:
        """Run this call's updates of every run in one compiled call.

        Args:
            replay: the runs' :class:`~parllel.replays.per_run.PerRunReplay`.
            new_steps: env steps per run since the last call (with a
                ``replay_ratio``).

        Returns:
            Each run's mean metrics (as :meth:`SAC.optimize
            <parllel.jax.algos.SAC.optimize>`); None for a stopped run.

        Raises:
            NonFiniteError: with ``on_nonfinite="stop_all"``, a run's
                loss or gradient norm was NaN or infinite (its seed is named).
        """
        counts = {sac.update_count(new_steps) for sac in self.sacs}
        (count,) = counts  # one configuration: one count
        if count == 0:
            return [
                None if run in self.stopped else {"updates": 0.0}
                for run in range(self.n_runs)
            ]
        batches = self.stack.place(
            ReplayArrays.from_replay(replay.sample_runs(count), np.float32)
        )  # [K, count, ...]
        new_state, (vectors, td_errors), keys = self._scan(
            self.state, batches, self.keys
        )
        vectors, td_errors = jax.device_get((vectors, td_errors))
        names = self.sacs[0].program.metric_names
        metrics: list[dict[str, float] | None] = []
        active = np.array([run not in self.stopped for run in range(self.n_runs)])
        failed: list[int] = []
        for run, sac in enumerate(self.sacs):
            if not active[run]:
                metrics.append(None)
                continue
            try:
                sac._check_finite(sac._metrics(vectors[run], td_errors[run]))
            except NonFiniteError as error:
                self._stop_nonfinite(run, error)
                active[run] = False
                failed.append(run)
                metrics.append(None)
                continue
            sac.updates_done += count
            metrics.append(_mean_metrics(names, vectors[run]))
        for stopped in map(int, np.flatnonzero(~active)):  # nothing of this call
            new_state = put_run(new_state, stopped, take_run(self.state, stopped))
            keys = keys.at[stopped].set(self.keys[stopped])
        self.state, self.keys = new_state, keys
        self._set_policy()
        self._raise_if_stop_all(failed)
        return metrics

    def run_agent(self, run: int) -> RunSacAgent:
        """Run ``run``'s actor and critic, as a checkpoint object."""
        return RunSacAgent(self, run)

    def run_state(self, run: int) -> RunSacState:
        """Run ``run``'s SAC state (optimizers, target, alpha, key, counts),
        as a checkpoint object."""
        return RunSacState(self, run)

    def _sync_out(self, run: int) -> SAC:
        """Run ``run``'s SAC and agent holding its slice of the stacked state."""
        sac = self.sacs[run]
        state = take_run(self.state, run)
        sac.agent.actor_params, sac.agent.critic_params = state.actor, state.critic
        sac.target_critic, sac.log_alpha = state.target_critic, state.log_alpha
        sac.opt_states = (state.actor_opt, state.critic_opt, state.alpha_opt)
        sac.key = self.keys[run]
        return sac

    def _sync_in(self, run: int) -> None:
        """Put run ``run``'s SAC and agent back into the stacked state."""
        sac = self.sacs[run]
        self.state = put_run(self.state, run, sac._state())
        self.keys = self.keys.at[run].set(sac.key)
        self._set_policy()


class RunSacAgent:
    """One run's agent as a checkpoint object (a single run's
    :class:`~parllel.jax.agents.sac_agent.SacAgent` ``state_dict``: actor, critic)."""

    def __init__(self, seeded: SeededSAC, run: int) -> None:
        self.seeded = seeded
        self.run = run

    def state_dict(self) -> dict[str, Any]:
        """``{"actor", "critic"}`` of this run (numpy leaves)."""
        return self.seeded._sync_out(self.run).agent.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.seeded._sync_out(self.run).agent.load_state_dict(state)
        self.seeded._sync_in(self.run)


class RunSacState:
    """One run's SAC state as a checkpoint object, in a single
    :class:`~parllel.jax.algos.SAC`'s ``state_dict`` format."""

    def __init__(self, seeded: SeededSAC, run: int) -> None:
        self.seeded = seeded
        self.run = run

    def state_dict(self) -> dict[str, Any]:
        """Optimizer states, target critic, ``log_alpha``, key and counters."""
        return self.seeded._sync_out(self.run).state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.seeded._sync_out(self.run).load_state_dict(state)
        self.seeded._sync_in(self.run)
