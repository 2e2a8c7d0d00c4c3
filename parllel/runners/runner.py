"""Runner: the outer training loop shared by on- and off-policy training (its
batches: :mod:`~parllel.runners.batches`; checkpoint files:
:mod:`~parllel.runners.checkpoints`; time metrics: :mod:`~parllel.runners.metrics`)."""

from __future__ import annotations

import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from time import perf_counter as clock
from typing import Any, Generic, TypeVar

import numpy as np

from parllel.checkpoints.checkpoint import (
    capture_rng_state,
    restore_rng_state,
)
from parllel.errors import ConfigError
from parllel.logging import EpisodeStats, Logger
from parllel.runners.batches import batches_of
from parllel.runners.callbacks import Callback, Stateful
from parllel.runners.checkpoints import (
    SavedCounters,
    read_checkpoint,
    restore_objects,
    run_state,
    write_checkpoint,
)
from parllel.runners.interrupt import SIGNAL_NAMES, InterruptHandler
from parllel.runners.metrics import MetricWindow, progress_metrics, time_metrics
from parllel.runners.notices import (
    Rewindable,
    show_notices,
    warn_partial_batch,
    warn_sigint_ignored,
    warn_total_steps_changed,
)
from parllel.samplers.protocols import (
    AsyncSampler,
    EvalSource,
    TrainingSampler,
    WeightPublisher,
)
from parllel.timing import PhaseTimes
from parllel.tree import ArrayDict

#: What a subclass's iteration calls on its algorithm (see its Protocol).
AlgorithmT = TypeVar("AlgorithmT")


def _schedule(interval: int | None, name: str) -> int | None:
    if interval is None:
        return None
    if int(interval) < 1:
        raise ConfigError(f"{name} must be >= 1 env steps (or None), got {interval}")
    return int(interval)


class Runner(Generic[AlgorithmT]):
    """The outer training loop; subclasses define one iteration.

    Around each iteration (:meth:`_iterate`: collect and update) it counts
    env steps, logs, evaluates and checkpoints on schedules in env steps,
    calls the callbacks, and stops cleanly on Ctrl-C or SIGTERM. Its
    arguments and behaviour are described in docs/training.md ("The runner").

    Raises:
        ConfigError: a bad interval or count, or a background sampler that
            follows weights without a ``publisher``.
    """

    def __init__(
        self,
        sampler: TrainingSampler | AsyncSampler,
        algorithm: AlgorithmT,
        total_steps: int,
        *,
        eval_sampler: EvalSource | None = None,
        eval_interval_steps: int | None = None,
        logger: Logger | None = None,
        log_interval_steps: int | None = None,
        checkpoint_dir: str | Path | None = None,
        checkpoint_interval_steps: int | None = None,
        keep_checkpoints: int = 3,
        checkpoint_objects: Mapping[str, Stateful] | None = None,
        config: Mapping[str, Any] | None = None,
        config_keys: Sequence[str] | Mapping[str, str] | None = None,
        callbacks: Sequence[Callback] = (),
        episode_window: int = 100,
        rng: np.random.Generator | None = None,
        handle_interrupt: bool = True,
        publisher: WeightPublisher | None = None,
    ) -> None:
        if int(total_steps) < 1:
            raise ConfigError(f"total_steps must be >= 1, got {total_steps}")
        self.sampler = sampler
        self.algorithm = algorithm
        self.total_steps = int(total_steps)
        self.eval_sampler = eval_sampler
        self.eval_interval_steps = _schedule(eval_interval_steps, "eval_interval_steps")
        if eval_sampler is None and eval_interval_steps is not None:
            raise ConfigError("eval_interval_steps is set but there is no eval_sampler")
        self.logger = logger
        self.log_interval_steps = _schedule(log_interval_steps, "log_interval_steps")
        self.checkpoint_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        self.checkpoint_interval_steps = _schedule(
            checkpoint_interval_steps, "checkpoint_interval_steps"
        )
        self.keep_checkpoints = int(keep_checkpoints)
        self.checkpoint_objects = _checked_stateful(checkpoint_objects or {})
        self.publisher = publisher
        # a synchronous sampler, or an asynchronous one (the learner's version
        # goes to collect_batch; lags, restarts, dropped batches are logged)
        self.batches = batches_of(sampler, publisher)
        if isinstance(sampler, AsyncSampler) and (
            self.checkpoint_dir is not None or self.checkpoint_objects
        ):
            self.checkpoint_objects.setdefault("sampler", sampler)
        self.config = dict(config or {})
        self.config_keys = config_keys
        self.callbacks = list(callbacks)
        self.rng = rng
        self.handle_interrupt = bool(handle_interrupt)
        self.interrupted = False
        self.stop_signals: list[int] = []
        self.resumed_from: Path | None = None
        self.last_checkpoint: Path | None = None
        self.steps_per_batch = self.batches.steps_per_batch
        self.env_steps = 0
        self.updates = 0
        self.train_stats = EpisodeStats(window=episode_window, prefix="train/")
        self.last_eval: dict[str, float] = {}
        self._stop = False
        self._next = {"log": 0, "eval": 0, "checkpoint": 0}
        self._start_time = clock()
        self._last_log = (self._start_time, 0)
        self._elapsed_before = 0.0  # training time of the runs this one resumes
        self.phase_times = PhaseTimes()  # the learner's, since the last log line
        self._algo_window = MetricWindow()  # the algorithm's, since the last log line
        self._sample_seconds = 0.0  # of the current iteration
        self._notices: list[str] = []  # stop requests not yet shown by the logger

    def request_stop(self) -> None:
        """End training after the current iteration (e.g. from a callback)."""
        self._stop = True

    def _call(self, hook: str, *args: Any) -> None:
        for callback in self.callbacks:
            getattr(callback, hook)(self, *args)

    def _due(self, what: str, interval: int | None) -> bool:
        if interval is None:
            return False
        if self.env_steps >= self._next[what]:
            self._next[what] = (self.env_steps // interval + 1) * interval
            return True
        return False

    @property
    def finished(self) -> bool:
        """Whether ``total_steps`` are done (e.g. a resumed run that had finished)."""
        return self.env_steps >= self.total_steps

    def run(self) -> dict[str, float]:
        """Train until ``total_steps`` (or a stop request); return the last metrics.

        A runner that is already :attr:`finished` returns ``{}`` at once:
        nothing is collected, logged, evaluated or saved.
        """
        if self.finished:
            return {}
        interrupts = InterruptHandler(self._on_interrupt, enabled=self.handle_interrupt)
        self.stop_signals = interrupts.received
        with interrupts:
            if interrupts.sigint_ignored:
                warn_sigint_ignored(
                    signal.SIGTERM in interrupts.handled,
                    self.checkpoint_dir is not None,
                )
            warn_partial_batch(self.env_steps, self.total_steps, self.steps_per_batch)
            return self._run()

    def _on_interrupt(self, signum: int) -> str:
        self.interrupted = True
        self._stop = True
        saving = "and writing a checkpoint" if self.checkpoint_dir is not None else ""
        message = f"stopping after this iteration {saving}".rstrip()
        # also shown by the logger (a live dashboard redraws over stderr)
        self._notices.append(f"{SIGNAL_NAMES[signal.Signals(signum)]}: {message}")
        return message

    def _run(self) -> dict[str, float]:
        self._start_time = clock()
        self._last_log = (self._start_time, self.env_steps)
        # The next event of each schedule is the next multiple of its interval,
        # so a resumed run keeps the cadence of the run it continues.
        self._next = {
            what: (self.env_steps // interval + 1) * interval if interval else 0
            for what, interval in (
                ("log", self.log_interval_steps),
                ("eval", self.eval_interval_steps),
                ("checkpoint", self.checkpoint_interval_steps),
            )
        }
        self._call("on_train_start")
        metrics: dict[str, float] = {}
        while self.env_steps < self.total_steps and not self._stop:
            start = clock()
            self._sample_seconds = 0.0
            algo_metrics = self._iterate()
            show_notices(self.logger, self._notices)
            if self.publisher is not None:
                self.publisher.publish_weights()
            self.phase_times.record(
                {
                    "sample": self._sample_seconds,
                    "update": clock() - start - self._sample_seconds,
                }
            )
            self._algo_window.add(algo_metrics)
            metrics = self._metrics(algo_metrics)
            self._call("on_update_end", metrics)
            last = self.env_steps >= self.total_steps or self._stop
            evaluated = self._due("eval", self.eval_interval_steps)
            # the final evaluation runs here, so its step gets one log line
            # (Ctrl-C: save quickly, no final evaluation)
            if last and self.eval_sampler is not None and not self.interrupted:
                evaluated = True
            if evaluated:
                metrics.update(self.evaluate())
            log_due = self.log_interval_steps is None or self._due(
                "log", self.log_interval_steps
            )
            # evaluation results are always logged, the final step always is
            if log_due or evaluated or last:
                self._log(metrics)
            if self._due("checkpoint", self.checkpoint_interval_steps):
                self._timed("checkpoint", self.save)
        # no iteration ran (a stop requested in on_train_start)
        if (
            self.eval_sampler is not None
            and not self.interrupted  # Ctrl-C: save quickly, no final evaluation
            and self.last_eval.get("_at") != self.env_steps
        ):
            metrics.update(self.evaluate())
            self._log(metrics)
        elif metrics and self._last_log[1] != self.env_steps:
            self._log(metrics)  # the final step always gets a log line
        if self.checkpoint_dir is not None:
            self._timed("checkpoint", self.save)
        self._call("on_train_end")
        return {k: v for k, v in metrics.items() if not k.startswith("_")}

    def _timed(self, phase: str, call: Any) -> Any:
        start = clock()
        try:
            return call()
        finally:
            self.phase_times.record({phase: clock() - start}, count=0)

    def _collect(self) -> ArrayDict:
        """Collect one batch, count its steps and episodes, call the hook."""
        start = clock()
        batch, traj_infos = self.batches.collect()
        self._sample_seconds += clock() - start
        self.env_steps += self.steps_per_batch
        self.train_stats.extend(traj_infos)
        self._call("on_collect_end", batch, traj_infos)
        return batch

    @property
    def progress(self) -> float:
        """Fraction of ``total_steps`` done, in ``[0, 1]`` (for schedules)."""
        return min(1.0, self.env_steps / self.total_steps)

    def _iterate(self) -> Mapping[str, float]:
        """One iteration: collect and update; return the algorithm's metrics."""
        raise NotImplementedError

    def _metrics(self, algo_metrics: Mapping[str, float]) -> dict[str, float]:
        now = clock()
        since, steps_then = self._last_log
        metrics = {f"algo/{k}": float(v) for k, v in algo_metrics.items()}
        metrics.update(self.train_stats.metrics())
        metrics.update(
            progress_metrics(
                self.env_steps,
                self.updates,
                self._elapsed(),
                self.env_steps - steps_then,
                now - since,
            )
        )
        metrics.update(self.batches.lag_metrics())
        if self.publisher is not None:
            metrics["async/policy_version"] = float(self.publisher.policy_version or 0)
        # a restarted background process loses its batch; slow Ray actors
        metrics.update(self.batches.fault_metrics())
        return metrics

    def _elapsed(self) -> float:
        """Training seconds, including those of the runs this one resumes."""
        return self._elapsed_before + clock() - self._start_time

    def _log(self, metrics: dict[str, float]) -> None:
        now = clock()
        metrics.update(
            time_metrics(
                self.phase_times, self.sampler.phase_times, now - self._last_log[0]
            )
        )
        self._last_log = (now, self.env_steps)
        for key in [key for key in metrics if key.startswith("algo/")]:
            del metrics[key]  # the last iteration's; the log line has the window's
        metrics.update({f"algo/{k}": v for k, v in self._algo_window.take().items()})
        self.batches.forget_lags()
        logger = self.logger
        if logger is not None:
            logged = {k: v for k, v in metrics.items() if k[0] != "_"}
            self._timed("log", lambda: logger.log(self.env_steps, logged))

    def evaluate(self) -> dict[str, float]:
        """Run the eval sampler now; return ``eval/...`` metrics."""
        if self.eval_sampler is None:
            raise ConfigError("no eval_sampler was given to the runner")
        stats = EpisodeStats(window=10**9, prefix="eval/")
        stats.extend(self._timed("eval", self.eval_sampler.collect))
        eval_metrics = stats.metrics()
        self.last_eval = {**eval_metrics, "_at": self.env_steps}
        self._call("on_eval_end", eval_metrics)
        return eval_metrics

    def state_dict(self) -> dict[str, Any]:
        """Counters, statistics, RNG states, config and every checkpoint object."""
        return run_state(
            env_steps=self.env_steps,
            updates=self.updates,
            train_stats=self.train_stats,
            total_steps=self.total_steps,
            elapsed_s=self._elapsed(),
            rng=capture_rng_state(self.rng, self.batches.rng_generators()),
            config=self.config,
            objects=self.checkpoint_objects,
        )

    def save(self) -> Path:
        """Write a checkpoint now (atomically); return its path.

        Raises:
            NonFiniteError: a floating-point array or tensor of a
                checkpoint object holds NaN or inf; nothing is written.
        """
        if self.checkpoint_dir is None:
            raise ConfigError("no checkpoint_dir was given to the runner")
        self.last_checkpoint = write_checkpoint(
            self.checkpoint_dir,
            self.state_dict(),
            self.env_steps,
            self.keep_checkpoints,
        )
        return self.last_checkpoint

    def load(self, path: str | Path) -> None:
        """Restore a checkpoint (a file, or a directory: its newest readable one).

        Counters, episode statistics, RNG states and every checkpoint object
        continue where they stopped; the sampler resets its envs on the next
        batch, and the logger (if it has ``rewind``) forgets what was logged
        after the checkpoint's step. An unreadable newest checkpoint is set
        aside with a :class:`~parllel.errors.ParllelWarning` and the
        newest readable one is loaded (its path is ``runner.resumed_from``).

        A checkpoint of a run with another ``total_steps`` loads with a
        :class:`~parllel.errors.ParllelWarning`: schedules of
        training progress (``env_steps / total_steps``) jump at this step.

        Raises:
            CheckpointMismatchError: when a checkpoint object's tensors or
                arrays have other shapes (each named with both shapes,
                followed by the config keys that differ), or else a
                ``config_keys`` entry differs; nothing is loaded then.
            CheckpointError: when the checkpoint has no state for an object.
        """
        self.batches.check_loadable()
        path, state = read_checkpoint(path)
        restore_objects(
            path, state, self.checkpoint_objects, self.config, self.config_keys
        )
        if self.publisher is not None:  # the restored weights reach the sampler
            self.publisher.publish_weights()
        saved = SavedCounters.of(state, self.train_stats)
        self.env_steps, self.updates = saved.env_steps, saved.updates
        self._elapsed_before = saved.elapsed_s
        restore_rng_state(state["rng"], self.rng, self.batches.rng_generators())
        self.resumed_from = path
        self.sampler.reset()
        if isinstance(self.logger, Rewindable):
            self.logger.rewind(self.env_steps)
        if saved.total_steps is not None and not self.finished:
            warn_total_steps_changed(
                self.env_steps, saved.total_steps, self.total_steps
            )


def _checked_stateful(objects: Mapping[str, Any]) -> dict[str, Stateful]:
    """``objects`` as a dict, each with ``state_dict`` and ``load_state_dict``
    (refused now, not at the first checkpoint, steps into the run)."""
    for name, obj in objects.items():
        methods = (getattr(obj, m, None) for m in ("state_dict", "load_state_dict"))
        if not all(callable(method) for method in methods):
            raise ConfigError(
                f"checkpoint_objects[{name!r}] ({type(obj).__name__}) has no "
                "state_dict() and load_state_dict(), through which a checkpoint "
                "saves and restores it. A JAX network is saved by its agent "
                "(checkpoint_objects={'agent': agent, 'sac': sac}), a torch "
                "network by itself or its agent"
            )
    return dict(objects)
