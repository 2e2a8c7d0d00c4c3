"""Runner cadence (eval/log/checkpoint), callbacks, request_stop, ConfigError.

A fake sampler (``[T, B]`` reward leaf only, one finished episode per batch)
and a fake algorithm keep these tests in milliseconds: the Runner only reads
the batch shape, the traj infos and the algorithm's metrics.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from parllel import fields
from parllel.cages import TrajInfo
from parllel.checkpoints.checkpoint import checkpoint_step, list_checkpoints
from parllel.errors import ConfigError
from parllel.logging import CsvSink, read_progress
from parllel.runners import Callback, OnPolicyRunner
from parllel.timing import PhaseTimes
from parllel.torch.algos import PPO, ActorCriticEvaluator
from parllel.torch.models import build_actor_critic

pytestmark = pytest.mark.timeout(60)

T, B = 10, 10  # 100 env steps per batch


class FakeSampler:
    """One ``[T, B]`` batch per call, one finished episode of length ``T`` each."""

    def __init__(self) -> None:
        self.sample_tree = {fields.REWARD: np.zeros((T, B), np.float32)}
        self.batches = 0
        self.resets = 0
        self.phase_times = PhaseTimes()
        self.action_generator = None

    def collect_batch(self) -> tuple[dict, list[TrajInfo]]:
        self.batches += 1
        episode = TrajInfo(env_index=0, length=T, return_=float(self.batches))
        return self.sample_tree, [episode]

    def reset(self) -> None:
        self.resets += 1


class FakeAlgorithm:
    """Records the progress it is given; metrics are the number of calls."""

    def __init__(self) -> None:
        self.progress: list[float] = []

    def optimize(self, batch: Any, progress: float) -> dict[str, float]:
        self.progress.append(progress)
        return {"calls": float(len(self.progress))}

    def state_dict(self) -> dict:
        return {"progress": list(self.progress)}

    def load_state_dict(self, state: dict) -> None:
        self.progress = list(state["progress"])


class FakeEvalSampler:
    def __init__(self) -> None:
        self.calls = 0

    def collect(self) -> list[TrajInfo]:
        self.calls += 1
        return [TrajInfo(length=5, return_=100.0 + self.calls)]


class RecordingLogger:
    def __init__(self) -> None:
        self.rows: list[tuple[int, dict]] = []

    def log(self, step: int, metrics: dict) -> None:
        self.rows.append((step, dict(metrics)))

    def close(self) -> None:
        pass


class Recorder(Callback):
    """Records every hook as ``(hook, env_steps)``; optionally stops at a step."""

    def __init__(self, stop_at: int | None = None) -> None:
        self.events: list[tuple[str, int]] = []
        self.stop_at = stop_at

    def on_train_start(self, runner: Any) -> None:
        self.events.append(("train_start", runner.env_steps))

    def on_collect_end(self, runner: Any, batch: Any, traj_infos: list) -> None:
        self.events.append(("collect_end", runner.env_steps))

    def on_update_end(self, runner: Any, metrics: dict) -> None:
        self.events.append(("update_end", runner.env_steps))
        if self.stop_at is not None and runner.env_steps >= self.stop_at:
            runner.request_stop()

    def on_eval_end(self, runner: Any, eval_metrics: dict) -> None:
        self.events.append(("eval_end", runner.env_steps))

    def on_train_end(self, runner: Any) -> None:
        self.events.append(("train_end", runner.env_steps))


def list_checkpoints_steps(directory) -> list[int]:
    return [checkpoint_step(path) for path in list_checkpoints(directory)]


def make_runner(tmp_path, total_steps=1000, **kwargs) -> OnPolicyRunner:
    options = dict(
        eval_sampler=FakeEvalSampler(),
        eval_interval_steps=250,
        logger=RecordingLogger(),
        log_interval_steps=300,
        checkpoint_dir=tmp_path / "checkpoints",
        checkpoint_interval_steps=400,
        keep_checkpoints=10,
    )
    options.update(kwargs)
    return OnPolicyRunner(FakeSampler(), FakeAlgorithm(), total_steps, **options)


def test_eval_log_checkpoint_cadence(tmp_path):
    runner = make_runner(tmp_path)
    summary = runner.run()
    assert runner.env_steps == 1000 and runner.updates == 10
    # each event fires at the first batch boundary at or past a multiple of
    # its interval; an evaluation is always logged; the last step is logged
    assert runner.eval_sampler.calls == 4  # at 300, 500, 800, 1000
    logged = [step for step, _ in runner.logger.rows]
    assert logged == [300, 500, 600, 800, 900, 1000]
    evals = [step for step, row in runner.logger.rows if "eval/return_mean" in row]
    assert evals == [300, 500, 800, 1000]
    assert list_checkpoints_steps(tmp_path / "checkpoints") == [400, 800, 1000]
    assert summary["eval/return_mean"] == 104.0
    assert summary["time/env_steps"] == 1000.0
    assert summary["train/episodes"] == 10
    # progress for the schedules: fraction done after each batch
    assert runner.algorithm.progress == pytest.approx([i / 10 for i in range(1, 11)])


def test_log_every_iteration_without_interval(tmp_path):
    runner = make_runner(
        tmp_path,
        total_steps=500,
        log_interval_steps=None,
        eval_sampler=None,
        eval_interval_steps=None,
        checkpoint_dir=None,
        checkpoint_interval_steps=None,
    )
    runner.run()
    assert [step for step, _ in runner.logger.rows] == [100, 200, 300, 400, 500]


def test_callbacks_order(tmp_path):
    recorder = Recorder()
    runner = make_runner(
        tmp_path, total_steps=300, eval_interval_steps=200, callbacks=[recorder]
    )
    runner.run()
    assert recorder.events == [
        ("train_start", 0),
        ("collect_end", 100),
        ("update_end", 100),
        ("collect_end", 200),
        ("update_end", 200),
        ("eval_end", 200),
        ("collect_end", 300),
        ("update_end", 300),
        ("eval_end", 300),  # the final evaluation
        ("train_end", 300),
    ]


def test_request_stop_ends_after_the_iteration(tmp_path):
    recorder = Recorder(stop_at=300)
    runner = make_runner(tmp_path, callbacks=[recorder])
    summary = runner.run()
    assert runner.env_steps == 300 and runner.updates == 3
    assert recorder.events[-1] == ("train_end", 300)
    # stopped early: still evaluated, logged and checkpointed at the stop
    assert summary["eval/return_mean"] > 0
    assert runner.logger.rows[-1][0] == 300
    assert list_checkpoints_steps(tmp_path / "checkpoints")[-1] == 300


def test_bad_runner_arguments(tmp_path):
    with pytest.raises(ConfigError, match="total_steps"):
        make_runner(tmp_path, total_steps=0)
    with pytest.raises(ConfigError, match="eval_interval_steps"):
        make_runner(tmp_path, eval_interval_steps=-5)
    with pytest.raises(ConfigError, match="no eval_sampler"):
        make_runner(tmp_path, eval_sampler=None, eval_interval_steps=100)
    with pytest.raises(ConfigError, match="checkpoint_dir"):
        make_runner(tmp_path, checkpoint_dir=None).save()


def _ppo(**kwargs):
    from gymnasium.spaces import Box, Discrete

    model, distribution = build_actor_critic(
        Box(-1, 1, (3,), np.float32), Discrete(2), hidden_sizes=(8,)
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    return PPO(ActorCriticEvaluator(model, distribution), optimizer, **kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(learning_rate=-1e-3), "learning_rate"),
        (dict(learning_rate=lambda p: -1.0), "learning_rate"),
        (dict(clip_range=0.0), "clip_range"),
        (dict(epochs=0), "epochs"),
        (dict(minibatches=2.5), "minibatches"),
        (dict(entropy_coef=-0.1), "entropy_coef"),
        (dict(max_grad_norm=0.0), "max_grad_norm"),
        (dict(minibatches=3, batch_shape=(32, 8)), "divisible"),
        (dict(minibatches=3, batch_shape=(32, 8), recurrent=True), "env columns"),
    ],
)
def test_invalid_ppo_hyperparameters(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        _ppo(**kwargs)


def test_an_evaluation_off_the_logging_grid_logs_no_step_twice(tmp_path):
    """The final step is on the logging grid (500) but not the evaluation's
    (300): one row for it, with the final evaluation, in progress.csv too."""
    csv = CsvSink(tmp_path / "progress.csv")
    runner = make_runner(
        tmp_path,
        total_steps=500,
        eval_interval_steps=300,
        log_interval_steps=250,
        logger=csv,
        checkpoint_dir=None,
        checkpoint_interval_steps=None,
    )
    runner.run()
    csv.close()
    steps = [int(step) for step in read_progress(tmp_path / "progress.csv")["step"]]
    assert steps == [300, 500]
    assert len(steps) == len(set(steps))
    assert runner.eval_sampler.calls == 2  # at 300 and the final one at 500


class AlternatingAlgorithm(FakeAlgorithm):
    """An off-policy-like update: ``q_loss`` always, ``pi_loss`` every other call."""

    def optimize(self, batch: Any, progress: float) -> dict[str, float]:
        calls = len(self.progress) + 1
        self.progress.append(progress)
        metrics = {"q_loss": float(calls), "updates": 1.0}
        if calls % 2 == 1:
            metrics["pi_loss"] = 10.0 * calls
        return metrics


def test_logged_metrics_are_means_over_the_window(tmp_path):
    """Every log line has each metric the window computed, averaged over the
    updates that computed it, even where the last update lacks it."""
    runner = OnPolicyRunner(
        FakeSampler(),
        AlternatingAlgorithm(),
        600,
        logger=RecordingLogger(),
        log_interval_steps=300,
    )
    runner.run()
    rows = dict(runner.logger.rows)
    assert sorted(rows) == [300, 600]
    assert rows[300]["algo/q_loss"] == 2.0  # calls 1, 2, 3
    assert rows[300]["algo/pi_loss"] == 20.0  # calls 1, 3
    assert rows[600]["algo/q_loss"] == 5.0  # calls 4, 5, 6 (6 has no pi_loss)
    assert rows[600]["algo/pi_loss"] == 50.0  # call 5 only
    assert rows[600]["algo/updates"] == 3.0  # the window's updates
