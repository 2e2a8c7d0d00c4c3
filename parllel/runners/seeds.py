"""SeedsRunner: K runs of one configuration trained as one program (one
sampler, one algorithm updating every run at once), each written to its own
run directory in a single run's format (docs/seeds.md); its algorithm
protocols and the run it is given (:class:`SeedRun`).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from time import perf_counter as clock
from typing import Any, Protocol, cast

from parllel.backends import StatefulGenerator
from parllel.checkpoints.checkpoint import capture_rng_state, restore_rng_state
from parllel.errors import CheckpointError, ConfigError, ParllelWarning
from parllel.logging import Logger
from parllel.replays.per_run import PerRunReplay
from parllel.runners.batches import steps_per_batch
from parllel.runners.callbacks import Callback, Stateful
from parllel.runners.checkpoints import (
    SavedCounters,
    read_checkpoint,
    restore_objects,
    run_state,
    write_checkpoint,
)
from parllel.runners.interrupt import InterruptHandler
from parllel.runners.metrics import progress_metrics
from parllel.runners.notices import warn_total_steps_changed
from parllel.runners.run_directory import RunDirectory
from parllel.runners.seed_metrics import SeedMetrics, median_over_runs
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

    Each iteration collects one ``[T, K * B]`` batch and updates every run
    with one call: ``algorithm.optimize(batch, progress)`` (on-policy) or,
    with a ``replay``, ``algorithm.optimize(replay, new_steps=T * B)``
    (off-policy). ``total_steps`` and the intervals count env steps per run.
    Its iteration, logs, checkpoints and arguments are described in
    docs/seeds.md ("The seeds runner").

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
        self.handle_interrupt = bool(handle_interrupt)
        self.metrics = SeedMetrics(len(runs), self.envs_per_run, episode_window)
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
                self.metrics.add_episodes(traj_infos)
                metrics = self._optimize(batch)
                shared: dict[str, float] = {}
                for callback in self.callbacks:
                    callback.on_update_end(self, shared)
                self.metrics.add_updates(metrics, shared)
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
        per_run = self.metrics.take(self.algorithm.stopped, shared)
        for record, metrics in zip(self.runs, per_run):
            if metrics and record.logger is not None:
                record.logger.log(self.env_steps, metrics)
        if self.console is not None:
            self.console.log(self.env_steps, median_over_runs(per_run))
        return per_run

    def evaluate(self) -> list[dict[str, float]]:
        """Evaluate every run now (its episodes: env ``// eval_envs_per_run``);
        return each run's ``eval/...`` metrics (also logged with the next line)."""
        if self.eval_sampler is None:
            raise ConfigError("no eval_sampler was given to the runner")
        return self.metrics.evaluated(
            self.eval_sampler.collect(), self.eval_envs_per_run
        )

    # -- checkpoints ---------------------------------------------------------------
    def _run_state(self, run: int) -> dict[str, Any]:
        record = self.runs[run]
        generators = {} if record.action_key is None else {"actions": record.action_key}
        return run_state(
            env_steps=self.env_steps,
            updates=self.updates,
            train_stats=self.metrics.train_stats[run],
            total_steps=self.total_steps,
            elapsed_s=self._elapsed_before + clock() - self._start,
            rng=capture_rng_state(None, generators),
            config=self.config,
            objects=record.checkpoint_objects,
        )

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
            saved = SavedCounters.of(state, self.metrics.train_stats[run])
            stopped = record.directory.read_metadata().get("stopped")
            if stopped is not None:
                self.algorithm.stop(run, CheckpointError(str(stopped["error"])))
                self._saved_stopped.add(run)
                continue
            steps[run] = saved.env_steps
            if saved.total_steps is not None:
                saved_totals.add(saved.total_steps)
            self.updates = saved.updates
            self._elapsed_before = saved.elapsed_s
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
