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
"""

from __future__ import annotations

from parllel.timing import PhaseTimes, sampler_metrics

__all__ = ["LEARNER_PHASES", "progress_metrics", "time_metrics"]

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
