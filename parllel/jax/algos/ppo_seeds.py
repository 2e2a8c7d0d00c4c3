"""SeededPPO: K runs' PPO updates as one vmapped, compiled call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from parllel.checkpoints.finite import check_finite_update
from parllel.errors import ConfigError, NonFiniteError
from parllel.jax.algos.ppo import PPO
from parllel.jax.algos.seeded import OnNonFinite, SeededRuns
from parllel.jax.models.params import load_params, params_to_numpy
from parllel.jax.seeds import SeedStack, put_run, stack_trees, take_run

__all__ = ["SeededPPO"]

_STATIC = (
    "value_loss_coef",
    "entropy_coef",
    "max_grad_norm",
    "epochs",
    "minibatches",
    "target_kl",
    "normalize_advantage",
)


class SeededPPO(SeededRuns):
    """K runs of :class:`~parllel.jax.algos.PPO`, updated in one call.

    Each run keeps its own parameters, optimizer state, PRNG key and schedules;
    one ``jax.jit(jax.vmap(...))`` updates them all, run ``k`` reading env
    columns ``k * B .. (k + 1) * B``. A non-finite loss never touches another
    run (``on_nonfinite``: docs/seeds.md, "A failing run").

    Example:
        >>> ppos = [PPO(agent, adam(3e-4), seed=s.torch) for agent, s in zip(stack.agents, run_seeds)]
        >>> seeded = SeededPPO(ppos, stack, envs_per_run=8, seeds=[s.master for s in run_seeds])
        >>> per_run_metrics = seeded.optimize(sample_tree, progress=0.1)

    Args:
        ppos: one PPO per run, on ``stack.agents[k]``, same hyperparameters.
        stack: the runs' stacked parameters (the handler acts with them).
        envs_per_run: B, the env columns of each run.
        seeds: each run's master seed, named in errors.
        on_nonfinite: ``"stop_run"`` or ``"stop_all"``.

    Raises:
        ConfigError: not one PPO per run, or PPOs with other hyperparameters.
    """

    def __init__(
        self,
        ppos: Sequence[PPO],
        stack: SeedStack,
        *,
        envs_per_run: int,
        seeds: Sequence[int],
        on_nonfinite: OnNonFinite = "stop_all",
    ) -> None:
        super().__init__("PPO", ppos, stack, seeds, on_nonfinite, _STATIC)
        self.ppos = list(ppos)
        self.envs_per_run = int(envs_per_run)
        self.opt_state = stack.place(stack_trees([ppo.opt_state for ppo in ppos]))
        self._update = jax.jit(
            jax.vmap(ppos[0]._update_fn, in_axes=(0, 0, 0, 0, 0, 0, 0, None))
        )
        self._keep = jax.jit(
            lambda active, new, old: jax.tree.map(
                lambda n, o: jnp.where(active.reshape(-1, *([1] * (n.ndim - 1))), n, o),
                new,
                old,
            )
        )

    def run_state(self, run: int) -> RunPPOState:
        """Run ``run``'s optimizer state, key and count, as a checkpoint object."""
        return RunPPOState(self, run)

    def _run_data(self, batch: Mapping[str, Any]) -> Any:
        """The batch's fields as ``[K, T * B, ...]`` (run ``k``: its columns)."""
        K, B = self.n_runs, self.envs_per_run
        first = self.ppos[0]
        data = first._data(batch)  # [T * K * B, ...] views
        T = data.advantage.shape[0] // (K * B)
        if (T * B) % first.minibatches:
            raise ConfigError(
                f"each run's samples T * B = {T * B} do not split into "
                f"{first.minibatches} equal minibatches"
            )

        def by_run(leaf: Any) -> Any:
            if leaf is None:
                return None
            array = np.asarray(leaf).reshape(T, K, B, *leaf.shape[1:])
            return np.ascontiguousarray(np.swapaxes(array, 0, 1)).reshape(
                K, T * B, *leaf.shape[1:]
            )

        return self.stack.place(jax.tree.map(by_run, data))

    def _schedule(self, name: str, progress: float | None) -> Any:
        values = [
            ppo._resolve(getattr(ppo, name), ppo._progress(progress))
            for ppo in self.ppos
        ]
        if values[0] is None:
            return None, values
        return self.stack.place(jnp.asarray(values, jnp.float32)), values

    def optimize(
        self, batch: Mapping[str, Any], progress: float | None = None
    ) -> list[dict[str, float] | None]:
        """Update every run on its columns of ``batch`` in one compiled call.

        Args:
            batch: the ``[T, K * B]`` sample tree (as for
                :meth:`PPO.optimize <parllel.jax.algos.PPO.optimize>`).
            progress: training progress in ``[0, 1]`` for the schedules.

        Returns:
            Each run's PPO metrics; None for a run stopped by a non-finite
            loss (now or before).

        Raises:
            NonFiniteError: with ``on_nonfinite="stop_all"``, a run's loss
                or gradient norm was NaN or infinite (its seed is named).
        """
        data = self._run_data(batch)
        learning_rate, _ = self._schedule("learning_rate", progress)
        clip_range, clip_values = self._schedule("clip_range", progress)
        value_clip_range, _ = self._schedule("value_clip_range", progress)
        keys = []
        for ppo in self.ppos:
            key = ppo.key
            if ppo.minibatches > 1:
                ppo.key, key = jax.random.split(ppo.key)
            keys.append(key)
        old = (self.stack.params, self.opt_state)
        params, opt_state, out = self._update(
            self.stack.params,
            self.opt_state,
            self.stack.place(jnp.stack(keys)),
            data,
            learning_rate,
            clip_range,
            value_clip_range,
            None,
        )
        active = np.array([run not in self.stopped for run in range(self.n_runs)])
        if not active.all():  # a stopped run's weights never change again
            params, opt_state = self._keep(
                jnp.asarray(active), (params, opt_state), old
            )
        self.stack.params, self.opt_state = params, opt_state
        out = jax.device_get(out)  # the one host synchronization
        metrics: list[dict[str, float] | None] = []
        failed: list[int] = []
        for run, ppo in enumerate(self.ppos):
            if not active[run]:
                metrics.append(None)
                continue
            ppo.updates_done += 1
            run_out = {name: value[run] for name, value in out.items()}
            metrics.append(ppo._metrics(run_out, clip_values[run]))
            if bool(run_out["failed"]):
                failed.append(run)
                try:
                    check_finite_update(
                        "PPO",
                        ppo.updates_done - 1,
                        loss=float(run_out["bad_loss"]),
                        grad_norm=float(run_out["bad_grad_norm"]),
                    )
                except NonFiniteError as error:
                    self._stop_nonfinite(run, error)
                metrics[run] = None
        self._raise_if_stop_all(failed)
        return metrics


class RunPPOState:
    """One run's PPO state as a checkpoint object, in the format of a single
    :class:`~parllel.jax.algos.PPO`'s ``state_dict`` (a run directory of a
    seeded run holds what a single run's would)."""

    def __init__(self, seeded: SeededPPO, run: int) -> None:
        self.seeded = seeded
        self.run = run

    def state_dict(self) -> dict[str, Any]:
        """Optimizer state (numpy leaves), update count and key of this run."""
        ppo = self.seeded.ppos[self.run]
        return {
            "optimizer": params_to_numpy(take_run(self.seeded.opt_state, self.run)),
            "updates_done": ppo.updates_done,
            "key": np.asarray(jax.random.key_data(ppo.key)),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        seeded, run = self.seeded, self.run
        ppo = seeded.ppos[run]
        opt_state = load_params(
            take_run(seeded.opt_state, run), state["optimizer"], "optimizer"
        )
        seeded.opt_state = put_run(seeded.opt_state, run, opt_state)
        ppo.updates_done = int(state["updates_done"])
        ppo.key = jax.random.wrap_key_data(jnp.asarray(state["key"]))
