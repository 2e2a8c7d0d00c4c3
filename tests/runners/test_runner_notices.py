"""What the runner tells the user: warnings at the user's line, a changed
total_steps on resume, an ignored SIGINT, SIGTERM as a safe stop, mismatch
messages that name shapes first, and run_training's resume and stop messages.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import warnings
from pathlib import Path

import pytest
from torch import nn

from parllel.cages import ProcessCage, ProcessLayout
from parllel.checkpoints.checkpoint import list_checkpoints
from parllel.errors import (
    CheckpointMismatchError,
    ParllelWarning,
)
from parllel.runners import Callback, RunDirectory, run_training
from parllel.runners.interrupt import InterruptHandler
from parllel.runners.outcome import report_outcome
from tests.helpers.envs import CountingEnv
from tests.runners.test_resume_hardening import StopAt, build

pytestmark = pytest.mark.timeout(60)


# -- warnings point at the caller of run() / run_training ------------------------


def test_schedule_warning_points_at_the_line_calling_run(tmp_path):
    runner, _, _ = build(None, total=100, checkpoint_interval_steps=None)
    with pytest.warns(ParllelWarning) as record:
        runner.run()
    assert [w.filename for w in record] == [__file__]


def test_schedule_warning_points_at_the_line_calling_run_training(tmp_path):
    run = RunDirectory.create(tmp_path, "fake", config={})
    runner, _, _ = build(run.checkpoints_dir, total=100)
    with pytest.warns(ParllelWarning) as record:
        run_training(runner, run)
    assert [w.filename for w in record] == [__file__]


# -- resuming with another total_steps -------------------------------------------


def test_resume_with_another_total_steps_warns_how_schedules_jump(tmp_path):
    first, _, _ = build(tmp_path, total=320, callbacks=[StopAt(64)])
    first.run()
    longer, _, _ = build(tmp_path, total=640)
    with pytest.warns(ParllelWarning) as record:
        longer.load(tmp_path)
    (warning,) = record
    message = str(warning.message)
    assert "total_steps=640" in message and "total_steps=320" in message
    assert "env step 64" in message
    assert "learning-rate and clip-range" in message
    assert "jump from 20.0% to 10.0% done" in message
    assert "at step 640 instead of 320" in message
    assert warning.filename == __file__


def test_resume_with_the_same_total_steps_or_a_finished_run_says_nothing(tmp_path):
    first, _, _ = build(tmp_path, total=320, callbacks=[StopAt(64)])
    first.run()
    same, _, _ = build(tmp_path, total=320)
    finished, _, _ = build(tmp_path, total=64)  # nothing left to train
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same.load(tmp_path)
        finished.load(tmp_path)
    assert finished.finished


def test_run_training_resume_with_another_total_steps_warns_at_its_caller(tmp_path):
    run = RunDirectory.create(tmp_path, "fake", config={})
    first, _, _ = build(run.checkpoints_dir, total=320, callbacks=[StopAt(64)])
    first.run()
    longer, _, _ = build(run.checkpoints_dir, total=384)
    with pytest.warns(ParllelWarning) as record:
        run_training(longer, run, resume=True)
    assert [w.filename for w in record] == [__file__]
    assert longer.env_steps == 384


# -- mismatches name the shapes first ---------------------------------------------


def test_shape_mismatch_comes_first_even_when_a_compared_key_differs(tmp_path):
    first, _, _ = build(tmp_path, callbacks=[StopAt(64)], config={"obs": 3})
    first.run()
    resumed, _, _ = build(tmp_path, obs=5, config={"obs": 5}, config_keys=["obs"])
    with pytest.raises(CheckpointMismatchError) as error:
        resumed.load(tmp_path)
    lines = str(error.value).splitlines()
    assert lines[0] == "checkpoint does not fit the current model:"
    assert "model parameter 'weight': shape (1, 3) in the checkpoint" in lines[1]
    assert "config keys that differ from the checkpoint's:" in lines
    assert "  obs: checkpoint 3, current 5" in lines


# -- signals ----------------------------------------------------------------------


class RaiseSignal(Callback):
    """Sends this process ``signum`` after the batch that reaches ``step``."""

    def __init__(self, step: int, signum: int, times: int = 1) -> None:
        self.step, self.signum, self.times = step, signum, times

    def on_collect_end(self, runner, batch, traj_infos):
        if runner.env_steps == self.step:
            for _ in range(self.times):
                signal.raise_signal(self.signum)


@pytest.fixture
def sigint_ignored():
    """SIGINT ignored, as in a background job a shell script started."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    yield
    signal.signal(signal.SIGINT, previous)


def test_an_ignored_sigint_warns_once_and_names_sigterm(tmp_path, sigint_ignored):
    runner, _, _ = build(tmp_path, total=128)
    with pytest.warns(ParllelWarning) as record:
        runner.run()
    (warning,) = record
    message = str(warning.message)
    assert "SIGINT is ignored" in message and "`cmd &`" in message
    assert f"kill {os.getpid()}" in message and "SIGTERM" in message
    assert "writes a checkpoint" in message
    assert "set -m" in message
    assert warning.filename == __file__
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_sigterm_stops_after_the_iteration_with_a_checkpoint(tmp_path, capfd):
    runner, _, _ = build(
        tmp_path,
        total=9_984,
        callbacks=[RaiseSignal(96, signal.SIGTERM)],
        checkpoint_interval_steps=1_000,
    )
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    runner.run()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # restored
    assert runner.interrupted and runner.env_steps == 96
    assert runner.stop_signals == [signal.SIGTERM]
    assert [p.name for p in list_checkpoints(tmp_path)] == [
        "checkpoint_000000000096.pt"
    ]
    err = capfd.readouterr().err
    assert "SIGTERM: stopping after this iteration and writing a checkpoint" in err
    assert "SIGTERM again to exit at once" in err


def test_sigterm_stops_a_run_whose_sigint_is_ignored(tmp_path, sigint_ignored):
    runner, _, _ = build(tmp_path, total=9_984, callbacks=[RaiseSignal(96, 15)])
    with pytest.warns(ParllelWarning):
        runner.run()
    assert runner.interrupted and runner.env_steps == 96


def test_second_sigterm_raises_at_once(tmp_path):
    runner, _, _ = build(
        tmp_path, total=9_984, callbacks=[RaiseSignal(96, signal.SIGTERM, times=2)]
    )
    with pytest.raises(KeyboardInterrupt):
        runner.run()
    assert runner.stop_signals == [signal.SIGTERM, signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_sigterm_handler_of_your_own_stays(tmp_path):
    received = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: received.append(1))
    try:
        runner, _, _ = build(
            tmp_path, total=128, callbacks=[RaiseSignal(64, signal.SIGTERM)]
        )
        runner.run()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert received == [1] and not runner.interrupted and runner.env_steps == 128


# -- run_training's messages --------------------------------------------------------


def test_run_training_exits_143_after_sigterm(tmp_path, capsys):
    run = RunDirectory.create(tmp_path, "fake", config={})
    runner, _, _ = build(
        run.checkpoints_dir, total=9_984, callbacks=[RaiseSignal(64, signal.SIGTERM)]
    )
    with pytest.raises(SystemExit) as exit_info:
        report_outcome(run_training(runner, run))
    assert exit_info.value.code == 128 + signal.SIGTERM
    out = capsys.readouterr().out
    assert "checkpoint written:" in out and "resume with:" in out


def test_double_ctrl_c_before_any_checkpoint_says_the_run_cannot_resume(
    tmp_path, capsys
):
    run = RunDirectory.create(tmp_path, "fake", config={})
    runner, _, _ = build(
        run.checkpoints_dir,
        total=9_984,
        checkpoint_interval_steps=None,
        callbacks=[RaiseSignal(32, signal.SIGINT, times=2)],
    )
    with pytest.raises(SystemExit) as exit_info:
        report_outcome(run_training(runner, run))
    assert exit_info.value.code == 130
    out = capsys.readouterr().out
    assert "the run cannot be resumed" in out
    assert "without a new checkpoint" not in out  # no older one exists
    assert "resume with:" not in out


def test_double_ctrl_c_after_a_checkpoint_names_it_and_the_resume_command(
    tmp_path, capsys
):
    run = RunDirectory.create(tmp_path, "fake", config={})
    runner, _, _ = build(
        run.checkpoints_dir,
        total=9_984,
        callbacks=[RaiseSignal(96, signal.SIGINT, times=2)],
    )
    with pytest.raises(SystemExit) as exit_info:
        report_outcome(run_training(runner, run))
    assert exit_info.value.code == 130
    out = capsys.readouterr().out
    assert "exited without a new checkpoint" in out
    assert "checkpoint_000000000064.pt" in out and "resume with:" in out


def test_run_training_resume_without_a_checkpoint_prints_why_and_exits_1(
    tmp_path, capsys
):
    run = RunDirectory.create(tmp_path, "fake", config={})
    runner, _, sampler = build(run.checkpoints_dir)
    with pytest.raises(SystemExit) as exit_info:
        report_outcome(run_training(runner, run, resume=True))
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith(f"cannot resume {run.path}: ")
    assert str(run.checkpoints_dir) in err
    assert sampler.batches == 0


def test_run_training_resume_of_a_mismatching_checkpoint_prints_it(tmp_path, capsys):
    run = RunDirectory.create(tmp_path, "fake", config={})
    first, _, _ = build(run.checkpoints_dir, callbacks=[StopAt(64)])
    first.run()
    resumed, _, _ = build(run.checkpoints_dir)
    resumed.checkpoint_objects["model"] = nn.Linear(5, 1)
    with pytest.raises(SystemExit) as exit_info:
        report_outcome(run_training(resumed, run, resume=True))
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert "checkpoint does not fit the current model" in err


def test_run_training_says_which_flag_trains_a_finished_run_further(tmp_path, capsys):
    run = RunDirectory.create(tmp_path, "fake", config={})
    first, _, _ = build(run.checkpoints_dir, total=128)
    first.run()
    resumed, _, _ = build(run.checkpoints_dir, total=128)
    assert report_outcome(run_training(resumed, run, resume=True)) == {}
    assert "resume with a larger --total-steps" in capsys.readouterr().out


def _catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` (``SigCgt`` in /proc)."""
    status = Path(f"/proc/{pid}/status").read_text()
    (mask,) = [
        line.split()[1] for line in status.splitlines() if line.startswith("SigCgt")
    ]
    return bool(int(mask, 16) >> (signum - 1) & 1)


def test_workers_forked_while_sigterm_is_handled_still_die_of_it():
    """A worker restarted (forked) during run() must not inherit the stop handler."""
    before = set(multiprocessing.active_children())
    with InterruptHandler(lambda signum: "stopping"):
        assert _catches(os.getpid(), signal.SIGTERM)
        with ProcessCage(
            CountingEnv, 2, layout=ProcessLayout(n_workers=1), start_method="fork"
        ) as cage:
            (worker,) = set(multiprocessing.active_children()) - before
            assert cage.n_envs == 2 and not _catches(worker.pid, signal.SIGTERM)


class NoticeLogger:
    """A logger that shows notices (as the live dashboard does)."""

    def __init__(self) -> None:
        self.notices: list[str] = []
        self.steps: list[int] = []

    def log(self, step, metrics):
        self.steps.append(step)

    def notice(self, text):
        self.notices.append(text)

    def close(self):
        pass


def test_the_stop_request_is_shown_by_the_logger_too(tmp_path):
    """A live dashboard redraws over what the signal handler wrote to stderr,
    so the runner hands the notice to the logger after the iteration."""
    runner, _, _ = build(tmp_path, total=9_984, callbacks=[RaiseSignal(96, 15)])
    logger = NoticeLogger()
    runner.logger = logger
    runner.run()
    assert runner.interrupted and runner.env_steps == 96
    assert logger.notices == [
        "SIGTERM: stopping after this iteration and writing a checkpoint"
    ]


def test_a_second_ctrl_c_while_plotting_still_prints_the_resume_command(
    tmp_path, monkeypatch, capsys
):
    """The graceful stop wrote its checkpoint; a second Ctrl-C then lands in
    the learning-curve plot: the report and the resume command still follow."""

    def interrupted_plot(path):
        raise KeyboardInterrupt

    monkeypatch.setattr("parllel.plot.plot_learning_curve", interrupted_plot)
    run = RunDirectory.create(tmp_path, "fake", config={})
    runner, _, _ = build(
        run.checkpoints_dir, total=9_984, callbacks=[RaiseSignal(96, signal.SIGTERM)]
    )
    with pytest.raises(SystemExit) as exit_info:
        report_outcome(run_training(runner, run))
    assert exit_info.value.code == 128 + signal.SIGTERM
    out = capsys.readouterr().out
    assert "no learning curve: interrupted" in out
    assert "checkpoint written:" in out and "resume with:" in out


def test_run_training_neither_prints_nor_exits_the_outcome_says_it(tmp_path, capsys):
    """The composition returns how the run ended; only report_outcome (the
    script's terminal) prints and exits."""
    run = RunDirectory.create(tmp_path, "fake", config={})
    runner, _, _ = build(
        run.checkpoints_dir, total=9_984, callbacks=[RaiseSignal(64, signal.SIGTERM)]
    )
    outcome = run_training(runner, run)
    assert capsys.readouterr().out == ""
    assert outcome.interrupted and outcome.exit_status == 128 + signal.SIGTERM
    assert outcome.last_checkpoint is not None and outcome.env_steps == 64
    finished = run_training(build(tmp_path / "other")[0], run)
    assert finished.resume_error is None and finished.exit_status == 0
    resumed, _, _ = build(tmp_path / "empty")
    empty = RunDirectory.create(tmp_path, "empty-run", config={})
    refused = run_training(resumed, empty, resume=True)
    assert refused.resume_error is not None and refused.exit_status == 1
    assert capsys.readouterr().err == ""
