"""What a runner warns about before and while it trains, and the logger
hooks it tells (notices shown, rewinds on resume).

Every warning is attributed to the user's line that called into parllel
(``runner.run()``, ``runner.load(...)``, ``run_training(...)``), not to a
line of parllel.
"""

from __future__ import annotations

import os
from typing import Protocol, runtime_checkable

from parllel._warnings import warn_at_caller
from parllel.errors import ParllelWarning


def warn_partial_batch(env_steps: int, total_steps: int, steps_per_batch: int) -> None:
    """Warn (:class:`ParllelWarning`) if training will stop past ``total_steps``.

    Training runs in whole batches, so it stops at the first multiple of
    ``steps_per_batch`` (counted from ``env_steps``) at or past ``total_steps``.
    """
    batches = -(-(total_steps - env_steps) // steps_per_batch)
    final = env_steps + batches * steps_per_batch
    if final != total_steps:
        warn_at_caller(
            f"total_steps={total_steps} is not a whole number of batches "
            f"of {steps_per_batch} env steps: training runs {batches} "
            f"batch{'es' if batches != 1 else ''} and stops at {final} env steps",
            ParllelWarning,
        )


def warn_learning_never_starts(
    stored: int, needed: int, env_steps: int, total_steps: int, steps_per_batch: int
) -> None:
    """Warn (:class:`ParllelWarning`) if the replay cannot fill up to its
    first update before ``total_steps``: the run would make no update.

    Args:
        stored: transitions the replay holds now.
        needed: transitions it needs before the first update (its
            ``learning_starts``, and at least a batch).
        env_steps: the runner's env steps so far.
        total_steps: where training stops (in whole batches).
        steps_per_batch: env steps (so transitions, at most) each batch adds.
    """
    added = -(-(total_steps - env_steps) // steps_per_batch) * steps_per_batch
    if stored + added >= needed:
        return
    warn_at_caller(
        f"the replay holds {stored} transitions and needs {needed} before the "
        f"first update (its learning_starts, and a batch), but training to "
        f"total_steps={total_steps} adds at most {added}: this run makes no "
        "gradient update, its weights and evaluations stay as they are; lower "
        "learning_starts (the examples' --learning-starts) or train to at least "
        f"total_steps={env_steps + needed - stored}",
        ParllelWarning,
    )


def warn_sigint_ignored(handles_sigterm: bool, checkpoints: bool) -> None:
    """Warn (:class:`ParllelWarning`) that Ctrl-C cannot stop this run.

    Args:
        handles_sigterm: the runner stops safely on SIGTERM.
        checkpoints: the runner writes a checkpoint when it stops.
    """
    how = f"stop it with `kill {os.getpid()}`"
    if handles_sigterm:
        saving = " and writes a checkpoint" if checkpoints else ""
        how += f" (SIGTERM: training stops after the current iteration{saving})"
    warn_at_caller(
        "SIGINT is ignored in this process, as in a job a shell script starts "
        "in the background (`cmd &`), so Ctrl-C and `kill -INT` cannot stop "
        f"this run: {how}, or start it where SIGINT is not ignored (in the "
        "foreground, or with job control: `set -m` before `cmd &`)",
        ParllelWarning,
    )


def warn_total_steps_changed(
    env_steps: int, saved_total_steps: int, total_steps: int
) -> None:
    """Warn (:class:`ParllelWarning`) if a resume changes ``total_steps``.

    Schedules that follow ``env_steps / total_steps`` (linear learning-rate
    and clip-range decays) then jump at the resume step.
    """
    if saved_total_steps == total_steps:
        return
    before = min(1.0, env_steps / saved_total_steps)
    after = min(1.0, env_steps / total_steps)
    warn_at_caller(
        f"resuming at env step {env_steps} with total_steps={total_steps}, but "
        f"the checkpoint's run had total_steps={saved_total_steps}: schedules of "
        "training progress (env_steps / total_steps, e.g. linear learning-rate "
        f"and clip-range decays) jump from {before:.1%} to {after:.1%} done at "
        f"this step, then reach their final values at step {total_steps} "
        f"instead of {saved_total_steps}",
        ParllelWarning,
    )


@runtime_checkable
class NoticeShower(Protocol):
    """A logger that shows notices itself (the live dashboard)."""

    def notice(self, text: str) -> None:
        """Show ``text`` where the user looks."""
        ...


@runtime_checkable
class Rewindable(Protocol):
    """A logger that can forget what it logged after a step (on resume)."""

    def rewind(self, step: int) -> None:
        """Drop what was logged after ``step``."""
        ...


def show_notices(logger: object, notices: list[str]) -> None:
    """Hand the stop requests received to the logger (if it shows notices:
    a live dashboard redraws over stderr) and forget them; called outside
    the signal handler, since a logger may not be re-entered from one."""
    while notices:
        text = notices.pop(0)
        if isinstance(logger, NoticeShower):
            logger.notice(text)
