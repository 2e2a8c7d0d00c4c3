"""RunSettings: what every training script shares besides its algorithm.

Where the run is written, what the terminal and the loggers show, when it
evaluates, logs and checkpoints, and the wiring of those settings. A script
embeds it in its ``Config`` dataclass with its own cadence as defaults
(``run: RunSettings = RunSettings.field(eval_interval_steps=5_000)``); its
fields are flags without a prefix. Then::

    run = config.run.start("cartpole-ppo", config, seeds, resume)
    runner = OnPolicyRunner(sampler, ppo, config.total_steps,
                            **run.runner_options(config.total_steps, eval_sampler))
    return run.train(runner, close=(cage, eval_cage, sample_tree), policy=export)

See docs/training.md ("The script, phase by phase").
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from parllel.runners.outcome import report_outcome
from parllel.runners.run_directory import RunDirectory
from parllel.runners.training import build_run_logger, run_training
from parllel.seeding import Seeds, seed_everything

if TYPE_CHECKING:  # a backend is imported where the script asks for it
    from _typeshed import DataclassInstance

    from parllel.export.run_export import PolicyExporter
    from parllel.runners.runner import Runner
    from parllel.samplers.protocols import EvalSource

__all__ = ["RunSettings", "TrainingRun"]


@dataclasses.dataclass
class RunSettings:
    """Where a run is written, what the terminal and the loggers show, and
    when the run evaluates, logs and checkpoints."""

    run_root: str = "runs"
    """directory the run directory is created in"""
    console: Literal["auto", "dashboard", "plain", "table"] = "auto"
    """terminal output: auto is the live dashboard on a terminal, plain lines otherwise"""
    wandb_project: str | None = None
    """also log to this Weights & Biases project (the wandb extra)"""
    eval_interval_steps: int = 10_000
    """env steps between evaluations"""
    eval_episodes: int = 10
    """deterministic episodes per evaluation"""
    log_interval_steps: int | Literal["eval"] | None = "eval"
    """env steps between log lines, the rows of progress.csv (eval: at every evaluation; None: every iteration, as on Runner)"""
    checkpoint_interval_steps: int = 50_000
    """env steps between checkpoints (one is also written at the end)"""

    @classmethod
    def field(cls, **defaults: Any) -> Any:
        """A ``Config`` field holding these settings, with the script's own
        ``defaults`` (e.g. ``eval_interval_steps=5_000``)."""
        return dataclasses.field(default_factory=functools.partial(cls, **defaults))

    def start(
        self,
        name: str,
        config: DataclassInstance,
        seeds: Seeds,
        resume: str | None,
    ) -> TrainingRun:
        """Seed python, numpy and the learning library from ``seeds``
        (:func:`~parllel.seeding.seed_everything`) and open the run directory
        to resume, or create ``<run_root>/<name>-...`` holding ``config`` and
        ``seeds``."""
        seed_everything(seeds)
        if resume:
            directory = RunDirectory.open(resume)
        else:
            directory = RunDirectory.create(
                self.run_root, name, config=config, seeds=seeds
            )
        return TrainingRun(directory, self, config, resume)


@dataclasses.dataclass
class TrainingRun:
    """A run being trained (:meth:`RunSettings.start`): its directory, its
    settings and config, and the directory it resumes (None for a new run)."""

    directory: RunDirectory
    settings: RunSettings
    config: DataclassInstance
    resume: str | None = None

    @property
    def path(self) -> Path:
        """The run directory."""
        return self.directory.path

    def runner_options(
        self, total_steps: int, eval_sampler: EvalSource | None = None
    ) -> dict[str, Any]:
        """A runner's keyword arguments that are not its algorithm's.

        ``logger`` (:func:`~parllel.runners.build_run_logger`: the console,
        ``progress.csv``, TensorBoard, W&B), ``checkpoint_dir`` (the run's),
        ``config`` (saved in checkpoints), ``log_interval_steps`` and
        ``checkpoint_interval_steps``; with ``eval_sampler``, that and
        ``eval_interval_steps``.
        """
        settings = self.settings
        options: dict[str, Any] = {
            "logger": build_run_logger(
                self.directory,
                total_steps,
                resume=bool(self.resume),
                console=settings.console,
                wandb_project=settings.wandb_project,
            ),
            "checkpoint_dir": self.directory.checkpoints_dir,
            "config": dataclasses.asdict(self.config),
            "log_interval_steps": (
                settings.eval_interval_steps
                if settings.log_interval_steps == "eval"
                else settings.log_interval_steps
            ),
            "checkpoint_interval_steps": settings.checkpoint_interval_steps,
        }
        if eval_sampler is not None:
            options["eval_sampler"] = eval_sampler
            options["eval_interval_steps"] = settings.eval_interval_steps
        return options

    def train(
        self,
        runner: Runner[Any],
        *,
        close: tuple = (),
        policy: PolicyExporter | None = None,
    ) -> dict[str, float]:
        """Resume if asked, train, export ``policy``, close ``close``, plot
        (:func:`~parllel.runners.run_training`), then print how it ended and
        exit with its status unless 0 (:func:`~parllel.runners.outcome.report_outcome`);
        return the last metrics."""
        outcome = run_training(
            runner,
            self.directory,
            resume=bool(self.resume),
            close=close,
            policy=policy,
        )
        return report_outcome(outcome)
