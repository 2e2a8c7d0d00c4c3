"""Logger sinks: CSV (growing header, resume), stdout table, TensorBoard, fan-out."""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pytest

from parllel.errors import ConfigError
from parllel.logging import CsvSink, Logger, MultiLogger, StdoutTable, read_progress
from parllel.logging.base import format_value, to_scalar
from parllel.logging.stdout import format_table


def read_rows(path):
    with open(path, newline="") as file:
        return list(csv.reader(file))


def test_csv_round_trip_with_growing_keys(tmp_path):
    path = tmp_path / "logs" / "progress.csv"
    with CsvSink(path) as sink:
        sink.log(100, {"train/return_mean": 1.5, "loss": np.float32(0.25)})
        sink.log(200, {"train/return_mean": 2.5})
        sink.log(300, {"eval/return_mean": 9.0, "loss": 0.125, "episodes": 7})
        sink.log(400, {"train/return_mean": float("nan")})
    rows = read_rows(path)
    assert rows[0] == [
        "step",
        "train/return_mean",
        "loss",
        "eval/return_mean",
        "episodes",
    ]
    assert rows[1] == ["100", "1.5", "0.25", "", ""]
    assert rows[3] == ["300", "", "0.125", "9.0", "7"]
    assert len(rows) == 5 and all(len(row) == 5 for row in rows)

    columns = read_progress(path)
    assert list(columns) == rows[0]
    np.testing.assert_array_equal(columns["step"], [100, 200, 300, 400])
    np.testing.assert_array_equal(columns["train/return_mean"][:2], [1.5, 2.5])
    assert math.isnan(columns["train/return_mean"][2])
    assert math.isnan(columns["train/return_mean"][3])
    assert np.isnan(columns["eval/return_mean"]).sum() == 3


def test_csv_values_round_trip_exactly(tmp_path):
    value = 0.1 + 0.2
    with CsvSink(tmp_path / "p.csv") as sink:
        sink.log(1, {"x": value, "big": 2**40})
    columns = read_progress(tmp_path / "p.csv")
    assert columns["x"][0] == value
    assert columns["big"][0] == 2**40


def test_csv_resume_appends_and_truncates(tmp_path):
    path = tmp_path / "progress.csv"
    with CsvSink(path) as sink:
        for step in (100, 200, 300):
            sink.log(step, {"a": step / 100})
    # resumed from a checkpoint at step 200: row 300 is dropped, then extended
    with CsvSink(path, resume=True, truncate_after=200) as sink:
        sink.log(300, {"a": 30.0, "b": 1.0})
    columns = read_progress(path)
    np.testing.assert_array_equal(columns["step"], [100, 200, 300])
    np.testing.assert_array_equal(columns["a"], [1.0, 2.0, 30.0])
    assert list(columns) == ["step", "a", "b"]
    # without resume the file starts over
    with CsvSink(path) as sink:
        sink.log(5, {"c": 1})
    assert read_rows(path) == [["step", "c"], ["5", "1"]]


def test_csv_leaves_no_temp_files(tmp_path):
    with CsvSink(tmp_path / "p.csv") as sink:
        for i in range(5):
            sink.log(i, {f"k{i}": i})
    assert [p.name for p in tmp_path.iterdir()] == ["p.csv"]


def test_csv_rejects_bad_metrics_and_closed_use(tmp_path):
    sink = CsvSink(tmp_path / "p.csv")
    with pytest.raises(ConfigError, match="'loss' is not a number"):
        sink.log(1, {"loss": "high"})
    with pytest.raises(ConfigError, match="reserved"):
        sink.log(1, {"step": 3})
    sink.close()
    sink.close()
    with pytest.raises(ValueError, match="after close"):
        sink.log(2, {"loss": 1.0})


def test_to_scalar_accepts_numbers_and_tensors():
    torch = pytest.importorskip("torch")
    assert to_scalar("a", True) == 1 and isinstance(to_scalar("a", np.int64(3)), int)
    assert to_scalar("a", torch.tensor(2.5)) == 2.5
    assert to_scalar("a", np.array(1.5)) == 1.5
    with pytest.raises(ConfigError):
        to_scalar("a", None)
    with pytest.raises(ConfigError):
        to_scalar("a", [1.0, 2.0])
    with pytest.raises(ConfigError):
        to_scalar(3, 1.0)


def test_format_value():
    assert format_value(40960) == "40960"
    assert format_value(0.0) == "0"
    assert format_value(21.5) == "21.5"
    assert format_value(0.012345678) == "0.012346"
    assert format_value(2.5e-7) == "2.500e-07"
    assert format_value(1.5e9) == "1.500e+09"
    assert format_value(float("nan")) == "nan"


def test_table_formatting_is_aligned():
    text = format_table(4096, {"train/return_mean": 21.5, "loss": 0.25, "n": 3})
    lines = text.splitlines()
    assert len({len(line) for line in lines}) == 1  # rectangular
    assert lines[0].startswith("+-") and lines[-1] == lines[0]
    assert lines[1].startswith("| step ") and lines[1].endswith(" 4096 |")
    keys = [line.split("|")[1].strip() for line in lines[3:-1]]
    assert keys == ["loss", "n", "train/return_mean"]
    # values right-aligned in one column
    assert {line.rindex("|") for line in lines[3:-1]} == {len(lines[0]) - 1}
    assert lines[5].endswith(" 21.5 |")


def test_stdout_table_prints_every_n_calls():
    stream = io.StringIO()
    table = StdoutTable(every=3, stream=stream)
    for call in range(7):
        table.log(call * 10, {"loss": call})
    printed = stream.getvalue()
    assert printed.count("| step ") == 3  # calls 0, 3, 6
    step_rows = [line for line in printed.splitlines() if line.startswith("| step ")]
    assert [int(row.split("|")[2]) for row in step_rows] == [0, 30, 60]
    # a blank line between tables, never one table's rule on the next's
    lines = printed.splitlines()
    assert lines.count("") == 2
    assert not any(a[0] == b[0] == "+" for a, b in zip(lines, lines[1:]) if a and b)


def test_stdout_table_uses_current_stdout(capsys):
    StdoutTable().log(7, {"x": 1.0})
    assert "| step " in capsys.readouterr().out


class Recorder:
    def __init__(self, fail_on_close: bool = False):
        self.calls = []
        self.closed = False
        self.fail_on_close = fail_on_close

    def log(self, step, metrics):
        self.calls.append((step, dict(metrics)))

    def close(self):
        self.closed = True
        if self.fail_on_close:
            raise OSError("disk gone")


def test_multi_logger_fans_out_and_closes_all():
    first, second, third = Recorder(fail_on_close=True), Recorder(), Recorder()
    assert isinstance(first, Logger)
    logger = MultiLogger([first, second, third])
    logger.log(5, {"a": np.float64(1.0)})
    assert first.calls == second.calls == [(5, {"a": 1.0})]
    with pytest.raises(OSError, match="disk gone"):
        logger.close()
    assert first.closed and second.closed and third.closed
    with pytest.raises(TypeError):
        MultiLogger([object()])


def test_tensorboard_sink_writes_event_files(tmp_path):
    pytest.importorskip("tensorboard")
    from parllel.logging import TensorBoardSink

    log_dir = tmp_path / "tb"
    with TensorBoardSink(log_dir) as sink:
        sink.log(10, {"train/return_mean": 1.0, "loss": 0.5})
        sink.log(20, {"train/return_mean": 2.0})
    events = list(log_dir.glob("events.out.tfevents.*"))
    assert len(events) == 1 and events[0].stat().st_size > 0

    from tensorboard.backend.event_processing.event_accumulator import (
        EventAccumulator,
    )

    accumulator = EventAccumulator(str(log_dir))
    accumulator.Reload()
    scalars = accumulator.Scalars("train/return_mean")
    assert [(s.step, s.value) for s in scalars] == [(10, 1.0), (20, 2.0)]
    assert "loss" in accumulator.Tags()["scalars"]


def test_tensorboard_missing_gives_clear_error(monkeypatch, tmp_path):
    import sys

    from parllel.errors import MissingDependencyError
    from parllel.logging import TensorBoardSink

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    with pytest.raises(MissingDependencyError, match="pip install tensorboard"):
        TensorBoardSink(tmp_path / "tb")
