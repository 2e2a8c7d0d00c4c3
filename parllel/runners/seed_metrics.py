"""What each run of a :class:`~parllel.runners.seeds.SeedsRunner` logs (its
train episodes, its algorithm metrics over the log window, its latest
evaluation) and the median over the runs that the console shows."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from statistics import median
from typing import Any

from parllel.logging import EpisodeStats
from parllel.runners.metrics import MetricWindow

__all__ = ["SeedMetrics", "median_over_runs"]


class SeedMetrics:
    """Each run's metrics: run ``k`` owns the env columns ``k * envs_per_run
    .. (k + 1) * envs_per_run`` (episodes are assigned by ``env_index``)."""

    def __init__(self, n_runs: int, envs_per_run: int, episode_window: int) -> None:
        self.envs_per_run = int(envs_per_run)
        self.train_stats = [
            EpisodeStats(window=episode_window, prefix="train/") for _ in range(n_runs)
        ]
        self._windows = [MetricWindow() for _ in range(n_runs)]
        self._eval: list[dict[str, float]] = [{} for _ in range(n_runs)]

    def add_episodes(self, traj_infos: Iterable[Any]) -> None:
        """Count finished training episodes, each in its run's statistics."""
        for traj in traj_infos:
            self.train_stats[traj.env_index // self.envs_per_run].extend([traj])

    def add_updates(
        self, metrics: Sequence[Mapping[str, float] | None], shared: Mapping[str, float]
    ) -> None:
        """Add each run's update metrics (None: a stopped run) and ``shared``
        (what callbacks added, for every run) to the log window."""
        for run, values in enumerate(metrics):
            if values is not None:
                self._windows[run].add({**values, **shared})

    def evaluated(
        self, traj_infos: Iterable[Any], eval_envs_per_run: int
    ) -> list[dict[str, float]]:
        """Each run's ``eval/...`` metrics of an evaluation's episodes (run
        ``k``: eval env ``// eval_envs_per_run``), kept for the next log line."""
        stats = [EpisodeStats(window=10**9, prefix="eval/") for _ in self._eval]
        for traj in traj_infos:
            stats[traj.env_index // eval_envs_per_run].extend([traj])
        self._eval = [s.metrics() for s in stats]
        return self._eval

    def take(
        self, stopped: Collection[int], shared: Mapping[str, float]
    ) -> list[dict[str, float]]:
        """Each run's log line (``{}`` for a stopped run): its algorithm
        metrics over the window, its episodes, its evaluation (logged once)
        and ``shared``."""
        per_run: list[dict[str, float]] = []
        for run, window in enumerate(self._windows):
            if run in stopped:
                per_run.append({})
                continue
            metrics = {f"algo/{k}": v for k, v in window.take().items()}
            metrics.update(self.train_stats[run].metrics())
            metrics.update(self._eval[run])
            metrics.update(shared)
            per_run.append(metrics)
        self._eval = [{} for _ in self._eval]
        return per_run


def median_over_runs(per_run: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The median of every metric over the runs that have it (``{}``: a
    stopped run), and the range of every ``*return_mean``
    (``seeds/<key>_min``, ``seeds/<key>_max``)."""
    active = [m for m in per_run if m]
    keys: set[str] = set().union(*active) if active else set()
    summary = {key: median(m[key] for m in active if key in m) for key in sorted(keys)}
    for key in sorted(k for k in keys if k.endswith("return_mean")):
        values = [m[key] for m in active if key in m]
        summary[f"seeds/{key}_min"] = min(values)
        summary[f"seeds/{key}_max"] = max(values)
    return summary
