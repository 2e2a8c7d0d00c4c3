"""The console: a compact table written through the progress bar, one at the end."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from parllel.logging import ProgressBar, StdoutTable, read_progress
from parllel.logging.stdout import COMPACT_KEYS, select_metrics
from parllel.plot import continuous_rows, plot_learning_curve

METRICS = {
    "train/return_mean": 21.5,
    "train/return_std": 3.0,
    "train/discounted_return_mean": 9.0,
    "eval/return_mean": 50.0,
    "algo/policy_loss": -0.1,
    "algo/value_loss": 2.0,
    "algo/entropy": 0.6,
    "time/steps_per_second": 4000.0,
    "time/elapsed_s": 12.0,
    "time/updates": 3,
}


def _rows(text: str) -> list[str]:
    return [line.split("|")[1].strip() for line in text.splitlines() if "|" in line]


def test_compact_table_shows_returns_losses_speed_and_time():
    stream = io.StringIO()
    StdoutTable(stream=stream).log(4096, METRICS)
    assert _rows(stream.getvalue()) == [
        "step",
        "algo/policy_loss",
        "algo/value_loss",
        "eval/return_mean",
        "time/elapsed_s",
        "time/steps_per_second",
        "train/return_mean",
    ]
    assert set(select_metrics(METRICS, COMPACT_KEYS)) == set(
        _rows(stream.getvalue())[1:]
    )
    full = io.StringIO()
    StdoutTable(stream=full, keys=None).log(4096, METRICS)
    assert set(_rows(full.getvalue())[1:]) == set(METRICS)


def test_last_call_is_always_printed_at_close():
    stream = io.StringIO()
    table = StdoutTable(every=4, stream=stream)
    for call in range(6):  # printed: calls 0 and 4; call 5 only at close
        table.log(call * 100, {"algo/loss": float(call)})
    assert stream.getvalue().count("| step ") == 2
    table.close()
    steps = [line for line in stream.getvalue().splitlines() if "| step " in line]
    assert [int(line.split("|")[2]) for line in steps] == [0, 400, 500]
    # nothing pending: no repeated table
    again = io.StringIO()
    table = StdoutTable(every=2, stream=again)
    for call in range(3):
        table.log(call, {"algo/loss": 1.0})
    table.close()
    assert again.getvalue().count("| step ") == 2


def test_table_is_written_through_the_progress_bar():
    """The bar's line never shares a line with the table."""
    pytest.importorskip("tqdm")
    screen = io.StringIO()
    bar = ProgressBar(total=1000, disable=False, stream=screen)
    table = StdoutTable(stream=screen, progress_bar=bar)
    bar.log(100, METRICS)
    table.log(100, METRICS)
    bar.log(200, METRICS)
    table.close()
    bar.close()
    text = screen.getvalue()
    table_part = re.compile(r"\+---|\| (step|algo/|eval/|time/|train/)")
    table_lines = [line for line in text.split("\n") if table_part.search(line)]
    assert len(table_lines) == 10  # rule, step, rule, 6 metrics, rule
    # each table line, once the bar's carriage-return redraws are stripped,
    # starts with the table's own border: the bar was cleared before it
    for line in table_lines:
        visible = line.split("\r")[-1]
        assert visible.startswith(("|", "+")), repr(line)
    assert text.count("| step ") == 1


def test_plain_write_without_a_shown_bar():
    out = io.StringIO()
    bar = ProgressBar(total=10, disable=True)
    bar.write("hello", out)
    assert out.getvalue() == "hello\n"


def test_progress_bar_rewind_starts_at_the_resumed_step():
    pytest.importorskip("tqdm")
    screen = io.StringIO()
    bar = ProgressBar(total=1000, disable=False, stream=screen)
    bar.rewind(600)
    assert bar.position == 600
    bar.log(700, {})
    assert bar.position == 700
    bar.close()


def test_progress_bar_rate_restarts_after_a_warm_up():
    """The bar's rate (and so its ETA) leaves out warm-up steps: each log
    call without a new update restarts it from that step."""
    pytest.importorskip("tqdm")
    bar = ProgressBar(total=1000, disable=False, stream=io.StringIO())
    bar.log(100, {"time/updates": 0.0})
    bar.log(200, {"time/updates": 0.0})
    assert bar._bar.initial == 200 and bar.position == 200  # warm-up: restarted
    bar.log(300, {"time/updates": 100.0})
    assert bar._bar.initial == 200 and bar.position == 300  # training: counted
    bar.log(400, {"time/updates": 200.0})
    assert bar._bar.initial == 200 and bar.position == 400
    bar.close()


def test_plot_keeps_the_resumed_rows_where_steps_fold_back(tmp_path):
    pytest.importorskip("matplotlib")
    csv = tmp_path / "logs" / "progress.csv"
    csv.parent.mkdir()
    # a resumed run that did not drop the rows after its checkpoint at 256
    csv.write_text(
        "step,train/return_mean\n0,1\n256,2\n512,3\n768,4\n512,30\n768,40\n1024,50\n"
    )
    columns = continuous_rows(read_progress(csv))
    assert list(columns["step"]) == [0, 256, 512, 768, 1024]
    assert list(columns["train/return_mean"]) == [1, 2, 30, 40, 50]
    assert plot_learning_curve(tmp_path).is_file()


def test_continuous_rows_is_a_no_op_on_increasing_steps():
    columns = {"step": np.arange(5.0) * 10, "x": np.arange(5.0)}
    kept = continuous_rows(columns)
    assert all(np.array_equal(kept[name], columns[name]) for name in columns)
