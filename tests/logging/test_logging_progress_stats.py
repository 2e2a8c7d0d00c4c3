"""ProgressBar (tqdm, disabled off-TTY) and EpisodeStats windows."""

from __future__ import annotations

import io
import sys

import numpy as np
import pytest

from parllel.cages import TrajInfo
from parllel.errors import ConfigError
from parllel.logging import EpisodeStats, Logger, MultiLogger, ProgressBar


def traj(return_, length, discounted=None):
    info = TrajInfo(env_index=0)
    info.return_ = return_
    info.length = length
    info.discounted_return = return_ / 2 if discounted is None else discounted
    return info


def test_episode_stats_window_summaries():
    stats = EpisodeStats(window=3, prefix="train/")
    assert stats.metrics() == {"train/episodes": 0}
    stats.extend([traj(1.0, 10), traj(2.0, 20)])
    stats.add({"return_": 3.0, "length": 30, "discounted_return": 1.5})
    stats.add(traj(10.0, 40))  # pushes out the first
    metrics = stats.metrics()
    assert len(stats) == 3 and metrics["train/episodes"] == 4
    assert metrics["train/return_mean"] == pytest.approx(5.0)
    assert metrics["train/return_min"] == 2.0
    assert metrics["train/return_max"] == 10.0
    assert metrics["train/return_std"] == pytest.approx(np.std([2.0, 3.0, 10.0]))
    assert metrics["train/length_mean"] == pytest.approx(30.0)
    assert metrics["train/discounted_return_max"] == 5.0
    stats.clear()
    assert stats.metrics() == {"train/episodes": 4}


def test_episode_stats_summaries_follow_every_change_and_are_copies():
    # summaries are kept between episodes: each change must still show
    stats = EpisodeStats(window=2)
    stats.add(traj(1.0, 10))
    first = stats.metrics()
    first["train/return_mean"] = -99.0  # the caller's copy, not the stats'
    assert stats.metrics()["train/return_mean"] == 1.0
    stats.add(traj(3.0, 10))
    assert stats.metrics()["train/return_mean"] == 2.0
    stats.add({"return_": 5.0, "length": 1, "partial": True})  # skipped
    assert stats.metrics()["train/return_mean"] == 2.0
    restored = EpisodeStats(window=2)
    restored.metrics()
    restored.load_state_dict({**stats.state_dict(), "return_": [7.0, 9.0]})
    assert restored.metrics()["train/return_mean"] == 8.0
    stats.clear()
    assert stats.metrics() == {"train/episodes": 2}


def test_episode_stats_state_dict_round_trip():
    stats = EpisodeStats(window=5, prefix="eval/")
    stats.extend(traj(float(i), i) for i in range(7))
    restored = EpisodeStats(window=5, prefix="eval/")
    restored.load_state_dict(stats.state_dict())
    assert restored.metrics() == stats.metrics()
    with pytest.raises(ConfigError):
        EpisodeStats(window=0)


def test_progress_bar_disabled_off_tty_and_on_request(monkeypatch):
    stream = io.StringIO()  # not a TTY
    bar = ProgressBar(total=100, stream=stream)
    assert bar.disabled and isinstance(bar, Logger)
    bar.log(50, {"train/return_mean": 3.0})
    bar.close()
    assert stream.getvalue() == "" and bar.position == 0
    # disabled bars never import tqdm, so they work without it
    monkeypatch.setitem(sys.modules, "tqdm", None)
    assert ProgressBar(disable=True).disabled


def test_progress_bar_shows_rate_and_return():
    pytest.importorskip("tqdm")
    stream = io.StringIO()
    bar = ProgressBar(total=10_000, stream=stream, disable=False, description="ppo")
    bar.update_to(2048)
    bar.log(4096, {"train/return_mean": 21.5, "other": 1.0})
    bar.log(8192, {"loss": 0.1})  # keeps the last return shown
    assert bar.position == 8192
    bar.close()
    text = stream.getvalue()
    assert "ppo" in text and "8.19k/10.0k" in text
    assert "step/s" in text
    assert "return=21.5" in text and "other" not in text


def test_progress_bar_in_multi_logger_and_missing_tqdm(monkeypatch):
    pytest.importorskip("tqdm")
    stream = io.StringIO()
    logger = MultiLogger([ProgressBar(stream=stream, disable=False, postfix=["x"])])
    logger.log(3, {"x": 2})
    logger.close()
    assert "x=2" in stream.getvalue()
    from parllel.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "tqdm", None)
    with pytest.raises(MissingDependencyError, match="pip install tqdm"):
        ProgressBar(disable=False)


def test_episode_stats_skip_partial_episodes():
    """A life lost under episodic life (partial) is no episode of the statistics."""
    stats = EpisodeStats(window=10)
    life = TrajInfo(return_=3.0, length=10, partial=True)
    game = TrajInfo(return_=7.0, length=40)
    stats.extend(
        [
            life,
            game,
            {"return_": 5.0, "length": 3, "discounted_return": 1.0, "partial": True},
        ]
    )
    metrics = stats.metrics()
    assert metrics["train/episodes"] == 1
    assert metrics["train/return_mean"] == 7.0 and metrics["train/length_mean"] == 40.0
