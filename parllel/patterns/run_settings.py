"""RunSettings: the run-directory, console and logging settings every
training script shares, and their wiring (run directory, loggers, where
checkpoints go, the config they hold).

A script embeds it in its ``Config`` dataclass; its fields are flags of
their own, without a prefix (:func:`parllel.runtime.cli.parse_config`):

    @dataclasses.dataclass
    class Config:
        total_steps: int = 100_000
        \"\"\"env steps to train for\"\"\"
        run: RunSettings = dataclasses.field(default_factory=RunSettings)
        \"\"\"run directory, console and logging\"\"\"

    run = config.run.open_run("cartpole-ppo", config, seeds, resume)
    runner = OnPolicyRunner(
        sampler, ppo, config.total_steps, ...,
        **config.run.runner_options(run, config, config.total_steps, resume),
    )
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Literal

from parllel.patterns.training import build_run_logger
from parllel.seeding import Seeds

if TYPE_CHECKING:  # parllel.runtime loads torch: imported where it is used
    from _typeshed import DataclassInstance

    from parllel.runtime.run_directory import RunDirectory

__all__ = ["RunSettings"]


@dataclasses.dataclass
class RunSettings:
    """Where a run is written and what the terminal and the loggers show."""

    run_root: str = "runs"
    """directory the run directory is created in"""
    console: Literal["auto", "dashboard", "plain", "table"] = "auto"
    """terminal output: auto is the live dashboard on a terminal, plain lines otherwise"""
    wandb_project: str | None = None
    """also log to this Weights & Biases project (the wandb extra)"""

    def open_run(
        self,
        name: str,
        config: DataclassInstance,
        seeds: Seeds,
        resume: str | None,
    ) -> RunDirectory:
        """The run directory to resume, or a new one ``<run_root>/<name>-...``
        holding ``config`` and ``seeds``."""
        from parllel.runtime.run_directory import RunDirectory

        if resume:
            return RunDirectory.open(resume)
        return RunDirectory.create(self.run_root, name, config=config, seeds=seeds)

    def runner_options(
        self,
        run: RunDirectory,
        config: DataclassInstance,
        total_steps: int,
        resume: str | None,
    ) -> dict[str, Any]:
        """A runner's ``logger`` (:func:`~parllel.patterns.build_run_logger`:
        the console, ``progress.csv``, TensorBoard, W&B), ``checkpoint_dir``
        (the run's) and ``config`` (saved in checkpoints)."""
        logger = build_run_logger(
            run,
            total_steps,
            resume=bool(resume),
            console=self.console,
            wandb_project=self.wandb_project,
        )
        return {
            "logger": logger,
            "checkpoint_dir": run.checkpoints_dir,
            "config": dataclasses.asdict(config),
        }
