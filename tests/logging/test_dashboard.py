"""The live dashboard: rendered into a recording rich console, with a fake clock."""

from __future__ import annotations

import io
import math
import re
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from parllel.errors import MissingDependencyError
from parllel.logging import Dashboard, Logger, MultiLogger
from parllel.logging.dashboard_state import DashboardState
from parllel.logging.dashboard_text import (
    FULL_BLOCK,
    PARTIAL_BLOCKS,
    SPARK_LEVELS,
    format_bytes,
    format_duration,
    hbar,
    sparkline,
)

rich_console = pytest.importorskip("rich.console")

ANSI = re.compile(r"\x1b\[")
TOTAL = 102_400

SYNC_METRICS = {
    "train/return_mean": 87.25,
    "train/return_std": 12.0,
    "train/return_min": 12.0,
    "train/return_max": 200.0,
    "train/length_mean": 87.25,
    "train/episodes": 1234,
    "time/env_steps": 51_200.0,
    "time/updates": 200.0,
    "time/elapsed_s": 20.0,
    "time/steps_per_second": 4512.0,
    "algo/policy_loss": -0.0123,
    "algo/value_loss": 0.25311,
    "algo/entropy": 0.612,
}
PHASES = {
    "time/frac/sample": 0.5,
    "time/frac/update": 0.25,
    "time/frac/eval": 0.125,
    "time/frac/checkpoint": 0.0,
    "time/frac/log": 0.0,
    "time/frac/other": 0.125,
    "time/sampler/batch_ms": 12.0,
    "time/sampler/env_step_ms": 6.0,
    "time/sampler/worker_wait_ms": 3.0,
    "time/sampler/inference_ms": 2.0,
    "time/sampler/transforms_ms": 0.5,
    "time/sampler/other_ms": 0.5,
}
EVAL = {
    "eval/return_mean": 500.0,
    "eval/return_std": 0.0,
    "eval/return_min": 500.0,
    "eval/return_max": 500.0,
    "eval/length_mean": 500.0,
    "eval/episodes": 10,
    "eval/success_rate": 0.75,
}
ASYNC = {
    "async/lag_min": 0.0,
    "async/lag_mean": 0.5,
    "async/lag_max": 1.0,
    "async/policy_version": 200.0,
    "async/restarts": 2.0,
    "async/dropped_batches": 1.0,
    "async/timeouts": 0.0,
}


class FakeClock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def recording_console(width: int = 100) -> rich_console.Console:
    return rich_console.Console(
        record=True, width=width, force_terminal=True, file=io.StringIO()
    )


def dashboard(clock: FakeClock, **kwargs) -> Dashboard:
    kwargs = {"system": False, "bar_width": 20, "live": False, **kwargs}
    return Dashboard(TOTAL, stream=io.StringIO(), clock=clock, **kwargs)


def shown(board: Dashboard, width: int = 100) -> str:
    """The dashboard drawn now, as plain text."""
    console = recording_console(width)
    console.print(board.render())
    return console.export_text()


def line_with(text: str, word: str) -> str:
    (line,) = [line for line in text.splitlines() if re.search(rf"\b{word}\b", line)]
    return line


def block(text: str, label: str) -> dict[str, str]:
    """The lines of one section, keyed by their first word after the label."""
    lines, inside = {}, False
    for line in text.splitlines():
        match = re.match(r"^│ ([a-z]*)\s+(\S+)", line)
        if match is None:
            continue
        if match.group(1):
            inside = match.group(1) == label
        if inside:
            lines[match.group(2)] = line
    return lines


def section_labels(text: str) -> set[str]:
    """The labels in the dashboard's left column."""
    return {
        match.group(1)
        for match in re.finditer(r"^│ ([a-z]+)\s", text, flags=re.MULTILINE)
    }


# -- sections ------------------------------------------------------------------


def test_a_sync_run_without_eval_or_timings_shows_only_its_sections():
    clock = FakeClock(20.0)
    board = dashboard(clock)
    board.log(51_200, SYNC_METRICS)
    text = shown(board)
    assert section_labels(text) == {"progress", "speed", "time", "episodes", "algo"}
    assert "eval" not in text and "lag" not in text


def test_every_section_shows_when_its_metrics_are_logged():
    clock = FakeClock(20.0)
    board = dashboard(clock, system=True)
    board.log(51_200, {**SYNC_METRICS, **PHASES, **EVAL, **ASYNC})
    text = shown(board)
    assert section_labels(text) == {
        "progress",
        "speed",
        "time",
        "learner",
        "sampler",
        "episodes",
        "eval",
        "algo",
        "async",
        "system",
    }
    assert "restarts 2" in text and "dropped batches 1" in text
    assert "timeouts 0" in text
    assert "lag 0 / 0.5 / 1 (min/mean/max)" in text
    assert "policy version 200" in text
    assert re.search(r"cpu (\d+%|-) \(\d+ process(es)?, \d+ cores\)", text)
    assert re.search(r"memory [\d.]+ [KMG]iB", text)


def test_numbers_are_formatted_for_people():
    clock = FakeClock(20.0)
    board = dashboard(clock)
    board.log(51_200, {**SYNC_METRICS, **EVAL})
    text = shown(board)
    assert "50.0%  51,200 / 102,400 env steps" in text
    assert "4,512 steps/s now · 2,560 average · 200 updates" in text
    train = line_with(text, "train return")
    assert train.split()[3:8] == ["87.2", "12.0", "12.0", "200.0", "1,234"]
    evaluation = line_with(text, "eval return")
    assert evaluation.split()[3:8] == ["500.0", "0.0", "500.0", "500.0", "10"]
    assert "at step 51,200" in evaluation
    assert "policy_loss -0.0123" in text and "value_loss 0.2531" in text
    assert "success_rate 0.75" in line_with(text, "success_rate")
    assert line_with(text, "success_rate").startswith("│ eval ")


def test_losses_are_all_shown_and_a_pair_is_never_split():
    clock = FakeClock(1.0)
    board = dashboard(clock)
    losses = {f"algo/loss_number_{i}": i / 3 for i in range(12)}
    board.log(100, losses)
    text = shown(board, width=60)
    for i in range(12):
        assert re.search(rf"loss_number_{i} {i / 3:.4g}(\s|$)", text), i


def test_the_eval_results_stay_until_the_next_eval():
    clock = FakeClock(1.0)
    board = dashboard(clock)
    board.log(1000, {**SYNC_METRICS, **EVAL})
    board.log(2000, {**SYNC_METRICS, "eval/return_mean": 250.0})
    board.log(3000, SYNC_METRICS)
    evaluation = line_with(shown(board), "eval return")
    assert evaluation.split()[3] == "250.0" and "at step 2,000" in evaluation


def test_non_finite_metrics_are_drawn_not_raised():
    clock = FakeClock(1.0)
    board = dashboard(clock)
    nan = float("nan")
    metrics = {**SYNC_METRICS, **PHASES, **EVAL, **ASYNC}
    board.log(1000, {key: nan for key in metrics})
    board.log(2000, {key: math.inf for key in metrics})
    text = shown(board)
    assert section_labels(text) >= {"progress", "learner", "sampler", "episodes"}
    assert "inf%" in text and "lag inf / inf / inf" in text
    assert "2,000 / 102,400 env steps" in text


@pytest.mark.parametrize(
    "bad", [{"refresh_per_second": 0}, {"history": 0}, {"bar_width": 0}]
)
def test_bad_settings_are_config_errors(bad):
    from parllel.errors import ConfigError

    with pytest.raises(ConfigError, match=next(iter(bad))):
        Dashboard(10, live=False, **bad)


# -- bars and sparklines ---------------------------------------------------------


def bar_cells(line: str) -> str:
    """The bar characters of a dashboard line (full and partial blocks)."""
    return "".join(c for c in line if c == FULL_BLOCK or c in PARTIAL_BLOCKS)


def test_phase_bars_are_proportional_to_their_share():
    clock = FakeClock(20.0)
    board = dashboard(clock, bar_width=20)
    board.log(51_200, {**SYNC_METRICS, **PHASES})
    text = shown(board)
    learner = {
        "sample": 10,
        "update": 5,
        "eval": 2.5,
        "checkpoint": 0,
        "other": 2.5,
    }
    rows = block(text, "learner")
    assert list(rows) == ["sample", "update", "eval", "checkpoint", "log", "other"]
    for phase, cells in learner.items():
        assert bar_cells(rows[phase]) == hbar(cells / 20, 20).strip(), phase
    assert bar_cells(rows["sample"]) == FULL_BLOCK * 10
    assert rows["sample"].rstrip(" │").endswith(" 50.0%")
    # the sampler's phases are shares of the batch time: 6 of 12 ms is half
    rows = block(text, "sampler")
    assert bar_cells(rows["env_step"]) == FULL_BLOCK * 10
    assert bar_cells(rows["worker_wait"]) == FULL_BLOCK * 5
    assert bar_cells(rows["other"]) == hbar(0.5 / 12, 20).strip()
    assert rows["env_step"].rstrip(" │").endswith(" 6.00 ms")
    assert rows["per"].rstrip(" │").endswith(" 12.00 ms")
    # the progress bar: half done
    assert bar_cells(line_with(text, "progress")) == FULL_BLOCK * 10


def test_bars_fit_the_console_width_when_not_given():
    clock = FakeClock(20.0)
    board = dashboard(clock, bar_width=None)
    board.log(TOTAL, {**SYNC_METRICS, **PHASES})
    for width in (60, 100, 160):
        text = shown(board, width=width)
        assert all(len(line) <= width for line in text.splitlines())
        full = bar_cells(line_with(text, "progress"))
        assert full == FULL_BLOCK * len(full) and 10 <= len(full) <= 40


def reference_level(value: float, low: float, high: float) -> float:
    """The exact (fractional) sparkline level of ``value``, 0 to 7."""
    return (value - low) / (high - low) * (len(SPARK_LEVELS) - 1)


finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@given(st.lists(finite, min_size=1, max_size=50), st.integers(1, 60))
def test_sparkline_matches_a_plain_reference(values, width):
    line = sparkline(values, width)
    kept = values[-width:]
    assert len(line) == len(kept)
    low, high = min(kept), max(kept)
    levels = [SPARK_LEVELS.index(char) for char in line]
    if high == low:
        assert line == SPARK_LEVELS[3] * len(kept)
        return
    for value, level in zip(kept, levels):  # the nearest of the eight levels
        assert abs(level - reference_level(value, low, high)) <= 0.5 + 1e-9
    assert levels[kept.index(low)] == 0 and levels[kept.index(high)] == 7
    for a, b in zip(kept, levels):
        for c, d in zip(kept, levels):
            assert a <= c or b >= d  # the order of the values is kept


def test_sparkline_known_values_and_gaps():
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"
    assert sparkline([10, 20, 30], width=2) == "▁█"
    assert sparkline([1.0, math.nan, 3.0]) == "▁ █"
    assert sparkline([math.nan, math.inf]) == "  "
    assert sparkline([]) == "" and sparkline([1, 2], width=0) == ""


@given(st.floats(-1, 2, allow_nan=False), st.integers(0, 80))
def test_hbar_matches_a_plain_reference(fraction, width):
    bar = hbar(fraction, width)
    assert len(bar) == width
    full = bar.count(FULL_BLOCK)
    rest = bar[full:].rstrip(" ")
    assert len(rest) <= 1 and (not rest or rest in PARTIAL_BLOCKS)
    eighths = 8 * full + (PARTIAL_BLOCKS.index(rest) + 1 if rest else 0)
    clipped = min(max(fraction, 0.0), 1.0)
    assert abs(eighths - clipped * width * 8) <= 0.5 + 1e-9


def test_sparkline_in_the_dashboard_follows_the_logged_mean_returns():
    clock = FakeClock(1.0)
    board = dashboard(clock)
    returns = [10.0, 30.0, 20.0, 80.0, 50.0]
    for index, value in enumerate(returns):
        board.log(1000 * (index + 1), {"train/return_mean": value})
    assert sparkline(returns) in line_with(shown(board), "train return")


# -- times ---------------------------------------------------------------------


def test_eta_from_the_logged_elapsed_time_counts_down_between_logs():
    clock = FakeClock(100.0)
    board = Dashboard(
        100_000, live=False, stream=io.StringIO(), clock=clock, system=False
    )
    clock.now = 110.0
    board.log(25_000, {"time/elapsed_s": 10.0})  # 2,500 steps/s on average
    assert "0:00:10 elapsed · 0:00:30 remaining" in shown(board)
    clock.now = 114.0
    assert "0:00:14 elapsed · 0:00:26 remaining" in shown(board)
    assert "2,500 average" in shown(board)


def test_eta_without_logged_times_uses_the_clock_since_the_start():
    clock = FakeClock(0.0)
    board = Dashboard(
        2_000, live=False, stream=io.StringIO(), clock=clock, system=False
    )
    clock.now = 5.0
    board.log(1_000, {})
    clock.now = 6.0
    board.log(1_500, {})
    text = shown(board)
    assert "500 steps/s now · 250 average" in text
    assert "0:00:06 elapsed · 0:00:02 remaining" in text


def test_state_rates_and_eta_directly():
    state = DashboardState(total_steps=100_000, now=0.0)
    assert state.average_rate() is None and state.remaining(5.0) is None
    assert state.elapsed(5.0) == 5.0
    state.update(
        25_000, {"time/elapsed_s": 10.0, "time/steps_per_second": 3000.0}, 10.0
    )
    assert state.current_rate() == 3000.0 and state.average_rate() == 2500.0
    assert state.remaining(10.0) == 30.0 and state.remaining(50.0) == 0.0
    state.update(100_000, {"time/elapsed_s": 40.0}, 40.0)
    assert state.remaining(41.0) == 0.0 and state.fraction_done() == 1.0
    assert DashboardState(None).remaining(1.0) is None


def test_eta_counts_on_the_training_rate_not_the_warm_up():
    """SAC's warm-up (random actions, no update) runs 10x faster than
    training: at its end the ETA is unknown, not the warm-up's 1 s; then it
    follows the steps since the warm-up's last log line."""
    state = DashboardState(total_steps=10_000, now=0.0)
    state.update(1_000, {"time/elapsed_s": 1.0, "time/updates": 0.0}, 1.0)
    state.update(2_000, {"time/elapsed_s": 2.0, "time/updates": 0.0}, 2.0)
    assert state.warming_up and state.average_rate() == 1_000.0
    assert state.remaining(2.0) is None  # not 8 s: the training rate is unknown
    assert "eta" not in state.summary_line(2.0)
    state.update(3_000, {"time/elapsed_s": 12.0, "time/updates": 1_000.0}, 12.0)
    assert not state.warming_up
    assert state.training_rate() == 100.0  # 1,000 steps in the 10 s after warm-up
    assert state.remaining(12.0) == 70.0  # 7,000 steps left at 100 per second
    state.update(4_000, {"time/elapsed_s": 22.0, "time/updates": 2_000.0}, 22.0)
    assert state.remaining(22.0) == 60.0
    # a run that updates from its first line (PPO) keeps the average rate
    ppo = DashboardState(total_steps=10_000, now=0.0)
    ppo.update(2_000, {"time/elapsed_s": 4.0, "time/updates": 1.0}, 4.0)
    assert ppo.remaining(4.0) == 16.0


@pytest.mark.parametrize(
    "seconds, text",
    [(0, "0:00:00"), (59.9, "0:00:59"), (3600, "1:00:00"), (90061, "1d 1:01:01")],
)
def test_durations(seconds, text):
    assert format_duration(seconds) == text
    assert format_duration(None) == format_duration(-1) == "--:--"


def test_memory_sizes():
    assert format_bytes(512) == "512 B"
    assert format_bytes(20 * 2**20) == "20.0 MiB"
    assert format_bytes(1000 * 2**20) == "1000 MiB"
    assert format_bytes(1.5 * 2**30) == "1.50 GiB"


# -- plain mode ----------------------------------------------------------------


def test_plain_lines_off_a_terminal_have_no_escape_codes():
    stream = io.StringIO()
    clock = FakeClock(20.0)
    board = Dashboard(TOTAL, stream=stream, clock=clock, system=False)
    assert not board.live  # a StringIO is no terminal
    board.log(51_200, {**SYNC_METRICS, **PHASES, **EVAL, **ASYNC})
    board.log(56_320, SYNC_METRICS)
    board.close()
    first, second = stream.getvalue().splitlines()
    assert not ANSI.search(stream.getvalue())
    assert first.startswith("step 51,200/102,400 (50%) | 4,512 steps/s (avg 2,560)")
    assert "| return 87.2 | eval 500.0 |" in first
    assert "policy_loss -0.0123 | value_loss 0.2531" in first
    assert "lag 1 | restarts 2 | dropped 1 |" in first and "timeouts" not in first
    assert first.endswith("elapsed 0:00:20 | eta 0:00:20")
    assert "eval" not in second  # only on lines with an evaluation


def test_plain_lines_with_system_usage_and_a_forced_terminal_console():
    console = recording_console()
    board = Dashboard(TOTAL, live=False, console=console, clock=FakeClock(1.0))
    board.log(1_024, {"train/return_mean": 3.0})
    written = console.file.getvalue()
    assert not ANSI.search(written)
    assert re.search(r"\| cpu (\d+|nan)% mem [\d.]+ [KMG]iB$", written.strip())


def test_plain_mode_needs_no_rich_and_live_mode_names_the_extra(monkeypatch):
    for name in [name for name in sys.modules if name.split(".")[0] == "rich"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "rich", None)
    stream = io.StringIO()
    board = Dashboard(10, live=False, stream=stream, system=False)
    board.log(5, {"train/return_mean": 1.0})
    board.close()
    assert stream.getvalue().startswith("step 5/10 (50%)")
    with pytest.raises(MissingDependencyError, match=r'pip install -e "\.\[logging\]"'):
        Dashboard(10, live=True)


# -- the live display ------------------------------------------------------------


def frames(console: rich_console.Console) -> list[str]:
    """Every frame the live display drew, oldest first."""
    return re.findall(r"╭.*?╯", console.export_text(clear=False), flags=re.DOTALL)


def test_live_display_draws_the_final_state_and_gives_the_terminal_back():
    console = recording_console()
    clock = FakeClock(0.0)
    stdout = sys.stdout
    board = Dashboard(TOTAL, console=console, clock=clock, system=False)
    assert board.live and isinstance(board, Logger)
    clock.now = 10.0
    board.log(51_200, {**SYNC_METRICS, "time/elapsed_s": 10.0})
    assert sys.stdout is not stdout  # prints go above the panel meanwhile
    print("a line printed during training")
    clock.now = 20.0
    board.log(TOTAL, {**SYNC_METRICS, "time/elapsed_s": 20.0})
    board.close()
    assert sys.stdout is stdout
    written = console.file.getvalue()
    assert written.endswith("\x1b[?25h")  # the cursor is shown again
    last = frames(console)[-1]
    assert "100.0%  102,400 / 102,400 env steps" in last
    assert "0:00:20 elapsed · 0:00:00 remaining" in last
    assert "a line printed during training" in console.export_text()


def test_live_display_off_a_terminal_prints_the_final_panel_on_its_own_lines():
    stream = io.StringIO()
    console = rich_console.Console(file=stream, width=80, force_terminal=False)
    board = Dashboard(TOTAL, console=console, live=True, system=False)
    board.log(1_024, SYNC_METRICS)
    board.close()
    console.print("what comes next")
    written = stream.getvalue()
    assert not ANSI.search(written)
    assert written.count("╭") == 1  # only the final panel, no redraws
    assert written.endswith("╯\nwhat comes next\n")


def test_close_after_an_exception_is_clean_and_idempotent():
    console = recording_console()
    stdout, stderr = sys.stdout, sys.stderr
    board = Dashboard(TOTAL, console=console, clock=FakeClock(1.0), system=False)
    with pytest.raises(RuntimeError, match="in the training loop"):
        try:
            board.log(1_024, SYNC_METRICS)
            raise RuntimeError("in the training loop")
        finally:
            board.close()
    assert (sys.stdout, sys.stderr) == (stdout, stderr)
    drawn = console.file.getvalue()
    board.close()
    assert console.file.getvalue() == drawn  # nothing more drawn
    assert drawn.count("\x1b[?25h") == 1
    with pytest.raises(ValueError, match="after close"):
        board.log(2_048, SYNC_METRICS)


def test_close_before_any_log_draws_nothing():
    console = recording_console()
    board = Dashboard(TOTAL, console=console, system=False)
    board.close()
    board.close()
    assert console.file.getvalue() == ""


def test_a_broken_metric_never_breaks_the_display_thread(monkeypatch):
    console = recording_console()
    board = Dashboard(TOTAL, console=console, clock=FakeClock(1.0), system=False)

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr("parllel.logging.dashboard_view.build_view", broken)
    board.log(1_024, SYNC_METRICS)
    board.close()
    assert "dashboard error: ZeroDivisionError('a bug')" in console.export_text()


# -- rewind (resuming) ---------------------------------------------------------------


def test_rewind_forgets_what_came_after_the_checkpoint():
    clock = FakeClock(0.0)
    board = dashboard(clock)
    for index, value in enumerate([10.0, 20.0, 30.0, 40.0, 50.0]):
        clock.now = index + 1.0
        metrics = {"train/return_mean": value}
        if index == 3:
            metrics["eval/return_mean"] = 99.0
        board.log(1000 * (index + 1), metrics)
    board.rewind(3000)
    text = shown(board)
    assert "3,000 / 102,400 env steps" in text
    assert sparkline([10.0, 20.0, 30.0]) in line_with(text, "train return")
    assert "eval" not in text  # logged at step 4,000, after the checkpoint
    assert "waiting for the first log line" in text  # rates restart
    clock.now = 10.0
    board.log(4000, {"train/return_mean": 45.0})
    clock.now = 12.0
    board.log(5000, {"train/return_mean": 55.0})
    # 1,000 steps in the last 2 s; 2,000 since the rewind (at 5 s) in 7 s
    assert "500 steps/s now · 286 average" in shown(board)


def test_multi_logger_forwards_rewind_to_the_dashboard():
    clock = FakeClock(1.0)
    board = dashboard(clock)
    board.log(5000, {"train/return_mean": 1.0})
    MultiLogger([board]).rewind(2000)
    assert board.state.step == 2000 and not board.state.returns


# -- the examples' console: build_run_logger and run_training --------------------------


@pytest.fixture
def run(tmp_path):
    from parllel.runners import RunDirectory

    return RunDirectory.create(tmp_path, "dash", config={})


@pytest.mark.parametrize(
    "console, first, live",
    [
        ("auto", "Dashboard", False),  # pytest's stdout is not a terminal
        ("dashboard", "Dashboard", True),
        ("plain", "Dashboard", False),
        ("table", "StdoutTable", None),
    ],
)
def test_build_run_logger_console_choices(run, console, first, live):
    from parllel.runners import build_run_logger

    logger = build_run_logger(run, 1000, console=console)
    try:
        names = [type(sink).__name__ for sink in logger.loggers]
        assert names[0] == first and "CsvSink" in names and "TensorBoardSink" in names
        if first == "Dashboard":
            assert logger.loggers[0].live is live
            assert logger.loggers[0].title == f"parllel · {run.path.name}"
            assert "StdoutTable" not in names and "ProgressBar" not in names
        else:
            assert names[-1] == "ProgressBar"
    finally:
        logger.close()


def test_build_run_logger_refuses_an_unknown_console(run):
    from parllel.errors import ConfigError
    from parllel.runners import build_run_logger

    with pytest.raises(ConfigError, match="console must be one of"):
        build_run_logger(run, 1000, console="fancy")


def test_run_training_summary_is_readable_after_the_live_display(run, capsys):
    from parllel.runners import run_training
    from parllel.runners.outcome import report_outcome
    from tests.runners.test_resume_hardening import build

    console = recording_console()
    board = Dashboard(320, console=console, live=True, system=False)
    runner, _, _ = build(run.checkpoints_dir, total=320, logger=board)
    stdout = sys.stdout
    report_outcome(run_training(runner, run))
    assert sys.stdout is stdout and board.closed
    assert console.file.getvalue().endswith("\x1b[?25h")
    last = frames(console)[-1]
    assert "100.0%  320 / 320 env steps" in last
    printed = capsys.readouterr().out
    assert f"320 steps; run in {run.path}" in printed
    assert not ANSI.search(printed)


def test_ctrl_c_stops_the_live_display_before_the_messages(run, capsys):
    from parllel.runners import run_training
    from parllel.runners.outcome import report_outcome

    console = recording_console()
    board = Dashboard(1000, console=console, live=True, system=False)

    class Interrupted:  # the little of a runner run_training uses
        logger = board
        finished = interrupted = False
        env_steps, total_steps = 100, 1000
        last_checkpoint = None
        stop_signals: list[int] = []

        def run(self):
            self.logger.log(100, {"train/return_mean": 1.0})
            raise KeyboardInterrupt

    stdout = sys.stdout
    with pytest.raises(SystemExit) as stop:
        report_outcome(run_training(Interrupted(), run))
    assert stop.value.code == 130
    assert sys.stdout is stdout and board.closed
    assert console.file.getvalue().endswith("\x1b[?25h")
    assert "interrupted before the first checkpoint" in capsys.readouterr().out


def test_a_notice_is_printed_above_the_live_panel_and_stays():
    console = recording_console()
    board = Dashboard(TOTAL, console=console, clock=FakeClock(1.0), system=False)
    try:
        board.log(1_024, SYNC_METRICS)
        board.notice("Ctrl-C: stopping after this iteration")
    finally:
        board.close()
    text = console.export_text()
    assert text.count("Ctrl-C: stopping after this iteration") == 1
    # printed before the final panel, not erased by it
    assert text.index("Ctrl-C: stopping") < text.rindex("steps/s")
    board.notice("after close: ignored")
    assert "after close" not in console.export_text()


def test_plain_mode_adds_nothing_for_a_notice():
    """The signal handler's own line on stderr is in order in plain output;
    printing the notice again would show it twice."""
    stream = io.StringIO()
    board = Dashboard(
        TOTAL, stream=stream, live=False, clock=FakeClock(1.0), system=False
    )
    board.notice("SIGTERM: stopping after this iteration")
    assert stream.getvalue() == ""
