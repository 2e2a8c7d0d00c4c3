"""The run logger and the run loop wrapper shared by the example scripts."""

from __future__ import annotations

import sys
from signal import SIGINT
from typing import Any

from parllel.errors import CheckpointError, ConfigError, RunDirectoryError

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

    ``console`` chooses what the terminal shows:

    - ``"auto"`` (default): the live :class:`~parllel.logging.Dashboard` when
      stdout is a terminal, otherwise its plain one-line summaries;
    - ``"dashboard"``: the live dashboard even off a terminal;
    - ``"plain"``: one plain line per log call;
    - ``"table"``: a compact table every ``table_every``-th log line and at
      the end, written through a tqdm progress bar so the two never collide.

    Every metric goes to ``progress.csv`` and TensorBoard.

    ``resume=True`` keeps the run's ``progress.csv`` and TensorBoard events;
    :meth:`Runner.load <parllel.runners.Runner.load>` then rewinds them to the
    checkpoint's step (rows and events logged after it are dropped, so no step
    appears twice). Without a runner, pass ``resume_step`` to rewind here.

    With ``wandb_project``, metrics, config and metadata also go to a
    Weights & Biases run of that project (:class:`~parllel.logging.wandb_sink.WandbSink`,
    the ``wandb`` extra; ``WANDB_MODE=offline`` keeps it local), the same
    W&B run when resuming.

    Needs the ``torch`` and ``logging`` extras (TensorBoard; rich for the
    dashboard, tqdm for the table's bar).

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
    runner: Any,
    run: Any,
    *,
    resume: bool = False,
    close: tuple = (),
    policy: Any = None,
) -> dict[str, float]:
    """Resume if asked, run, always close ``close`` (and the runner's logger), plot.

    Prints the outcome. After a normal end: the final eval return and the run
    directory; the last metrics are returned. A resumed run that had already
    finished trains nothing and says so (returns ``{}``). A resume that fails
    (no readable checkpoint, one that does not fit) prints why, without a
    traceback, and exits with status 1. After Ctrl-C: the checkpoint written,
    the run directory and the command that resumes it, then ``SystemExit(130)``
    (the shell's status for Ctrl-C; 143 after SIGTERM), also after a second
    Ctrl-C that skipped the checkpoint (which says so when the run has no
    checkpoint to resume from). ``close`` holds anything with ``close()``
    (cages, sample trees). The learning curve needs the ``plot`` extra.
    """
    from parllel.plot import plot_learning_curve
    from parllel.runtime.cli import resume_command

    summary: dict[str, float] = {}
    already_finished = exited_at_once = False
    resume_error: Exception | None = None
    algorithm = type(runner.algorithm).__name__ if policy is not None else None
    exported = None
    try:
        if policy is not None:
            policy.write_spec(run.path, runner.checkpoint_objects, algorithm=algorithm)
        if resume:
            try:
                runner.load(run.checkpoints_dir)
            except (CheckpointError, RunDirectoryError) as error:
                resume_error = error
            else:
                run.record_resume(
                    runner.env_steps, runner.resumed_from, config=runner.config or None
                )
        if resume_error is None:
            already_finished = runner.finished
            if not already_finished:
                summary = runner.run()
                if policy is not None:
                    exported = policy.export(
                        run.path, env_steps=runner.env_steps, algorithm=algorithm
                    )
    except KeyboardInterrupt:
        exited_at_once = True
    finally:
        for obj in (runner.logger, *close):
            if obj is not None:
                obj.close()
    signals = getattr(runner, "stop_signals", None)
    status = 128 + int(signals[-1] if signals else SIGINT)
    if resume_error is not None:
        print(f"cannot resume {run.path}: {resume_error}", file=sys.stderr)
        raise SystemExit(1)
    if exited_at_once:
        newest = run.latest_checkpoint()
        if newest is None:
            print(
                "interrupted before the first checkpoint: the run cannot be "
                f"resumed (nothing in {run.checkpoints_dir}); run in {run.path}"
            )
        else:
            print(f"interrupted: exited without a new checkpoint; run in {run.path}")
            print(f"newest checkpoint: {newest}")
            print(f"resume with: {resume_command(run.path)}")
        raise SystemExit(status)
    if already_finished:
        print(
            f"run already finished: {runner.env_steps} of total_steps "
            f"{runner.total_steps} env steps done, nothing to train (resume "
            f"with a larger --total-steps to train further); run in {run.path}"
        )
        return {}
    if exported is not None:
        print(f"policy exported: {exported}")
    try:
        plot_learning_curve(run.path)
    except (ConfigError, FileNotFoundError) as error:  # e.g. nothing logged yet
        print(f"no learning curve: {error}")
    except KeyboardInterrupt:  # a second Ctrl-C after the graceful stop
        print(
            "no learning curve: interrupted (python -m parllel.plot RUN_DIR draws it)"
        )
    if runner.interrupted:
        print(f"interrupted at step {runner.env_steps}; run in {run.path}")
        if runner.last_checkpoint is not None:
            print(f"checkpoint written: {runner.last_checkpoint}")
            print(f"resume with: {resume_command(run.path)}")
        raise SystemExit(status)
    outcome = f"{runner.env_steps} steps"
    if "eval/return_mean" in summary:  # runs without an eval sampler have none
        outcome = f"eval return {summary['eval/return_mean']:.1f} after {outcome}"
    print(f"{outcome}; run in {run.path}")
    return summary
