"""How a training run ended, and what a script prints and exits with then.

:func:`~parllel.runners.run_training` returns a :class:`TrainingOutcome`;
:func:`report_outcome` prints it (the exported policy and final return, or
the checkpoint and the command that resumes the run) and exits with its
status. See docs/training.md ("The command line").
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from signal import SIGINT


def _strip_resume(args: Sequence[str]) -> list[str]:
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--resume":
            skip = True
        elif not arg.startswith("--resume="):
            kept.append(arg)
    return kept


def resume_command(run_dir: str | Path, argv: Sequence[str] | None = None) -> str:
    """The shell command that resumes ``run_dir``: this command with ``--resume``.

    The interpreter and script are taken as they were typed
    (``sys.orig_argv``); the flags are kept (they override the resumed
    config, so they give the same config again), an earlier ``--resume`` is
    replaced.

    Args:
        run_dir: the run directory.
        argv: the script's arguments (default ``sys.argv[1:]``).
    """
    full = list(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
    prefix = full[: max(1, len(full) - len(sys.argv) + 1)]
    args = list(sys.argv[1:] if argv is None else argv)
    return shlex.join([*prefix, *_strip_resume(args), "--resume", str(run_dir)])


@dataclasses.dataclass
class TrainingOutcome:
    """How a training run ended (what :func:`~parllel.runners.run_training` did).

    Attributes:
        run_path: the run directory.
        checkpoints_dir: its checkpoints.
        summary: the last metrics (empty unless it trained to the end or
            stopped gracefully).
        env_steps: env steps done.
        total_steps: env steps asked for.
        resume_error: why the resume failed (nothing trained), or None.
        already_finished: a resumed run had done its ``total_steps``.
        interrupted: Ctrl-C or SIGTERM stopped it after an iteration.
        stopped_at_once: a second Ctrl-C stopped it at once (no checkpoint
            written then).
        stop_signal: the last stop signal received (``SIGINT`` if none).
        newest_checkpoint: the newest checkpoint of the run (for a stop at once).
        last_checkpoint: the checkpoint the runner wrote last, or None.
        exported: the exported policy file, or None.
        plot_note: why no learning curve was drawn, or None.
    """

    run_path: Path
    checkpoints_dir: Path
    summary: dict[str, float] = dataclasses.field(default_factory=dict)
    env_steps: int = 0
    total_steps: int = 0
    resume_error: str | None = None
    already_finished: bool = False
    interrupted: bool = False
    stopped_at_once: bool = False
    stop_signal: int = int(SIGINT)
    newest_checkpoint: Path | None = None
    last_checkpoint: Path | None = None
    exported: Path | None = None
    plot_note: str | None = None

    @property
    def exit_status(self) -> int:
        """0 after a normal end, 1 after a failed resume, ``128 + signal``
        (130 for Ctrl-C, 143 for SIGTERM) after a stop."""
        if self.resume_error is not None:
            return 1
        if self.stopped_at_once or self.interrupted:
            return 128 + self.stop_signal
        return 0


def report_outcome(outcome: TrainingOutcome) -> dict[str, float]:
    """Print how training ended; exit with :attr:`TrainingOutcome.exit_status`
    unless it is 0; return the last metrics.

    After a normal end: the exported policy, the final eval return and the run
    directory. A resumed run that had already finished says so (returns
    ``{}``). A failed resume prints why (to stderr, without a traceback).
    After a stop: the checkpoint written (or why none can be resumed), the
    run directory and the command that resumes it.

    Raises:
        SystemExit: status 1 after a failed resume, 130 after Ctrl-C, 143
            after SIGTERM.
    """
    path = outcome.run_path
    if outcome.resume_error is not None:
        print(f"cannot resume {path}: {outcome.resume_error}", file=sys.stderr)
        raise SystemExit(outcome.exit_status)
    if outcome.stopped_at_once:
        newest = outcome.newest_checkpoint
        if newest is None:
            print(
                "interrupted before the first checkpoint: the run cannot be "
                f"resumed (nothing in {outcome.checkpoints_dir}); run in {path}"
            )
        else:
            print(f"interrupted: exited without a new checkpoint; run in {path}")
            print(f"newest checkpoint: {newest}")
            print(f"resume with: {resume_command(path)}")
        raise SystemExit(outcome.exit_status)
    if outcome.already_finished:
        print(
            f"run already finished: {outcome.env_steps} of total_steps "
            f"{outcome.total_steps} env steps done, nothing to train (resume "
            f"with a larger --total-steps to train further); run in {path}"
        )
        return {}
    if outcome.exported is not None:
        print(f"policy exported: {outcome.exported}")
    if outcome.plot_note is not None:
        print(f"no learning curve: {outcome.plot_note}")
    if outcome.interrupted:
        print(f"interrupted at step {outcome.env_steps}; run in {path}")
        if outcome.last_checkpoint is not None:
            print(f"checkpoint written: {outcome.last_checkpoint}")
            print(f"resume with: {resume_command(path)}")
        raise SystemExit(outcome.exit_status)
    summary = outcome.summary
    steps = f"{outcome.env_steps} steps"
    if "eval/return_mean" in summary:  # runs without an eval sampler have none
        steps = f"eval return {summary['eval/return_mean']:.1f} after {steps}"
    print(f"{steps}; run in {path}")
    return summary
