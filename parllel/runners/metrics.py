"""What a runner's log line says about time and throughput.

Every log line says where the time went since the previous one: the
fraction of the wall time spent collecting the batch (``time/frac/sample``:
sampling itself, or with an asynchronous sampler waiting for its batch), in
the algorithm's update (with publishing the weights), in evaluation, logging
and checkpoints, and the rest (``time/frac/other``: callbacks, the runner's
own work); they sum to 1. The sampler adds its breakdown in milliseconds per
batch: ``time/sampler/batch_ms``, ``env_step_ms``, ``worker_wait_ms``,
``inference_ms``, ``transforms_ms`` and ``other_ms`` (measured where the
sampler runs: in the background process or the Ray actors for an
asynchronous one).

The algorithm's metrics (``algo/...``) are means over the log window
(:class:`MetricWindow`), not the last iteration's values.
"""

from __future__ import annotations

from collections.abc import Mapping

from parllel.timing import PhaseTimes, sampler_metrics

__all__ = ["LEARNER_PHASES", "MetricWindow", "progress_metrics", "time_metrics"]

#: The learner's phases (``time/frac/<phase>``); ``other`` is the rest.
LEARNER_PHASES = ("sample", "update", "eval", "log", "checkpoint")


def progress_metrics(
    env_steps: int, updates: int, elapsed: float, steps_since: int, seconds_since: float
) -> dict[str, float]:
    """``time/env_steps``, ``updates``, ``elapsed_s`` and ``steps_per_second``
    (over the ``steps_since`` env steps of the last ``seconds_since``)."""
    return {
        "time/env_steps": float(env_steps),
        "time/updates": float(updates),
        "time/elapsed_s": elapsed,
        "time/steps_per_second": steps_since / max(seconds_since, 1e-9),
    }


def time_metrics(
    learner: PhaseTimes, sampler: PhaseTimes, wall: float
) -> dict[str, float]:
    """The learner's phases as fractions of ``wall`` seconds and the
    sampler's per batch; both accumulators are read and cleared."""
    wall = max(wall, 1e-9)
    seconds = learner.take()["seconds"]
    metrics = {
        f"time/frac/{phase}": seconds.get(phase, 0.0) / wall for phase in LEARNER_PHASES
    }
    metrics["time/frac/other"] = max(0.0, 1.0 - sum(metrics.values()))
    metrics.update(sampler_metrics(sampler.take()))
    return metrics


class MetricWindow:
    """The algorithm's metrics of one log window, each a mean over the updates
    that computed it.

    Each iteration :meth:`add` s what ``optimize`` returned, weighted by the
    updates it ran (its ``updates`` entry; 1 without one, as PPO's one update
    per batch). A metric that some iterations lack (SAC's actor losses with a
    ``policy_delay``) is averaged over the iterations that have it, so an
    iteration that did not compute it never erases it. ``updates`` itself is
    summed: the updates of the window.

    Example:
        >>> window = MetricWindow()
        >>> window.add({"q_loss": 2.0, "pi_loss": 1.0, "updates": 1.0})
        >>> window.add({"q_loss": 4.0, "updates": 1.0})
        >>> window.take()
        {'q_loss': 3.0, 'pi_loss': 1.0, 'updates': 2.0}
    """

    def __init__(self) -> None:
        self._sums: dict[str, float] = {}
        self._weights: dict[str, float] = {}
        self._updates: float | None = None

    def add(self, metrics: Mapping[str, float]) -> None:
        """Add one iteration's algorithm metrics."""
        updates = metrics.get("updates")
        weight = 1.0 if updates is None else float(updates)
        if updates is not None:
            self._updates = (self._updates or 0.0) + weight
        if weight <= 0:
            return  # no update ran: nothing it reports was computed
        for key, value in metrics.items():
            if key != "updates":
                self._sums[key] = self._sums.get(key, 0.0) + weight * float(value)
                self._weights[key] = self._weights.get(key, 0.0) + weight

    def take(self) -> dict[str, float]:
        """The window's means (and summed ``updates``); start a new window."""
        means = {key: total / self._weights[key] for key, total in self._sums.items()}
        if self._updates is not None:
            means["updates"] = self._updates
        self._sums, self._weights, self._updates = {}, {}, None
        return means
