"""What the dashboard knows about a run: the latest metrics, rates, a little history.

:class:`DashboardState` is plain Python (no ``rich``): the live view and the
plain one-line summaries both read it, and tests drive it with a fake clock.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping

from parllel.logging.base import WarmupWatch
from parllel.logging.dashboard_text import (
    format_bytes,
    format_count,
    format_duration,
    format_number,
    format_return,
    join_parts,
)
from parllel.logging.process_usage import ProcessUsage

#: The learner phases (``time/frac/<phase>``) in the order they are shown.
LEARNER_PHASES = ("sample", "update", "eval", "checkpoint", "log", "other")
#: The sampler phases (``time/sampler/<phase>_ms``) in the order they are shown.
SAMPLER_PHASES = ("env_step", "worker_wait", "inference", "transforms", "other")
#: Episode statistics shown per ``train/``/``eval/`` quantity, in column order.
EPISODE_STATS = ("mean", "std", "min", "max")
#: The quantities of :class:`~parllel.logging.EpisodeStats` shown as rows.
EPISODE_QUANTITIES = ("return", "length")

RETURN_KEY = "train/return_mean"
EVAL_RETURN_KEY = "eval/return_mean"


def _ordered(names: list[str], order: tuple[str, ...]) -> list[str]:
    """``names`` in the order of ``order``, the unknown ones after, sorted."""
    known = [name for name in order if name in names]
    return known + sorted(set(names) - set(order))


class DashboardState:
    """The run as the dashboard sees it, updated by each ``log`` call.

    Every metric keeps its last logged value; recent ``train/return_mean``
    values feed the sparkline. Times come from ``now`` arguments, never the wall
    clock. The remaining time is unknown during an off-policy warm-up (no new
    ``time/updates``) and measured from its last line afterwards.

    Example:
        >>> state = DashboardState(total_steps=100_000, now=0.0)
        >>> state.update(25_000, {"time/elapsed_s": 10.0}, now=10.0)
        >>> state.average_rate(), state.remaining(now=14.0)
        (2500.0, 26.0)

    Args:
        total_steps: env steps of the whole run (None: open-ended).
        history: how many recent mean returns the sparkline keeps.
        now: the clock reading at the start of the run.
    """

    def __init__(
        self, total_steps: int | None = None, *, history: int = 60, now: float = 0.0
    ) -> None:
        self.total_steps = None if total_steps is None else int(total_steps)
        self.history = int(history)
        self.step = 0
        self.calls = 0
        self.latest: dict[str, float] = {}
        self.last_call: dict[str, float] = {}
        self.eval_step: int | None = None
        self.returns: deque[tuple[int, float]] = deque(maxlen=max(self.history, 1))
        self._start_step, self._start_at = 0, now
        self._log_at: float | None = None
        self._previous: tuple[int, float] | None = None
        self._warmup = WarmupWatch()
        self.warming_up = False  # no update since the previous log call
        # (step, elapsed seconds) of the last log call in a warm-up
        self._warmup_end: tuple[int, float] | None = None

    def snapshot(self) -> DashboardState:
        """An independent copy (for drawing while the original keeps changing)."""
        copy = DashboardState.__new__(DashboardState)
        copy.__dict__.update(self.__dict__)
        copy.latest, copy.last_call = dict(self.latest), dict(self.last_call)
        copy.returns = deque(self.returns, maxlen=self.returns.maxlen)
        return copy

    def _note_updates(self, metrics: Mapping[str, float]) -> None:
        """Whether this log call is in a warm-up (no update since the last one)."""
        warming_up = self._warmup.check(metrics)
        if warming_up is None:
            return
        self.warming_up = warming_up
        if warming_up:
            self._warmup_end = (self.step, self._logged_elapsed())

    # -- updates ---------------------------------------------------------------
    def update(self, step: int, metrics: Mapping[str, float], now: float) -> None:
        """Record one ``log(step, metrics)`` call made at clock reading ``now``."""
        if self._log_at is not None:
            self._previous = (self.step, self._log_at)
        self.step, self._log_at = int(step), now
        self.calls += 1
        self.last_call = dict(metrics)
        self.latest.update(metrics)
        if any(key.startswith("eval/") for key in metrics):
            self.eval_step = self.step
        if RETURN_KEY in metrics and math.isfinite(metrics[RETURN_KEY]):
            self.returns.append((self.step, float(metrics[RETURN_KEY])))
        self._note_updates(metrics)

    def rewind(self, step: int, now: float) -> None:
        """Continue from ``step`` (a resumed checkpoint): forget what came after it.

        Rates restart from ``step`` at ``now``; returns logged after ``step``
        leave the sparkline, and an evaluation logged after it is dropped.
        """
        step = int(step)
        kept = [(s, value) for s, value in self.returns if s <= step]
        self.returns = deque(kept, maxlen=self.returns.maxlen)
        if self.eval_step is not None and self.eval_step > step:
            self.latest = {
                k: v for k, v in self.latest.items() if not k.startswith("eval/")
            }
            self.eval_step = None
        self.step = self._start_step = step
        self._start_at, self._log_at, self._previous = now, None, None
        self.last_call = {}
        self.latest.pop("time/elapsed_s", None)
        self.latest.pop("time/steps_per_second", None)
        self._warmup.reset()
        self.warming_up, self._warmup_end = False, None

    # -- rates and times -------------------------------------------------------
    def _logged_elapsed(self) -> float:
        """Training seconds at the last log call (0 before one)."""
        if self._log_at is None:
            return 0.0
        logged = self.last_call.get("time/elapsed_s")
        if logged is None or not math.isfinite(logged):
            logged = self._log_at - self._start_at
        return logged

    def elapsed(self, now: float) -> float:
        """Training seconds at ``now``: the logged ``time/elapsed_s`` (which counts
        the runs a resumed run continues) plus the time since that log."""
        if self._log_at is None:
            return max(now - self._start_at, 0.0)
        return max(self._logged_elapsed() + now - self._log_at, 0.0)

    def current_rate(self) -> float | None:
        """Env steps per second over the last log interval (None before two points).

        The logged ``time/steps_per_second`` if the last call had it, otherwise
        measured between the last two calls.
        """
        logged = self.last_call.get("time/steps_per_second")
        if logged is not None and math.isfinite(logged):
            return float(logged)
        if self._previous is None or self._log_at is None:
            return None
        step, at = self._previous
        if self._log_at <= at:
            return None
        return (self.step - step) / (self._log_at - at)

    def average_rate(self) -> float | None:
        """Env steps per second since the start, as of the last log call.

        ``step / time/elapsed_s`` when the last call had ``time/elapsed_s``
        (a runner's, counting resumed runs), otherwise the steps since the
        start (or the last rewind) over the clock time they took.
        """
        if self._log_at is None:
            return None
        logged = self.last_call.get("time/elapsed_s")
        if logged is not None and math.isfinite(logged):
            return self.step / logged if logged > 0 else None
        seconds = self._log_at - self._start_at
        return (self.step - self._start_step) / seconds if seconds > 0 else None

    def fraction_done(self) -> float | None:
        """``step / total_steps`` clipped to ``[0, 1]`` (None if open-ended)."""
        if not self.total_steps:
            return None
        return min(max(self.step / self.total_steps, 0.0), 1.0)

    def training_rate(self) -> float | None:
        """Env steps per second while training: :meth:`average_rate`, or after
        a warm-up, over the steps since its last log call (None in a warm-up,
        or before a log call after it)."""
        if self.warming_up:
            return None
        if self._warmup_end is None:
            return self.average_rate()
        step, elapsed = self._warmup_end
        seconds = self._logged_elapsed() - elapsed
        return (self.step - step) / seconds if seconds > 0 else None

    def remaining(self, now: float) -> float | None:
        """Seconds left at the :meth:`training_rate`, counting down from the
        last log (None while it is unknown: in a warm-up)."""
        if self.total_steps is None:
            return None
        if self.step >= self.total_steps:
            return 0.0
        rate = self.training_rate()
        if not rate or rate <= 0 or self._log_at is None:
            return None
        left = (self.total_steps - self.step) / rate
        return max(left - (now - self._log_at), 0.0)

    # -- sections --------------------------------------------------------------
    def with_prefix(self, prefix: str) -> dict[str, float]:
        """The latest metrics under ``prefix``, keyed without it."""
        return {
            key[len(prefix) :]: value
            for key, value in self.latest.items()
            if key.startswith(prefix)
        }

    def learner_phases(self) -> list[tuple[str, float]]:
        """``(phase, fraction of the learner's wall time)`` from ``time/frac/*``."""
        fractions = self.with_prefix("time/frac/")
        return [
            (name, fractions[name])
            for name in _ordered(list(fractions), LEARNER_PHASES)
        ]

    def sampler_phases(self) -> tuple[float, list[tuple[str, float]]]:
        """``(ms per batch, [(phase, ms per batch)])`` from ``time/sampler/*_ms``.

        The total is ``time/sampler/batch_ms``, or the sum of the phases
        when it is missing; ``(nan, [])`` without sampler timings.
        """
        timings = {
            key[: -len("_ms")]: value
            for key, value in self.with_prefix("time/sampler/").items()
            if key.endswith("_ms")
        }
        total = timings.pop("batch", None)
        phases = [
            (name, timings[name]) for name in _ordered(list(timings), SAMPLER_PHASES)
        ]
        if total is None:
            total = sum(ms for _, ms in phases) if phases else math.nan
        return total, phases

    def episode_table(self, prefix: str) -> dict[str, dict[str, float]]:
        """``{quantity: {stat: value}}`` of the ``EpisodeStats`` metrics under ``prefix``."""
        metrics = self.with_prefix(prefix)
        table: dict[str, dict[str, float]] = {}
        for quantity in EPISODE_QUANTITIES:
            row = {
                stat: metrics[f"{quantity}_{stat}"]
                for stat in EPISODE_STATS
                if f"{quantity}_{stat}" in metrics
            }
            if row:
                table[quantity] = row
        return table

    def eval_extras(self) -> list[tuple[str, float]]:
        """The ``eval/`` metrics that are not in :meth:`episode_table` (sorted)."""
        shown = {
            f"{quantity}_{stat}"
            for quantity in (*EPISODE_QUANTITIES, "discounted_return")
            for stat in EPISODE_STATS
        }
        shown.add("episodes")
        return sorted(
            (key, value)
            for key, value in self.with_prefix("eval/").items()
            if key not in shown
        )

    def losses(self) -> list[tuple[str, float]]:
        """Every ``algo/`` metric, sorted by name."""
        return sorted(self.with_prefix("algo/").items())

    # -- the plain summary -----------------------------------------------------
    def summary_line(self, now: float, usage: ProcessUsage | None = None) -> str:
        """One line for a log call, without escape codes.

        Example: ``step 12,288/102,400 (12%) | 4,512 steps/s (avg 4,210) |
        return 87.3 | eval 200.0 | policy_loss -0.0123 | elapsed 0:00:03 |
        eta 0:00:21``.
        """
        step = f"step {format_count(self.step)}"
        fraction = self.fraction_done()
        if fraction is not None:
            step += f"/{format_count(self.total_steps or 0)} ({fraction:.0%})"
        rate, average = self.current_rate(), self.average_rate()
        speed = "" if rate is None else f"{format_count(rate)} steps/s"
        if speed and average is not None:
            speed += f" (avg {format_count(average)})"
        parts = [step, speed]
        if RETURN_KEY in self.last_call:
            parts.append(f"return {format_return(self.last_call[RETURN_KEY])}")
        if EVAL_RETURN_KEY in self.last_call:
            parts.append(f"eval {format_return(self.last_call[EVAL_RETURN_KEY])}")
        parts += [
            f"{name} {format_number(value)}"
            for name, value in self.losses()
            if "loss" in name and f"algo/{name}" in self.last_call
        ]
        lag = self.last_call.get("async/lag_max")
        if lag is not None:
            parts.append(f"lag {format_count(lag)}")
        for key, label in (
            ("async/restarts", "restarts"),
            ("async/dropped_batches", "dropped"),
            ("async/timeouts", "timeouts"),
        ):
            if self.last_call.get(key, 0) > 0:
                parts.append(f"{label} {format_count(self.last_call[key])}")
        parts.append(f"elapsed {format_duration(self.elapsed(now))}")
        remaining = self.remaining(now)
        if remaining is not None:
            parts.append(f"eta {format_duration(remaining)}")
        if usage is not None:
            parts.append(
                f"cpu {usage.cpu_percent:.0f}% mem {format_bytes(usage.rss_bytes)}"
            )
        return join_parts(parts)
