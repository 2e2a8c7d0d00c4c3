"""``python -m parllel.bench`` never loses measurements.

A layout or policy that raises is a row with its error (table and JSON) and
the other layouts are still measured and recommended; exit status 2 only if
nothing ran. Load balancing that the env refuses (envs that cannot move
between processes, as MuJoCo's) is measured, shown as refused and never
recommended.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from parllel.arrays.shared_memory import list_segments
from parllel.bench import run_bench
from parllel.bench.__main__ import main
from parllel.bench.layouts import candidate_layouts
from parllel.bench.measure import Measurement
from parllel.bench.recommend import recommend

ROOT = Path(__file__).resolve().parents[2]
HELPERS = "tests.helpers.bench_envs"
TINY = ["--envs", "2", "--seconds", "0.05", "--batch-T", "4"]

pytestmark = pytest.mark.timeout(120)


def nothing_left() -> None:
    for child in multiprocessing.active_children():
        child.join(10)
    assert multiprocessing.active_children() == []
    assert list_segments(os.getpid()) == []


def test_a_policy_that_raises_is_a_row_and_the_others_are_kept():
    report = run_bench(
        f"{HELPERS}:NoMlpEnv",
        [2],
        seconds=0.05,
        batch_T=4,
        policies=["random", "mlp"],
        layouts=["serial", "process-main"],
        progress=None,
    )
    rows = [(m.policy, m.layout.name, m.ok) for m in report.measurements]
    assert rows == [
        ("random", "serial", True),
        ("random", "process-main", True),
        ("mlp", "serial", False),
        ("mlp", "process-main", False),
    ]
    failed = report.measurements[2]
    assert failed.error.startswith("ConfigError: the 'mlp' policy cannot be built")
    assert [r.policy for r in report.recommendations] == ["random"]
    data = report.to_dict()["measurements"]
    assert data[2]["error"] == failed.error
    assert data[2]["steps_per_second"] is None and data[2]["relative"] is None
    assert data[0]["steps_per_second"] > 0 and data[0]["error"] is None
    nothing_left()


def test_the_cli_shows_failed_rows_and_exits_0_when_something_ran(capsys):
    status = main(
        [f"{HELPERS}:NoMlpEnv", *TINY, "--policy", "random,mlp"]
        + ["--layouts", "serial", "--json"]
    )
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "failed" in out and "ConfigError: the 'mlp' policy cannot be built" in out
    assert "2 envs, MLP policy: nothing to recommend" in out
    assert "2 envs, random actions: use serial" in out
    result = json.loads(out.strip().splitlines()[-1])
    assert [m["error"] is None for m in result["measurements"]] == [True, False]
    assert "Traceback" in err  # where it failed, on stderr


def test_the_cli_exits_2_only_if_nothing_ran(capsys):
    status = main([f"{HELPERS}:NoMlpEnv", *TINY, "--policy", "mlp", "--json"])
    out, err = capsys.readouterr()
    assert status == 2
    assert "no layout ran" in err and "cannot be built" in err
    result = json.loads(out.strip().splitlines()[-1])  # the record is still written
    assert result["measurements"] and result["recommendations"] == []
    assert all(m["error"] for m in result["measurements"])
    nothing_left()


def test_float64_observations_run_the_mlp_policy(capsys):
    """Regression: the mlp pass crashed on float64 observations (MuJoCo's)
    and the whole run was lost."""
    status = main([f"{HELPERS}:Float64NoopEnv", *TINY, "--policy", "mlp"])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "failed" not in out and "<- recommended" in out


def test_refused_rebalancing_is_measured_but_never_recommended():
    report = run_bench(
        f"{HELPERS}:EzPickleNoopEnv",
        [2],
        seconds=0.05,
        batch_T=4,
        layouts=["process-rebalance"],
        progress=None,
    )
    (row,) = report.measurements
    assert row.ok and row.steps_per_second > 0
    assert "EzPickle" in row.refused
    assert report.recommendations == []
    assert report.to_dict()["measurements"][0]["refused"] == row.refused
    nothing_left()


def test_refused_rebalancing_in_the_cli_leaves_no_runpy_warning(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "parllel.bench", f"{HELPERS}:EzPickleNoopEnv", *TINY]
        + ["--layouts", "serial,process-rebalance", "--seconds", "0.3"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=100,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "<frozen runpy>" not in done.stderr
    table = done.stdout.split("\n\n")[1]
    rebalance = [line for line in table.splitlines() if "rebalance" in line]
    assert len(rebalance) == 1 and "refused: EzPickleNoopEnv pickles" in rebalance[0]
    assert "use serial" in done.stdout


def test_refused_and_failed_measurements_never_win():
    layouts = {layout.name: layout for layout in candidate_layouts(8, cores=2)}
    group = [
        Measurement(layouts["serial"], "random", 100.0, (100.0,), 1),
        Measurement(layouts["process-workers"], "random", 0.0, (), 0, error="E: x"),
        Measurement(
            layouts["process-rebalance"], "random", 500.0, (500.0,), 1, refused="no"
        ),
        Measurement(layouts["process-main"], "random", 150.0, (150.0,), 1),
    ]
    r = recommend(group, layouts["process-main"], margin=0.05)
    assert r is not None
    assert r.chosen.layout.name == "process-main" and r.fastest is r.chosen
    assert recommend(group[1:3], layouts["process-main"]) is None
    # without a prediction (suggest_layout_for raised) the notes say so
    r = recommend(group, None, prediction_error="EnvError: broken")
    assert r is not None and not r.agree
    assert r.notes()[-1] == "suggest_layout_for raised EnvError: broken"
    assert r.to_dict()["predicted"] is None
