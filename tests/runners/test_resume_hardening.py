"""Resume without losses: unreadable checkpoints, finished runs, partial batches,
shape mismatches of non-model state, config comparison, logger continuity and
Ctrl-C inside the runner (in-process; the subprocess test is test_interrupt.py).
"""

from __future__ import annotations

import signal
import warnings
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from parllel import fields
from parllel.cages import TrajInfo
from parllel.checkpoints.checkpoint import list_checkpoints, load_checkpoint
from parllel.errors import (
    CheckpointError,
    CheckpointMismatchError,
    ParllelWarning,
)
from parllel.logging import CsvSink, MultiLogger, read_progress
from parllel.runners import Callback, OnPolicyRunner, RunDirectory
from tests.helpers.resume_fakes import NormalizedSampler, OptimizerState, StopAt

pytestmark = pytest.mark.timeout(60)

T, B = 8, 4  # 32 env steps per batch


class FakeSampler(NormalizedSampler):
    """Random observations of width ``obs``, normalized by a real normalizer."""

    def __init__(self, obs: int = 3) -> None:
        super().__init__(T, B, obs)
        self.batches = 0

    def reset(self) -> None:
        pass

    def collect_batch(self) -> tuple[dict, list[TrajInfo]]:
        self.batches += 1
        self.normalized(np.random.normal(1.0, 2.0, self.shape))
        return self.sample_tree, [TrajInfo(length=T, return_=float(self.batches))]


class FakeLearner(OptimizerState):
    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)

    def optimize(self, batch: dict, progress: float) -> dict[str, float]:
        observation = torch.from_numpy(batch[fields.OBSERVATION])
        loss = self.model(observation).pow(2).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return {"loss": float(loss.detach())}


class EvalSampler:
    def __init__(self) -> None:
        self.calls = 0

    def collect(self) -> list[TrajInfo]:
        self.calls += 1
        return [TrajInfo(length=1, return_=1.0)]


class Recorder:
    def __init__(self) -> None:
        self.calls: list[int] = []
        self.rewinds: list[int] = []

    def log(self, step: int, metrics: Any) -> None:
        self.calls.append(step)

    def rewind(self, step: int) -> None:
        self.rewinds.append(step)

    def close(self) -> None:
        pass


def build(
    checkpoint_dir,
    *,
    total: int = 320,
    obs: int = 3,
    config: dict | None = None,
    config_keys=None,
    logger=None,
    callbacks=(),
    eval_sampler=None,
    log_interval_steps: int | None = 64,
    checkpoint_interval_steps: int | None = 64,
    **kwargs,
):
    torch.manual_seed(0)
    np.random.seed(0)
    model = nn.Linear(obs, 1)
    sampler = FakeSampler(obs)
    runner = OnPolicyRunner(
        sampler,
        FakeLearner(model),
        total,
        logger=logger,
        log_interval_steps=log_interval_steps,
        checkpoint_dir=checkpoint_dir,
        checkpoint_interval_steps=checkpoint_interval_steps,
        keep_checkpoints=100,
        checkpoint_objects={
            "model": model,
            "observation_normalizer": sampler.normalizer,
        },
        config=config if config is not None else {"batch_T": T, "total_steps": total},
        config_keys=config_keys,
        callbacks=list(callbacks),
        eval_sampler=eval_sampler,
        eval_interval_steps=None if eval_sampler is None else 64,
        **kwargs,
    )
    return runner, model, sampler


# -- unreadable checkpoints ------------------------------------------------------


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_unreadable_newest_checkpoint_falls_back_to_the_newest_readable(
    tmp_path, damage
):
    first, _, _ = build(tmp_path, callbacks=[StopAt(128)])
    first.run()  # checkpoints at 64 and 128
    newest = list_checkpoints(tmp_path)[-1]
    assert newest.name == "checkpoint_000000000128.pt"
    data = newest.read_bytes()
    newest.write_bytes(
        {"truncate": data[: len(data) // 2], "garbage": b"\x00junk" * 50, "empty": b""}[
            damage
        ]
    )
    resumed, _, _ = build(tmp_path)
    with pytest.warns(ParllelWarning, match="checkpoint_000000000128") as seen:
        resumed.load(tmp_path)
    assert "loading checkpoint_000000000064.pt" in str(seen[0].message)
    assert resumed.env_steps == 64
    assert resumed.resumed_from.name == "checkpoint_000000000064.pt"
    # set aside: no longer a checkpoint, kept for inspection
    assert not newest.exists()
    assert newest.with_name(newest.name + ".unreadable").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_checkpoint(tmp_path)["runner"]["env_steps"] == 64


def test_load_checkpoint_of_a_directory_falls_back_too(tmp_path):
    first, _, _ = build(tmp_path, callbacks=[StopAt(64)])
    first.run()
    (tmp_path / "checkpoint_000000000999.pt").write_bytes(b"not a zip")
    with pytest.warns(ParllelWarning):
        assert load_checkpoint(tmp_path)["runner"]["env_steps"] == 64
    assert (
        tmp_path / "checkpoint_000000000999.pt"
    ).exists()  # only the runner sets aside


def test_no_readable_checkpoint_names_every_file(tmp_path):
    for step in (32, 64):
        (tmp_path / f"checkpoint_{step:012d}.pt").write_bytes(b"broken")
    runner, _, _ = build(tmp_path)
    with pytest.raises(CheckpointError, match="no readable checkpoint") as error:
        runner.load(tmp_path)
    assert "000000000032" in str(error.value) and "000000000064" in str(error.value)


# -- finished runs, partial batches ----------------------------------------------


def test_resuming_a_finished_run_adds_nothing(tmp_path):
    first, _, _ = build(tmp_path, total=128)
    first.run()
    before = {p.name: p.stat().st_mtime_ns for p in list_checkpoints(tmp_path)}
    recorder, evaluator = Recorder(), EvalSampler()
    resumed, _, sampler = build(
        tmp_path, total=128, logger=recorder, eval_sampler=evaluator
    )
    resumed.load(tmp_path)
    assert resumed.finished
    assert resumed.run() == {}
    assert recorder.calls == [] and evaluator.calls == 0 and sampler.batches == 0
    after = {p.name: p.stat().st_mtime_ns for p in list_checkpoints(tmp_path)}
    assert after == before


def test_run_training_says_a_resumed_run_is_finished(tmp_path, capsys):
    from parllel.runners import run_training
    from parllel.runners.outcome import report_outcome

    run = RunDirectory.create(tmp_path, "fake", config={"total_steps": 128})
    first, _, _ = build(run.checkpoints_dir, total=128)
    first.run()
    resumed, _, sampler = build(
        run.checkpoints_dir, total=128, logger=CsvSink(run.progress_csv, resume=True)
    )
    assert report_outcome(run_training(resumed, run, resume=True)) == {}
    out = capsys.readouterr().out
    assert "already finished" in out and "128 of total_steps 128" in out
    assert sampler.batches == 0
    assert not run.learning_curve_path.exists()  # nothing trained, nothing plotted


def test_total_steps_not_a_multiple_of_the_batch_says_what_runs(tmp_path):
    runner, _, _ = build(None, total=100, checkpoint_interval_steps=None)
    with pytest.warns(ParllelWarning, match="runs 4 batches and stops at 128"):
        runner.run()
    assert runner.env_steps == 128
    exact, _, _ = build(None, total=96, checkpoint_interval_steps=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exact.run()


# -- mismatches ------------------------------------------------------------------


def test_observation_normalizer_shape_mismatch_is_a_checkpoint_mismatch(tmp_path):
    first, _, _ = build(tmp_path, callbacks=[StopAt(64)])
    first.run()
    # the model's input width is 3 again, so only the normalizer differs
    resumed, model, sampler = build(tmp_path, obs=5)
    resumed.checkpoint_objects["model"] = nn.Linear(3, 1)
    weights = resumed.checkpoint_objects["model"].weight.detach().clone()
    with pytest.raises(CheckpointMismatchError) as error:
        resumed.load(tmp_path)
    message = str(error.value)
    assert "current observation_normalizer" in message
    assert "(3,) in the checkpoint, (5,) in the current" in message
    # nothing was loaded: every object is checked first
    assert torch.equal(resumed.checkpoint_objects["model"].weight, weights)
    assert resumed.env_steps == 0


def test_total_steps_never_mismatches_and_default_compares_shapes_only(tmp_path):
    first, _, _ = build(tmp_path, callbacks=[StopAt(64)])
    first.run()
    longer = {"batch_T": T, "total_steps": 10_000}
    resumed, _, _ = build(tmp_path, config=longer, config_keys=["total_steps"])
    resumed.load(tmp_path)  # listed, but total_steps is never compared
    assert resumed.env_steps == 64
    other = {"batch_T": 99, "total_steps": 320, "lr": 0.5}
    loose, _, _ = build(tmp_path, config=other)  # config_keys=None
    loose.load(tmp_path)  # no tensor changes shape: loads
    assert loose.env_steps == 64
    strict, _, _ = build(tmp_path, config=other, config_keys=["batch_T"])
    with pytest.raises(
        CheckpointMismatchError, match="batch_T: checkpoint 8, current 99"
    ):
        strict.load(tmp_path)


def test_shape_mismatch_lists_the_config_keys_that_differ(tmp_path):
    first, _, _ = build(tmp_path, callbacks=[StopAt(64)], config={"obs": 3})
    first.run()
    resumed, _, _ = build(tmp_path, obs=5, config={"obs": 5})
    with pytest.raises(CheckpointMismatchError) as error:
        resumed.load(tmp_path)
    assert "current model" in str(error.value)
    assert "config keys that differ" in str(error.value)
    assert "obs: checkpoint 3, current 5" in str(error.value)


# -- logger continuity -----------------------------------------------------------


def test_load_rewinds_the_logger_to_the_checkpoint_step(tmp_path):
    """A crash after the last checkpoint leaves rows the resumed run repeats."""
    csv_path = tmp_path / "progress.csv"

    class Crash(Callback):
        def on_update_end(self, runner, metrics):
            if runner.env_steps == 192:
                raise RuntimeError("crash after the 128 checkpoint, rows up to 160")

    first, _, _ = build(
        tmp_path / "ckpt",
        logger=CsvSink(csv_path),
        log_interval_steps=None,
        checkpoint_interval_steps=128,
        callbacks=[Crash()],
    )
    with pytest.raises(RuntimeError):
        first.run()
    first.logger.close()
    assert list(read_progress(csv_path)["step"]) == [32, 64, 96, 128, 160]
    recorder = Recorder()
    logger = MultiLogger([CsvSink(csv_path, resume=True), recorder])
    resumed, _, _ = build(tmp_path / "ckpt", logger=logger, log_interval_steps=None)
    resumed.load(tmp_path / "ckpt")
    assert recorder.rewinds == [128]
    resumed.run()
    logger.close()
    steps = list(read_progress(csv_path)["step"])
    assert steps == list(range(32, 321, 32))  # no step twice, none missing


def test_tensorboard_rewind_purges_events_after_the_step(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import (
        EventAccumulator,
    )

    from parllel.logging import TensorBoardSink

    with TensorBoardSink(tmp_path) as sink:
        for step in range(0, 10):
            sink.log(step, {"x": float(step)})
    with TensorBoardSink(tmp_path) as sink:
        sink.rewind(5)  # the resumed checkpoint is at step 5
        for step in range(6, 12):
            sink.log(step, {"x": 100.0 + step})
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    scalars = events.Scalars("x")
    assert [e.step for e in scalars] == list(range(12))
    assert [e.value for e in scalars][5:7] == [5.0, 106.0]


def test_elapsed_time_continues_after_resume(tmp_path):
    first, _, _ = build(tmp_path, callbacks=[StopAt(64)])
    first.run()
    saved = load_checkpoint(tmp_path)["runner"]["elapsed_s"]
    assert saved > 0
    recorder = Recorder()
    metrics: list[float] = []

    class Watch(Callback):
        def on_update_end(self, runner, step_metrics):
            metrics.append(step_metrics["time/elapsed_s"])

    resumed, _, _ = build(tmp_path, logger=recorder, callbacks=[Watch()])
    resumed.load(tmp_path)
    resumed.run()
    assert metrics and min(metrics) >= saved


# -- Ctrl-C inside the runner ----------------------------------------------------


class PressCtrlC(Callback):
    """Sends this process SIGINT after the batch that reaches ``step``."""

    def __init__(self, step: int, times: int = 1) -> None:
        self.step, self.times = step, times

    def on_collect_end(self, runner, batch, traj_infos):
        if runner.env_steps == self.step:
            for _ in range(self.times):
                signal.raise_signal(signal.SIGINT)


def test_first_ctrl_c_stops_after_the_iteration_with_a_checkpoint(tmp_path, capfd):
    recorder, evaluator = Recorder(), EvalSampler()
    runner, _, _ = build(
        tmp_path,
        total=9_984,
        logger=recorder,
        eval_sampler=evaluator,
        callbacks=[PressCtrlC(96)],
        checkpoint_interval_steps=1_000,
    )
    before = signal.getsignal(signal.SIGINT)
    runner.run()
    assert signal.getsignal(signal.SIGINT) is before  # handler restored
    assert runner.interrupted and runner.env_steps == 96
    assert runner.last_checkpoint.name == "checkpoint_000000000096.pt"
    assert [p.name for p in list_checkpoints(tmp_path)] == [runner.last_checkpoint.name]
    assert recorder.calls[-1] == 96  # the step reached is logged
    assert evaluator.calls == 1  # at 64 only: no final evaluation on Ctrl-C
    assert "Ctrl-C again to exit at once" in capfd.readouterr().err


def test_second_ctrl_c_raises_at_once(tmp_path):
    runner, _, _ = build(tmp_path, total=9_984, callbacks=[PressCtrlC(96, times=2)])
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        runner.run()
    assert signal.getsignal(signal.SIGINT) is before
    assert runner.env_steps == 96
    # periodic checkpoints only; the interrupted iteration wrote none
    assert list_checkpoints(tmp_path)[-1].name == "checkpoint_000000000064.pt"


def test_handle_interrupt_false_leaves_sigint_alone(tmp_path):
    runner, _, _ = build(
        tmp_path, total=9_984, callbacks=[PressCtrlC(64)], handle_interrupt=False
    )
    with pytest.raises(KeyboardInterrupt):
        runner.run()
    assert not runner.interrupted


def test_an_ignored_sigint_stays_ignored(tmp_path):
    """A background job (started with SIGINT ignored) is not made interruptible."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        runner, _, _ = build(tmp_path, total=128, callbacks=[PressCtrlC(64, times=2)])
        runner.run()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
    assert runner.env_steps == 128 and not runner.interrupted
