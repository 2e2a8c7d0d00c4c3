"""SeedsRunner: K runs of one configuration trained as one program, each
written to its own run directory.

One sampler steps every run's envs (``K * B`` columns of one sample tree,
run ``k`` owning columns ``k * B .. (k + 1) * B``) and one algorithm updates
every run at once: on-policy from the batch (e.g.
:class:`~parllel.jax.algos.SeededPPO`), or off-policy from a
:class:`~parllel.replays.per_run.PerRunReplay` the batch is recorded into
(e.g. :class:`~parllel.jax.algos.SeededSAC`). The runner keeps what a single
:class:`~parllel.runners.OnPolicyRunner` or
:class:`~parllel.runners.OffPolicyRunner` keeps, once per run: its episodes, its algorithm metrics, its log (``progress.csv``,
TensorBoard) and its checkpoints, in the format of a single run's. See
``docs/seeds.md``.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import median
from time import perf_counter as clock
from typing import Any, Protocol, cast

from parllel.backends import StatefulGenerator
from parllel.checkpoints.checkpoint import capture_rng_state, restore_rng_state
from parllel.errors import CheckpointError, ConfigError, ParllelWarning
from parllel.logging import EpisodeStats, Logger
from parllel.replays.per_run import PerRunReplay
from parllel.runners.batches import steps_per_batch
from parllel.runners.callbacks import Callback, Stateful
from parllel.runners.checkpoints import (
    read_checkpoint,
    restore_objects,
    write_checkpoint,
)
from parllel.runners.interrupt import InterruptHandler
from parllel.runners.metrics import MetricWindow, progress_metrics
from parllel.runners.notices import warn_total_steps_changed
from parllel.runners.run_directory import RunDirectory
from parllel.samplers.base import BatchSampler
from parllel.samplers.protocols import EvalSource, TrainingSampler
from parllel.transforms import (
    Compose,
    NormalizeAdvantage,
    NormalizeObservations,
    NormalizeRewards,
)

__all__ = [
    "SeedRun",
    "SeededAlgorithm",
    "SeededOffPolicyAlgorithm",
    "SeedsRunner",
    "refuse_pooled_statistics",
]

#: Transforms whose statistics span every env column: K runs would share them.
POOLED = (NormalizeObservations, NormalizeRewards, NormalizeAdvantage)


def refuse_pooled_statistics(sampler: TrainingSampler, n_runs: int) -> None:
    """Refuse a sampler whose normalizers would pool the statistics of
    ``n_runs`` > 1 runs (a run must see only its own columns).

    Raises:
        ConfigError: naming the normalizer.
    """
    if n_runs == 1 or not isinstance(sampler, BatchSampler):
        return
    transform = sampler.transform
    transforms = transform.transforms if isinstance(transform, Compose) else [transform]
    for item in [sampler.observation_normalizer, *transforms]:
        if isinstance(item, POOLED):
            raise ConfigError(
                f"{type(item).__name__} keeps one set of statistics over every env "
                f"column, so {n_runs} seeds in one program would share them: "
                "train seeds together without normalizers, or as separate runs "
                "(docs/seeds.md)"
            )


class SeededAlgorithm(Protocol):
    """What :class:`SeedsRunner` calls on its algorithm (e.g. SeededPPO)."""

    @property
    def stopped(self) -> Mapping[int, Exception]:
        """The runs stopped by an error (e.g. a non-finite loss), by index."""
        ...

    def optimize(
        self, batch: Mapping[str, Any], progress: float | None = None
    ) -> Sequence[Mapping[str, float] | None]:
        """Update every run; each run's metrics (None: the run is stopped)."""
        ...

    def stop(self, run: int, error: Exception) -> None:
        """Stop run ``run`` (its weights never change again)."""
        ...


class SeededOffPolicyAlgorithm(Protocol):
    """What :class:`SeedsRunner` calls on an off-policy algorithm (e.g. SeededSAC)."""

    @property
    def stopped(self) -> Mapping[int, Exception]:
        """The runs stopped by an error (e.g. a non-finite loss), by index."""
        ...

    def optimize(
        self, replay: PerRunReplay, new_steps: int | None = None
    ) -> Sequence[Mapping[str, float] | None]:
        """Update every run from its columns of ``replay``; each run's
        metrics (None: the run is stopped)."""
        ...

    def stop(self, run: int, error: Exception) -> None:
        """Stop run ``run`` (its weights never change again)."""
        ...


@dataclasses.dataclass
class SeedRun:
    """One run of a seed axis: its directory, logger and checkpoint objects.

    Attributes:
        seed: the run's master seed.
        directory: its run directory.
        logger: where its metrics go (``progress.csv``, TensorBoard; None:
            nowhere).
        checkpoint_objects: name -> object with ``state_dict`` /
            ``load_state_dict``: this run's slice of the model and the
            algorithm (e.g. :class:`~parllel.jax.seeds.RunView`).
        action_key: this run's action generator, checkpointed with its RNG
            states as a single run's ``"actions"`` generator.
    """

    seed: int
    directory: RunDirectory
    logger: Logger | None
    checkpoint_objects: dict[str, Stateful]
    action_key: StatefulGenerator | None = None


class SeedsRunner:
    """Training of K runs at once, each with its own outputs.

    Every iteration collects one ``[T, K * B]`` batch and calls
    ``algorithm.optimize(batch, progress)`` once (on-policy); with a
    ``replay`` it records the batch there instead and, once
    ``replay.ready``, calls ``algorithm.optimize(replay, new_steps=T * B)``
    (off-policy: each run samples its own columns). Each run counts ``T * B``
    env steps of its own, so ``total_steps`` is per run, as a single run's.
    Every ``log_interval_steps`` each run's logger gets that run's metrics
    (its episodes, its algorithm metrics over the window, the program's
    throughput), and ``console`` (if given) the median over the runs, with
    the range of every ``*return_mean`` (``seeds/<key>_min``, ``_max``). Every
    ``checkpoint_interval_steps`` (and at the end) each run writes a
    checkpoint to its own directory in a single run's format.

    A run the algorithm stops (a non-finite loss with
    ``on_nonfinite="stop_run"``) is reported with its seed by a
    :class:`~parllel.errors.ParllelWarning`, recorded in its
    ``metadata.json`` (``stopped``), checkpointed once with its last finite
    weights and logged no more; the others train on.

    Ctrl-C or SIGTERM stops after the current iteration and checkpoints
    every run.

    Args:
        sampler: steps the K runs' envs (one sample tree of ``K * B`` columns).
        algorithm: a :class:`SeededAlgorithm`, or with ``replay`` a
            :class:`SeededOffPolicyAlgorithm`.
        total_steps: env steps per run.
        runs: the K :class:`SeedRun` s, in column order.
        log_interval_steps: env steps (per run) between log lines (None:
            every iteration).
        checkpoint_interval_steps: env steps between checkpoints (None:
            only at the end, if the runs have directories).
        keep_checkpoints: how many checkpoints each run keeps.
        config: the resolved config (saved in every checkpoint).
        config_keys: config keys that must match on resume.
        console: a logger for the median over the runs (e.g. the terminal).
        eval_sampler: evaluates every run at once (e.g. an
            :class:`~parllel.samplers.EvalSampler` with a
            :class:`~parllel.jax.seeds.SeededHandler` of ``eval_envs_per_run``
            envs per run); each run's episodes give its ``eval/...`` metrics.
        eval_interval_steps: env steps between evaluations (also one at the end).
        eval_envs_per_run: the eval envs of each run (their columns, in run
            order, as the training envs').
        episode_window: train episodes averaged in each run's statistics.
        handle_interrupt: stop gracefully on the first Ctrl-C or SIGTERM.
        replay: the runs' :class:`~parllel.replays.per_run.PerRunReplay`
            (off-policy; None: on-policy).
        callbacks: :class:`~parllel.runners.Callback` s; the runner calls
            ``on_train_start``, ``on_update_end`` (what they add to the
            metrics goes to every run's log) and ``on_train_end`` (e.g. an
            :class:`~parllel.runners.off_policy.AttributeSchedule` of the
            warm-up).

    Raises:
        ConfigError: no runs, or a batch whose columns do not split into them.
    """

    def __init__(
        self,
        sampler: TrainingSampler,
        algorithm: SeededAlgorithm | SeededOffPolicyAlgorithm,
        total_steps: int,
        runs: Sequence[SeedRun],
        *,
        log_interval_steps: int | None = None,
        checkpoint_interval_steps: int | None = None,
        keep_checkpoints: int = 3,
        config: Mapping[str, Any] | None = None,
        config_keys: Sequence[str] | None = None,
        console: Logger | None = None,
        eval_sampler: EvalSource | None = None,
        eval_interval_steps: int | None = None,
        eval_envs_per_run: int = 1,
        episode_window: int = 100,
        handle_interrupt: bool = True,
        replay: PerRunReplay | None = None,
        callbacks: Sequence[Callback] = (),
    ) -> None:
        if not runs:
            raise ConfigError("SeedsRunner needs at least one run")
        if int(total_steps) < 1:
            raise ConfigError(f"total_steps must be >= 1, got {total_steps}")
        columns = steps_per_batch(sampler.sample_tree)
        T = len(sampler.sample_tree["reward"])
        B_total = columns // T
        if B_total % len(runs):
            raise ConfigError(
                f"the sample tree's {B_total} env columns do not split into "
                f"{len(runs)} runs"
            )
        refuse_pooled_statistics(sampler, len(runs))
        if replay is not None and replay.n_runs != len(runs):
            raise ConfigError(
                f"the replay has {replay.n_runs} runs' rngs; the runner {len(runs)} runs"
            )
        self.sampler = sampler
        self.replay = replay
        self.callbacks = list(callbacks)
        self.algorithm = algorithm
        self.total_steps = int(total_steps)
        self.runs = list(runs)
        self.envs_per_run = B_total // len(runs)
        self.steps_per_batch = T * self.envs_per_run  # per run
        self.log_interval_steps = log_interval_steps
        self.checkpoint_interval_steps = checkpoint_interval_steps
        self.keep_checkpoints = int(keep_checkpoints)
        self.config = dict(config or {})
        self.config_keys = config_keys
        self.console = console
        self.eval_sampler = eval_sampler
        self.eval_interval_steps = eval_interval_steps
        self.eval_envs_per_run = int(eval_envs_per_run)
        self._eval: list[dict[str, float]] = [{} for _ in runs]
        self.handle_interrupt = bool(handle_interrupt)
        self.train_stats = [
            EpisodeStats(window=episode_window, prefix="train/") for _ in runs
        ]
        self._windows = [MetricWindow() for _ in runs]
        self.env_steps = 0
        self.updates = 0
        self.interrupted = False
        self.stop_signals: list[int] = []
        self._stop = False
        self._saved_stopped: set[int] = set()
        #: the checkpoint each run resumed from (:meth:`load`), else None
        self.resumed_from: list[Path | None] = [None for _ in runs]
        self._elapsed_before = 0.0
        self._start = clock()
        self._last_log = (self._start, 0)

    # -- the loop ----------------------------------------------------------------
    @property
    def progress(self) -> float:
        """Fraction of ``total_steps`` done, in ``[0, 1]`` (for schedules)."""
        return min(1.0, self.env_steps / self.total_steps)

    @property
    def finished(self) -> bool:
        """Whether ``total_steps`` are done."""
        return self.env_steps >= self.total_steps

    @property
    def active_runs(self) -> list[int]:
        """The runs still training."""
        return [k for k in range(len(self.runs)) if k not in self.algorithm.stopped]

    def request_stop(self) -> None:
        """End training after the current iteration (every run checkpointed)."""
        self._stop = True

    def _on_interrupt(self, signum: int) -> str:
        self.interrupted = True
        self._stop = True
        return "stopping after this iteration and writing a checkpoint of every run"

    def run(self) -> list[dict[str, float]]:
        """Train every run until ``total_steps`` (or a stop); return each
        run's last metrics (``{}`` for a stopped run)."""
        last: list[dict[str, float]] = [{} for _ in self.runs]
        if self.finished:
            return last
        interrupts = InterruptHandler(self._on_interrupt, enabled=self.handle_interrupt)
        self.stop_signals = interrupts.received
        self._start = clock()
        self._last_log = (self._start, self.env_steps)
        # the next event of each schedule is the next multiple of its interval,
        # so a resumed group keeps the cadence of the one it continues
        next_log, next_eval, next_checkpoint = (
            (self.env_steps // interval + 1) * interval if interval else 0
            for interval in (
                self.log_interval_steps,
                self.eval_interval_steps,
                self.checkpoint_interval_steps,
            )
        )
        interval = self.checkpoint_interval_steps
        for callback in self.callbacks:
            callback.on_train_start(self)
        with interrupts:
            while not (self.finished or self._stop) and self.active_runs:
                batch, traj_infos = self.sampler.collect_batch()
                self.env_steps += self.steps_per_batch
                for traj in traj_infos:
                    self.train_stats[traj.env_index // self.envs_per_run].extend([traj])
                metrics = self._optimize(batch)
                shared: dict[str, float] = {}
                for callback in self.callbacks:
                    callback.on_update_end(self, shared)
                for run, values in enumerate(metrics):
                    if values is not None:
                        self._windows[run].add({**values, **shared})
                self._report_stopped()
                done = self.finished or self._stop or not self.active_runs
                evaluate = self.eval_sampler is not None and (
                    (done and not self.interrupted)  # Ctrl-C: save quickly
                    or (
                        self.eval_interval_steps is not None
                        and self.env_steps >= next_eval
                    )
                )
                if evaluate:
                    self.evaluate()
                    every = self.eval_interval_steps or 1
                    next_eval = (self.env_steps // every + 1) * every
                if (
                    evaluate
                    or self.log_interval_steps is None
                    or self.env_steps >= next_log
                    or done
                ):
                    last = self._log()
                    every = self.log_interval_steps or 1
                    next_log = (self.env_steps // every + 1) * every
                if interval and self.env_steps >= next_checkpoint and not done:
                    self.save()
                    next_checkpoint = (self.env_steps // interval + 1) * interval
        for callback in self.callbacks:
            callback.on_train_end(self)
        self.save()
        return last

    def _optimize(self, batch: Any) -> Sequence[Mapping[str, float] | None]:
        """One iteration's update of every run (on- or off-policy)."""
        if self.replay is None:
            on_policy = cast(SeededAlgorithm, self.algorithm)
            self.updates += 1
            return on_policy.optimize(batch, progress=self.progress)
        self.replay.record_batch(batch)
        if not self.replay.ready:  # no catching up on the steps before learning
            return [
                None if k in self.algorithm.stopped else {}
                for k in range(len(self.runs))
            ]
        off_policy = cast(SeededOffPolicyAlgorithm, self.algorithm)
        metrics = off_policy.optimize(self.replay, new_steps=self.steps_per_batch)
        self.updates += int(
            max((m.get("updates", 1) for m in metrics if m is not None), default=0)
        )
        return metrics

    def _report_stopped(self) -> None:
        for run, error in self.algorithm.stopped.items():
            if run in self._saved_stopped:
                continue
            record = self.runs[run]
            warnings.warn(
                f"{record.directory.path.name}: {error}; the other runs train on",
                ParllelWarning,
                stacklevel=3,
            )
            record.directory.update_metadata(
                stopped={"env_steps": self.env_steps, "error": str(error)}
            )
            self._save_run(run)
            self._saved_stopped.add(run)

    def _log(self) -> list[dict[str, float]]:
        now = clock()
        since, steps_then = self._last_log
        self._last_log = (now, self.env_steps)
        elapsed = self._elapsed_before + now - self._start
        shared = progress_metrics(
            self.env_steps,
            self.updates,
            elapsed,
            self.env_steps - steps_then,
            now - since,
        )
        shared["time/seeds"] = float(len(self.active_runs))
        per_run: list[dict[str, float]] = []
        for run, record in enumerate(self.runs):
            if run in self.algorithm.stopped:
                per_run.append({})
                continue
            metrics = {f"algo/{k}": v for k, v in self._windows[run].take().items()}
            metrics.update(self.train_stats[run].metrics())
            metrics.update(self._eval[run])
            metrics.update(shared)
            per_run.append(metrics)
            if record.logger is not None:
                record.logger.log(self.env_steps, metrics)
        self._eval = [{} for _ in self.runs]  # logged once
        if self.console is not None:
            active = [m for m in per_run if m]
            keys = set().union(*active) if active else set()
            summary = {
                key: median(m[key] for m in active if key in m) for key in sorted(keys)
            }
            for key in sorted(k for k in keys if k.endswith("return_mean")):
                values = [m[key] for m in active if key in m]
                summary[f"seeds/{key}_min"] = min(values)
                summary[f"seeds/{key}_max"] = max(values)
            self.console.log(self.env_steps, summary)
        return per_run

    def evaluate(self) -> list[dict[str, float]]:
        """Evaluate every run now (its episodes: env ``// eval_envs_per_run``);
        return each run's ``eval/...`` metrics (also logged with the next line)."""
        if self.eval_sampler is None:
            raise ConfigError("no eval_sampler was given to the runner")
        stats = [EpisodeStats(window=10**9, prefix="eval/") for _ in self.runs]
        for traj in self.eval_sampler.collect():
            stats[traj.env_index // self.eval_envs_per_run].extend([traj])
        self._eval = [s.metrics() for s in stats]
        return self._eval

    # -- checkpoints ---------------------------------------------------------------
    def _run_state(self, run: int) -> dict[str, Any]:
        record = self.runs[run]
        generators = {} if record.action_key is None else {"actions": record.action_key}
        return {
            "runner": {
                "env_steps": self.env_steps,
                "updates": self.updates,
                "train_stats": self.train_stats[run].state_dict(),
                "total_steps": self.total_steps,
                "elapsed_s": self._elapsed_before + clock() - self._start,
            },
            "rng": capture_rng_state(None, generators),
            "config": self.config,
            "objects": {
                name: obj.state_dict()
                for name, obj in record.checkpoint_objects.items()
            },
        }

    def _save_run(self, run: int) -> Path:
        return write_checkpoint(
            self.runs[run].directory.checkpoints_dir,
            self._run_state(run),
            self.env_steps,
            self.keep_checkpoints,
        )

    def save(self) -> list[Path]:
        """Write a checkpoint of every run still training; return their paths."""
        return [self._save_run(run) for run in self.active_runs]

    def load(self) -> None:
        """Resume every run from its newest checkpoint.

        A run stopped before (``stopped`` in its metadata) stays stopped.

        A checkpoint of a run with another ``total_steps`` loads with a
        :class:`~parllel.errors.ParllelWarning`, as a single run's
        (:meth:`parllel.runners.Runner.load`).

        Raises:
            CheckpointError: a run has no readable checkpoint, or the runs'
                checkpoints are of different steps.
        """
        steps: dict[int, int] = {}
        saved_totals: set[int] = set()
        for run, record in enumerate(self.runs):
            path, state = read_checkpoint(record.directory.checkpoints_dir)
            self.resumed_from[run] = path
            restore_objects(
                path,
                state,
                record.checkpoint_objects,
                self.config,
                self.config_keys,
            )
            generators = (
                {} if record.action_key is None else {"actions": record.action_key}
            )
            restore_rng_state(state["rng"], None, generators)
            saved = state["runner"]
            self.train_stats[run].load_state_dict(saved["train_stats"])
            stopped = record.directory.read_metadata().get("stopped")
            if stopped is not None:
                self.algorithm.stop(run, CheckpointError(str(stopped["error"])))
                self._saved_stopped.add(run)
                continue
            steps[run] = int(saved["env_steps"])
            if saved.get("total_steps") is not None:
                saved_totals.add(int(saved["total_steps"]))
            self.updates = int(saved["updates"])
            self._elapsed_before = float(saved.get("elapsed_s", 0.0))
        if len(set(steps.values())) > 1:
            raise CheckpointError(
                "the runs' newest checkpoints are of different steps "
                f"({ {self.runs[k].directory.path.name: s for k, s in steps.items()} }): "
                "resume each from a checkpoint of the same step"
            )
        self.env_steps = next(iter(steps.values()), 0)
        if not self.finished:
            for saved_total in sorted(saved_totals):
                warn_total_steps_changed(self.env_steps, saved_total, self.total_steps)
        for record in self.runs:
            rewind = getattr(record.logger, "rewind", None)
            if callable(rewind):
                rewind(self.env_steps)
        self.sampler.reset()
