"""Runner: the outer training loop shared by on- and off-policy training.

It owns counters, logging cadence, evaluation, checkpoints, resume and
callbacks; a subclass says what one iteration does (:meth:`Runner._iterate`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from parllel import fields
from parllel.errors import CheckpointError, ConfigError
from parllel.logging import EpisodeStats, Logger
from parllel.runners.checkpoint import (
    capture_rng_state,
    check_config,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
)
from parllel.runners.finite import refuse_nonfinite_state


class Stateful(Protocol):
    """Anything a checkpoint saves: a torch module, optimizer, algorithm, transform."""

    def state_dict(self) -> Any:
        """Everything needed to continue later (picklable by ``torch.save``)."""
        ...

    def load_state_dict(self, state: Any) -> Any:
        """Restore what :meth:`state_dict` returned."""
        ...


class Callback:
    """Hooks the runner calls; subclass and override the ones you need.

    Every hook receives the runner (counters: ``runner.env_steps``,
    ``runner.updates``; ``runner.request_stop()`` ends training after the
    current iteration).
    """

    def on_train_start(self, runner: Any) -> None:
        """Before the first batch (after a resume, with restored counters)."""

    def on_collect_end(self, runner: Any, batch: Any, traj_infos: list) -> None:
        """After a batch was collected and transformed, before optimizing."""

    def on_update_end(self, runner: Any, metrics: dict[str, float]) -> None:
        """After the algorithm's update; ``metrics`` is what will be logged."""

    def on_eval_end(self, runner: Any, eval_metrics: dict[str, float]) -> None:
        """After an evaluation."""

    def on_train_end(self, runner: Any) -> None:
        """After the last iteration (also when stopped early)."""


def _schedule(interval: int | None, name: str) -> int | None:
    if interval is None:
        return None
    if int(interval) < 1:
        raise ConfigError(f"{name} must be >= 1 env steps (or None), got {interval}")
    return int(interval)


class Runner:
    """The outer training loop; subclasses define one iteration.

    Each iteration (:meth:`_iterate`) collects env steps and updates the
    algorithm; around it the runner keeps counters, logs every
    ``log_interval_steps`` (train-episode statistics, algorithm metrics,
    throughput), evaluates every ``eval_interval_steps`` with
    ``eval_sampler.collect()``, and checkpoints every
    ``checkpoint_interval_steps`` every object in ``checkpoint_objects`` plus
    counters, RNG states and config. Callbacks see every phase.

    Args:
        sampler: has ``collect_batch() -> (batch, traj_infos)`` and a
            ``sample_tree`` (env steps per batch = T * B).
        algorithm: the learner; what is called on it depends on the subclass.
        total_steps: env steps to train for.
        eval_sampler: has ``collect() -> traj_infos`` (None: no evaluation).
        eval_interval_steps: env steps between evaluations (also one at the end).
        logger: a :class:`~parllel.logging.Logger` (None: no logging).
        log_interval_steps: env steps between log lines (None: every iteration).
        checkpoint_dir: where checkpoints go (None: no checkpoints).
        checkpoint_interval_steps: env steps between checkpoints (also one at
            the end).
        keep_checkpoints: how many checkpoints to keep.
        checkpoint_objects: name -> object with ``state_dict`` /
            ``load_state_dict`` (model, algorithm, transforms, replay, ...).
        config: the run's resolved config (saved in checkpoints; a resume
            refuses a checkpoint whose config differs in ``config_keys``).
        config_keys: config keys that must match on resume (None: all).
        callbacks: :class:`Callback` objects.
        episode_window: train episodes averaged in the logged statistics.
        rng: the numpy Generator of the run (its state is checkpointed).
    """

    def __init__(
        self,
        sampler: Any,
        algorithm: Any,
        total_steps: int,
        *,
        eval_sampler: Any = None,
        eval_interval_steps: int | None = None,
        logger: Logger | None = None,
        log_interval_steps: int | None = None,
        checkpoint_dir: str | Path | None = None,
        checkpoint_interval_steps: int | None = None,
        keep_checkpoints: int = 3,
        checkpoint_objects: Mapping[str, Stateful] | None = None,
        config: Mapping[str, Any] | None = None,
        config_keys: Sequence[str] | None = None,
        callbacks: Sequence[Callback] = (),
        episode_window: int = 100,
        rng: Any = None,
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
        self.checkpoint_objects = dict(checkpoint_objects or {})
        self.config = dict(config or {})
        self.config_keys = config_keys
        self.callbacks = list(callbacks)
        self.rng = rng
        tree = sampler.sample_tree
        self.steps_per_batch = int(
            tree[fields.REWARD].shape[0] * tree[fields.REWARD].shape[1]
        )
        self.env_steps = 0
        self.updates = 0
        self.train_stats = EpisodeStats(window=episode_window, prefix="train/")
        self.last_eval: dict[str, float] = {}
        self._stop = False
        self._next = {"log": 0, "eval": 0, "checkpoint": 0}
        self._start_time = time.perf_counter()
        self._last_log = (self._start_time, 0)

    # -- control ---------------------------------------------------------------
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

    # -- the loop --------------------------------------------------------------
    def run(self) -> dict[str, float]:
        """Train until ``total_steps`` (or a stop request); return the last metrics."""
        self._start_time = time.perf_counter()
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
            algo_metrics = self._iterate()
            metrics = self._metrics(algo_metrics)
            self._call("on_update_end", metrics)
            evaluated = self._due("eval", self.eval_interval_steps)
            if evaluated:
                metrics.update(self.evaluate())
            log_due = self.log_interval_steps is None or self._due(
                "log", self.log_interval_steps
            )
            if log_due or evaluated:  # evaluation results are always logged
                self._log(metrics)
            if self._due("checkpoint", self.checkpoint_interval_steps):
                self.save()
        if (
            self.eval_sampler is not None
            and self.last_eval.get("_at") != self.env_steps
        ):
            metrics.update(self.evaluate())
            self._log(metrics)
        elif metrics and self._last_log[1] != self.env_steps:
            self._log(metrics)  # the final step always gets a log line
        if self.checkpoint_dir is not None:
            self.save()
        self._call("on_train_end")
        return {k: v for k, v in metrics.items() if not k.startswith("_")}

    def _collect(self) -> Any:
        """Collect one batch, count its steps and episodes, call the hook."""
        batch, traj_infos = self.sampler.collect_batch()
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
        now = time.perf_counter()
        since, steps_then = self._last_log
        metrics = {f"algo/{k}": float(v) for k, v in algo_metrics.items()}
        metrics.update(self.train_stats.metrics())
        metrics["time/env_steps"] = float(self.env_steps)
        metrics["time/updates"] = float(self.updates)
        metrics["time/elapsed_s"] = now - self._start_time
        metrics["time/steps_per_second"] = (self.env_steps - steps_then) / max(
            now - since, 1e-9
        )
        return metrics

    def _log(self, metrics: dict[str, float]) -> None:
        self._last_log = (time.perf_counter(), self.env_steps)
        if self.logger is not None:
            self.logger.log(
                self.env_steps, {k: v for k, v in metrics.items() if k[0] != "_"}
            )

    def evaluate(self) -> dict[str, float]:
        """Run the eval sampler now; return ``eval/...`` metrics."""
        stats = EpisodeStats(window=10**9, prefix="eval/")
        stats.extend(self.eval_sampler.collect())
        eval_metrics = stats.metrics()
        self.last_eval = {**eval_metrics, "_at": self.env_steps}
        self._call("on_eval_end", eval_metrics)
        return eval_metrics

    # -- checkpoints -----------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Counters, statistics, RNG states, config and every checkpoint object."""
        return {
            "runner": {
                "env_steps": self.env_steps,
                "updates": self.updates,
                "train_stats": self.train_stats.state_dict(),
                "total_steps": self.total_steps,
            },
            "rng": capture_rng_state(self.rng),
            "config": self.config,
            "objects": {
                name: obj.state_dict() for name, obj in self.checkpoint_objects.items()
            },
        }

    def save(self) -> Path:
        """Write a checkpoint now (atomically); return its path.

        Raises:
            NonFiniteCheckpointError: a tensor of a checkpoint object holds
                NaN or inf; nothing is written.
        """
        if self.checkpoint_dir is None:
            raise ConfigError("no checkpoint_dir was given to the runner")
        state = self.state_dict()
        # NaN/inf weights never replace the last good checkpoint
        refuse_nonfinite_state(state["objects"], self.checkpoint_dir, self.env_steps)
        return save_checkpoint(
            self.checkpoint_dir,
            state,
            step=self.env_steps,
            keep_last=self.keep_checkpoints,
        )

    def load(self, path: str | Path) -> None:
        """Restore a checkpoint (a file, or a directory: its newest checkpoint).

        Counters, episode statistics, RNG states and every checkpoint object
        continue where they stopped; the sampler resets its envs on the next
        batch. A checkpoint whose config or objects do not match raises
        :class:`~parllel.errors.CheckpointMismatchError` naming the difference.
        """
        state = load_checkpoint(path)
        check_config(state.get("config", {}), self.config, keys=self.config_keys)
        saved_objects = state.get("objects", {})
        missing = sorted(set(self.checkpoint_objects) - set(saved_objects))
        if missing:
            raise CheckpointError(f"checkpoint {path} has no state for {missing}")
        for name, obj in self.checkpoint_objects.items():
            _load_object(name, obj, saved_objects[name])
        runner = state["runner"]
        self.env_steps = int(runner["env_steps"])
        self.updates = int(runner["updates"])
        self.train_stats.load_state_dict(runner["train_stats"])
        restore_rng_state(state["rng"], self.rng)
        reset = getattr(self.sampler, "reset", None)
        if callable(reset):
            reset()


def _load_object(name: str, obj: Stateful, state: Any) -> None:
    """Load ``state`` into ``obj``; torch modules are shape-checked first."""
    check: Callable[..., Any] | None = None
    if hasattr(obj, "named_parameters"):
        from parllel.runners.checkpoint import check_state_dict

        check = check_state_dict
    if check is not None:
        check(state, obj.state_dict(), name=name)
    obj.load_state_dict(state)
