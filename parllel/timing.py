"""Where the time goes: seconds per named phase, summed until read.

Samplers record, once per batch, how long they spent stepping envs, waiting
on worker processes, in inference and in transforms (clocks are read once
per time step of the batch, never per env); the runners record their own
phases (sampling, the update, evaluation, logging, checkpoints) and log both
as ``time/...`` metrics. :class:`PhaseTimes` is the accumulator they share:
plain floats, cheap to fill in a hot loop and to send between processes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: A sampler's phases, in the order they are shown. ``batch`` is the whole
#: ``collect_batch`` call; what the others leave of it (episode bookkeeping,
#: resets, NaN checks) is reported as ``other``.
SAMPLER_PHASES = ("env_step", "worker_wait", "inference", "transforms")


class PhaseTimes:
    """Seconds per phase summed over ``count`` recordings (batches).

    Example:
        >>> times = PhaseTimes()
        >>> times.record({"batch": 0.010, "inference": 0.004})
        >>> times.record({"batch": 0.012, "inference": 0.005})
        >>> times.per_record_ms()
        {'batch': 11.0, 'inference': 4.5}
        >>> times.take()["count"], times.count
        (2, 0)

    Attributes:
        count: recordings since the last :meth:`take`.
        seconds: phase name -> seconds summed over them.
    """

    def __init__(self) -> None:
        self.count = 0
        self.seconds: dict[str, float] = {}

    def record(self, seconds: Mapping[str, float], count: int = 1) -> None:
        """Add one recording (``count`` batches) of seconds per phase."""
        total = self.seconds
        for phase, value in seconds.items():
            total[phase] = total.get(phase, 0.0) + value
        self.count += count

    def merge(self, taken: Mapping[str, Any]) -> None:
        """Add what another accumulator's :meth:`take` returned (e.g. sent
        by a sampler in another process)."""
        if taken.get("count"):
            self.record(taken["seconds"], taken["count"])

    def take(self) -> dict[str, Any]:
        """Return ``{"count": n, "seconds": {phase: s}}`` and start over."""
        taken = {"count": self.count, "seconds": self.seconds}
        self.count, self.seconds = 0, {}
        return taken

    def per_record_ms(self) -> dict[str, float]:
        """Milliseconds per recording of each phase (empty before any)."""
        if not self.count:
            return {}
        return {
            phase: 1000.0 * value / self.count for phase, value in self.seconds.items()
        }


def sampler_metrics(taken: Mapping[str, Any]) -> dict[str, float]:
    """``time/sampler/<phase>_ms`` per batch from a sampler's :meth:`PhaseTimes.take`.

    Gives ``batch_ms``, one entry per phase of :data:`SAMPLER_PHASES` that
    was recorded, and ``other_ms`` (the batch's time outside them, never
    negative); empty when no batch was recorded.
    """
    count = taken.get("count", 0)
    if not count:
        return {}
    seconds = taken["seconds"]
    per_batch = {phase: 1000.0 * value / count for phase, value in seconds.items()}
    batch = per_batch.get("batch", 0.0)
    metrics = {"time/sampler/batch_ms": batch}
    inside = 0.0
    for phase in SAMPLER_PHASES:
        if phase in per_batch:
            metrics[f"time/sampler/{phase}_ms"] = per_batch[phase]
            inside += per_batch[phase]
    metrics["time/sampler/other_ms"] = max(0.0, batch - inside)
    return metrics
