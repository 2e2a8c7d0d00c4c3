"""The run logger and the run loop wrapper shared by the example scripts.

What a script prints and exits with when training ends is
:mod:`parllel.runners.outcome`'s (:func:`~parllel.runners.outcome.report_outcome`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from parllel.errors import CheckpointError, ConfigError, RunDirectoryError
from parllel.runners.outcome import TrainingOutcome

if TYPE_CHECKING:  # a backend is imported where the script asks for it
    from parllel.export.run_export import PolicyExporter
    from parllel.runners.run_directory import RunDirectory
    from parllel.runners.runner import Runner

#: The console outputs :func:`build_run_logger` offers.
CONSOLES = ("auto", "dashboard", "plain", "table")


def build_run_logger(
    run: Any,
    total_steps: int,
    *,
    resume: bool = False,
    resume_step: int | None = None,
    table_every: int = 4,
    console: str = "auto",
    wandb_project: str | None = None,
) -> Any:
    """The usual loggers of a run directory: the console, CSV and TensorBoard.

    ``console`` is ``"auto"`` (the live :class:`~parllel.logging.Dashboard` on a
    terminal, its plain lines elsewhere), ``"dashboard"``, ``"plain"`` or
    ``"table"`` (every ``table_every``-th log line). ``resume=True`` keeps the
    run's logs (:meth:`Runner.load <parllel.runners.Runner.load>` rewinds them;
    without a runner pass ``resume_step``). ``wandb_project`` adds a
    :class:`~parllel.logging.wandb_sink.WandbSink`. Needs the ``torch`` and
    ``logging`` extras (see docs/logging.md).

    Raises:
        ConfigError: if ``console`` is not one of :data:`CONSOLES`.
    """
    from parllel.logging import (
        CsvSink,
        Dashboard,
        MultiLogger,
        ProgressBar,
        StdoutTable,
        TensorBoardSink,
    )

    if console not in CONSOLES:
        raise ConfigError(f"console must be one of {CONSOLES}, got {console!r}")
    if console == "table":
        # the bar closes last: the table's final print goes through it
        bar = ProgressBar(total=total_steps)
        first: list[Any] = [StdoutTable(every=table_every, progress_bar=bar)]
        last: list[Any] = [bar]
    else:
        live = {"auto": None, "dashboard": True, "plain": False}[console]
        title = f"parllel · {run.path.name}"
        first, last = [Dashboard(total_steps, live=live, title=title)], []
    logger = MultiLogger(
        [
            *first,
            CsvSink(run.progress_csv, resume=resume),
            TensorBoardSink(run.tensorboard_dir),
            *last,
        ]
    )
    if wandb_project is not None:
        from parllel.logging.wandb_sink import WandbSink

        logger.loggers.append(WandbSink(wandb_project, run, resume=resume))
    if resume and resume_step is not None:
        logger.rewind(resume_step)
    return logger


def run_training(
    runner: Runner[Any],
    run: RunDirectory,
    *,
    resume: bool = False,
    close: tuple = (),
    policy: PolicyExporter | None = None,
) -> TrainingOutcome:
    """Resume if asked, run, export, always close ``close`` (and the runner's
    logger), plot; return how it ended.

    A finished or failed resume trains nothing and a second Ctrl-C stops at
    once; the outcome says why. ``close`` holds anything with ``close()``; with ``policy`` (a torch or
    JAX ``PolicyExport``) the run writes ``policy_spec.json`` before training
    and exports the policy after it. Pass the outcome to
    :func:`parllel.runners.outcome.report_outcome` (see docs/training.md).
    """
    from parllel.plot import plot_learning_curve

    outcome = TrainingOutcome(run.path, run.checkpoints_dir)
    algorithm = type(runner.algorithm).__name__ if policy is not None else None
    try:
        if policy is not None:
            policy.write_spec(run.path, runner.checkpoint_objects, algorithm=algorithm)
        if resume:
            try:
                runner.load(run.checkpoints_dir)
            except (CheckpointError, RunDirectoryError) as error:
                outcome.resume_error = str(error)
            else:
                run.record_resume(
                    runner.env_steps, runner.resumed_from, config=runner.config or None
                )
        if outcome.resume_error is None:
            outcome.already_finished = runner.finished
            if not outcome.already_finished:
                outcome.summary = runner.run()
                if policy is not None:
                    outcome.exported = policy.export(
                        run.path, env_steps=runner.env_steps, algorithm=algorithm
                    )
    except KeyboardInterrupt:
        outcome.stopped_at_once = True
    finally:
        for obj in (runner.logger, *close):
            if obj is not None:
                obj.close()
    if runner.stop_signals:
        outcome.stop_signal = int(runner.stop_signals[-1])
    outcome.env_steps, outcome.total_steps = runner.env_steps, runner.total_steps
    outcome.interrupted = runner.interrupted
    outcome.last_checkpoint = runner.last_checkpoint
    if outcome.stopped_at_once:
        outcome.newest_checkpoint = run.latest_checkpoint()
    if outcome.resume_error is None and not (
        outcome.stopped_at_once or outcome.already_finished
    ):
        try:
            plot_learning_curve(run.path)
        except (ConfigError, FileNotFoundError) as error:  # e.g. nothing logged yet
            outcome.plot_note = str(error)
        except KeyboardInterrupt:  # a second Ctrl-C after the graceful stop
            outcome.plot_note = "interrupted (python -m parllel.plot RUN_DIR draws it)"
    return outcome
