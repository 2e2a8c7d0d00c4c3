"""SeedMetrics: each seed run's log line from its own columns' episodes and
updates; median_over_runs: the console's median and return range."""

from __future__ import annotations

import pytest

from parllel.cages import TrajInfo
from parllel.runners.seed_metrics import SeedMetrics, median_over_runs


def _episode(env_index: int, return_: float) -> TrajInfo:
    return TrajInfo(env_index=env_index, length=5, return_=return_)


def test_episodes_and_updates_go_to_their_run() -> None:
    metrics = SeedMetrics(n_runs=3, envs_per_run=2, episode_window=10)
    # envs 0-1: run 0, 2-3: run 1, 4-5: run 2
    metrics.add_episodes([_episode(1, 1.0), _episode(2, 5.0), _episode(3, 7.0)])
    metrics.add_updates([{"loss": 1.0}, {"loss": 3.0}, None], {"lr": 0.5})
    metrics.add_updates([{"loss": 2.0}, {"loss": 5.0}, None], {"lr": 0.5})
    lines = metrics.take(stopped={2}, shared={"time/env_steps": 8.0})
    assert lines[2] == {}  # a stopped run logs nothing
    assert lines[0]["train/return_mean"] == 1.0
    assert lines[1]["train/return_mean"] == 6.0
    assert lines[0]["algo/loss"] == pytest.approx(1.5)
    assert lines[1]["algo/loss"] == pytest.approx(4.0)
    assert lines[1]["algo/lr"] == 0.5
    assert lines[0]["time/env_steps"] == 8.0


def test_an_evaluation_is_logged_once() -> None:
    metrics = SeedMetrics(n_runs=2, envs_per_run=4, episode_window=10)
    evaluated = metrics.evaluated([_episode(0, 2.0), _episode(1, 4.0)], 1)
    assert evaluated[0]["eval/return_mean"] == 2.0
    assert evaluated[1]["eval/return_mean"] == 4.0
    first = metrics.take(stopped=(), shared={})
    assert first[1]["eval/return_mean"] == 4.0
    second = metrics.take(stopped=(), shared={})
    assert "eval/return_mean" not in second[1]


def test_median_and_return_range_over_the_active_runs() -> None:
    per_run = [
        {"train/return_mean": 1.0, "algo/loss": 3.0},
        {},  # a stopped run
        {"train/return_mean": 5.0, "algo/loss": 1.0},
        {"train/return_mean": 9.0},
    ]
    summary = median_over_runs(per_run)
    assert summary["train/return_mean"] == 5.0
    assert summary["algo/loss"] == 2.0  # over the runs that have it
    assert summary["seeds/train/return_mean_min"] == 1.0
    assert summary["seeds/train/return_mean_max"] == 9.0
    assert median_over_runs([{}, {}]) == {}
