"""SeedRuns: the directories of K seeds trained as one program (a group
directory holding one ordinary run directory per seed), and their wiring
to a :class:`~parllel.runners.seeds.SeedsRunner`.

    runs = start_seed_runs(config.run, "cartpole-ppo", config, seeds=4,
                           master=config.seed, n_envs=8, resume=resume)
    ...  # K * 8 envs, seeded with runs.env_seeds; SeedStack, SeededHandler, SeededPPO
    runner = SeedsRunner(sampler, seeded_ppo, config.total_steps,
                         runs.seed_runs(objects_of_run), **runs.runner_options(...))
    return runs.train(runner, close=(cage, sample_tree),
                      policy=lambda objects: PolicyExport(objects["model"], ...))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from statistics import median
from typing import TYPE_CHECKING, Any

from parllel.errors import CheckpointError, ConfigError, RunDirectoryError
from parllel.runners.outcome import TrainingOutcome, report_outcome
from parllel.runners.run_directory import RUNS_FILE, RunDirectory
from parllel.runners.training import build_run_logger
from parllel.seeding import Seeds, check_seed, seed_everything

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from parllel.backends import StatefulGenerator
    from parllel.export.run_export import PolicyExporter
    from parllel.runners.callbacks import Stateful
    from parllel.runners.run_settings import RunSettings
    from parllel.runners.seeds import SeedRun, SeedsRunner
    from parllel.samplers.protocols import EvalSource

__all__ = ["SeedRuns", "start_seed_runs"]


def _run_logger(directory: RunDirectory, resume: bool) -> Any:
    from parllel.logging import CsvSink, MultiLogger, TensorBoardSink

    return MultiLogger(
        [
            CsvSink(directory.progress_csv, resume=resume),
            TensorBoardSink(directory.tensorboard_dir),
        ]
    )


def start_seed_runs(
    settings: RunSettings,
    name: str,
    config: DataclassInstance,
    *,
    seeds: int,
    master: int,
    n_envs: int,
    n_eval_envs: int = 0,
    resume: str | None = None,
) -> SeedRuns:
    """Open (``resume``) or create the group directory of ``seeds`` runs.

    Run ``k`` has the master seed ``master + k`` and every seed a single run
    started with ``--seed master+k`` derives (:meth:`Seeds.from_master`).
    The group ``<run_root>/<name>-seeds<K>-...`` holds the config, the
    median over the runs in its own ``logs/progress.csv``, and one ordinary
    run directory per seed (``seed<master+k>-...``).

    Raises:
        ConfigError: ``seeds`` < 1.
        RunDirectoryError: ``resume`` is not a group of ``seeds`` runs.
    """
    if seeds < 1:
        raise ConfigError(f"seeds must be >= 1, got {seeds}")
    masters = [check_seed("seed", master) + k for k in range(seeds)]
    run_seeds = [
        Seeds.from_master(m, n_envs=n_envs, n_eval_envs=n_eval_envs) for m in masters
    ]
    seed_everything(run_seeds[0])
    if resume:
        group = RunDirectory.open(resume)
        listing = group.path / RUNS_FILE
        if not listing.is_file():
            raise RunDirectoryError(f"{group.path} is not a group of seed runs")
        names = listing.read_text().split()
        if len(names) != seeds:
            raise RunDirectoryError(
                f"{group.path} holds {len(names)} runs; --seeds asks for {seeds}"
            )
        directories = [RunDirectory.open(group.path / n) for n in names]
    else:
        group = RunDirectory.create(
            settings.run_root,
            f"{name}-seeds{seeds}",
            config=config,
            metadata={"seed_runs": masters},
        )
        directories = [
            RunDirectory.create(group.path, f"seed{m}", config=config, seeds=s)
            for m, s in zip(masters, run_seeds)
        ]
        (group.path / RUNS_FILE).write_text(
            "\n".join(d.path.name for d in directories) + "\n"
        )
    return SeedRuns(group, directories, run_seeds, settings, config, resume)


@dataclasses.dataclass
class SeedRuns:
    """K runs being trained as one program (:func:`start_seed_runs`)."""

    group: RunDirectory
    directories: list[RunDirectory]
    seeds: list[Seeds]
    settings: RunSettings
    config: DataclassInstance
    resume: str | None = None

    @property
    def env_seeds(self) -> list[int]:
        """Every run's env seeds, run after run (the cage's ``seed=``)."""
        return [seed for seeds in self.seeds for seed in seeds.envs]

    @property
    def eval_env_seeds(self) -> list[int]:
        """Every run's eval env seeds, run after run (the eval cage's ``seed=``)."""
        return [seed for seeds in self.seeds for seed in seeds.eval_envs]

    def seed_runs(
        self,
        objects: Callable[[int], Mapping[str, Stateful]],
        action_key: Callable[[int], StatefulGenerator | None] | None = None,
    ) -> list[SeedRun]:
        """The runner's :class:`~parllel.runners.seeds.SeedRun` s: each run's
        directory, its ``progress.csv`` and TensorBoard logger, the
        checkpoint objects ``objects(k)`` and action key ``action_key(k)``."""
        from parllel.runners.seeds import SeedRun

        return [
            SeedRun(
                seeds.master,
                directory,
                _run_logger(directory, bool(self.resume)),
                dict(objects(run)),
                None if action_key is None else action_key(run),
            )
            for run, (seeds, directory) in enumerate(zip(self.seeds, self.directories))
        ]

    def runner_options(
        self,
        total_steps: int,
        eval_sampler: EvalSource | None = None,
        eval_envs_per_run: int = 1,
    ) -> dict[str, Any]:
        """A :class:`~parllel.runners.seeds.SeedsRunner`'s keyword arguments
        that are not its algorithm's: the console (median over the runs, also
        the group's ``progress.csv``), config, log and checkpoint intervals;
        with ``eval_sampler`` (``eval_envs_per_run`` envs of each run), that
        and the evaluation interval."""
        settings = self.settings
        options: dict[str, Any] = {}
        if eval_sampler is not None:
            options = {
                "eval_sampler": eval_sampler,
                "eval_interval_steps": settings.eval_interval_steps,
                "eval_envs_per_run": eval_envs_per_run,
            }
        return options | {
            "console": build_run_logger(
                self.group,
                total_steps,
                resume=bool(self.resume),
                console=settings.console,
            ),
            "config": dataclasses.asdict(self.config),
            "log_interval_steps": (
                settings.eval_interval_steps
                if settings.log_interval_steps == "eval"
                else settings.log_interval_steps
            ),
            "checkpoint_interval_steps": settings.checkpoint_interval_steps,
        }

    def train(
        self,
        runner: SeedsRunner,
        *,
        close: tuple = (),
        policy: Callable[[Mapping[str, Stateful]], PolicyExporter] | None = None,
    ) -> list[dict[str, float]]:
        """Resume if asked, train, close every logger and ``close``, plot the
        runs (median and range); print how it ended (as a single run's
        script, with the median over the runs) and return each run's last
        metrics.

        With ``policy`` (a run's checkpoint objects -> the JAX
        ``PolicyExport`` of that run, e.g. of ``objects["model"]``, a
        :class:`~parllel.jax.seeds.RunView`) every run directory gets what a
        single run's gets from :func:`~parllel.runners.run_training`:
        ``policy_spec.json`` before training, ``policy.npz`` after it (not
        for a run stopped by a failure: its checkpoint holds its last
        weights)."""
        from parllel.plot import plot_learning_curve

        outcome = TrainingOutcome(self.group.path, self.directories[0].checkpoints_dir)
        results: list[dict[str, float]] = []
        exported: list[Path] = []
        # as a single run's: "PPO" for SeededPPO
        algorithm = type(runner.algorithm).__name__.removeprefix("Seeded")
        exports = (
            []
            if policy is None
            else [(run, policy(run.checkpoint_objects)) for run in runner.runs]
        )
        try:
            for run, export in exports:
                export.write_spec(
                    run.directory.path, run.checkpoint_objects, algorithm=algorithm
                )
            if self.resume:
                try:
                    runner.load()
                except (CheckpointError, RunDirectoryError) as error:
                    outcome.resume_error = str(error)
                else:
                    self._record_resume(runner)
            if outcome.resume_error is None:
                outcome.already_finished = runner.finished
                if not outcome.already_finished:
                    results = runner.run()
                    for k, (run, export) in enumerate(exports):
                        if k not in runner.algorithm.stopped:
                            exported.append(
                                export.export(
                                    run.directory.path,
                                    env_steps=runner.env_steps,
                                    algorithm=algorithm,
                                )
                            )
        except KeyboardInterrupt:
            outcome.stopped_at_once = True
        finally:
            loggers = [run.logger for run in runner.runs]
            for obj in (runner.console, *loggers, *close):
                if obj is not None:
                    obj.close()
        if runner.stop_signals:
            outcome.stop_signal = int(runner.stop_signals[-1])
        outcome.env_steps, outcome.total_steps = runner.env_steps, runner.total_steps
        outcome.interrupted = runner.interrupted
        finished = [metrics for metrics in results if metrics]
        outcome.summary = (
            {  # what the script prints: the median over the runs
                key: median(metrics[key] for metrics in finished if key in metrics)
                for key in finished[0]
            }
            if finished
            else {}
        )
        if outcome.resume_error is None and not outcome.stopped_at_once:
            try:
                plot_learning_curve(self.group.path)
            except (ConfigError, FileNotFoundError) as error:
                outcome.plot_note = str(error)
        for file in exported:  # what a single run's script prints, per run
            print(f"policy exported: {file}")
        report_outcome(outcome)
        return results

    def _record_resume(self, runner: SeedsRunner) -> None:
        """Record the resume as a single run's is recorded
        (:meth:`RunDirectory.record_resume`, with the config and what changed
        in it): in the group's metadata and in every run's."""
        config = runner.config or None
        self.group.record_resume(runner.env_steps, config=config)
        for run, checkpoint in zip(runner.runs, runner.resumed_from):
            run.directory.record_resume(runner.env_steps, checkpoint, config=config)

    @property
    def path(self) -> Path:
        """The group directory."""
        return self.group.path
