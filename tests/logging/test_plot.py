"""Learning-curve plotting from a run's progress.csv, in process and via the CLI."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from parllel.errors import ConfigError
from parllel.logging import CsvSink
from parllel.runners.run_directory import RunDirectory

needs_matplotlib = pytest.mark.skipif(
    importlib.util.find_spec("matplotlib") is None, reason="matplotlib not installed"
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def make_run(tmp_path):
    run = RunDirectory.create(tmp_path, "plot")
    with CsvSink(run.progress_csv) as sink:
        for update in range(20):
            metrics = {
                "train/return_mean": 10.0 + update,
                "train/return_std": 2.0,
                "train/loss": 1.0 / (update + 1),
            }
            if update % 5 == 4:
                metrics["eval/return_mean"] = 20.0 + update
            sink.log((update + 1) * 1024, metrics)
    return run


@needs_matplotlib
def test_plot_cli_writes_png_in_subprocess(tmp_path):
    run = make_run(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "parllel.plot", str(run.path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(run.learning_curve_path)
    assert run.learning_curve_path.read_bytes()[:8] == PNG_MAGIC


@needs_matplotlib
def test_plot_chosen_metrics_and_errors(tmp_path):
    from parllel.plot import default_metrics, main, plot_learning_curve

    run = make_run(tmp_path)
    output = plot_learning_curve(
        run.path, ["train/loss", "eval/return_mean"], output=tmp_path / "c.png"
    )
    assert output.read_bytes()[:8] == PNG_MAGIC
    assert default_metrics(["step", "a/return_mean", "a/return_std"]) == [
        "a/return_mean"
    ]
    with pytest.raises(ConfigError, match="nope"):
        plot_learning_curve(run.path, ["nope"])
    assert main([str(tmp_path / "empty")]) == 2
    assert main([str(run.path), "--metrics", "nope"]) == 2
    assert main([str(run.progress_csv), "--metrics", "train/loss"]) == 0
    assert run.learning_curve_path.is_file()


def test_missing_matplotlib_gives_clear_error(tmp_path, monkeypatch):
    from parllel.errors import MissingDependencyError
    from parllel.plot import main, plot_learning_curve

    run = make_run(tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(MissingDependencyError, match="pip install matplotlib"):
        plot_learning_curve(run.path)
    assert main([str(run.path)]) == 2


@needs_matplotlib
def test_plot_of_a_seed_group_draws_median_and_range(tmp_path):
    from parllel.logging.csv_sink import read_progress
    from parllel.plot import plot_learning_curve, seed_band, seed_run_dirs

    group = tmp_path / "group"
    for seed in range(3):
        run = RunDirectory.create(group, f"seed{seed}")
        with CsvSink(run.progress_csv) as sink:
            for update in range(4):
                sink.log(
                    (update + 1) * 256, {"train/return_mean": seed * 10.0 + update}
                )
    runs = seed_run_dirs(group)
    assert len(runs) == 3
    steps, middle, low, high = seed_band(
        [read_progress(r / "logs" / "progress.csv") for r in runs], "train/return_mean"
    )
    assert list(steps) == [256, 512, 768, 1024]
    assert list(middle) == [10, 11, 12, 13] and list(low) == [0, 1, 2, 3]
    assert list(high) == [20, 21, 22, 23]
    path = plot_learning_curve(group)
    assert path == group / "learning_curve.png"
    assert path.read_bytes()[:8] == PNG_MAGIC
