"""Learning curves from a run directory's ``logs/progress.csv``.

Command line::

    python -m parllel.plot runs/ppo-cartpole-20250101-120000
    python -m parllel.plot RUN_DIR --metrics eval/return_mean train/return_mean

writes ``RUN_DIR/learning_curve.png``: one panel per metric against env steps
(the ``step`` column). A metric ``X_mean`` with a ``X_std`` column gets a
shaded +-1 std band. Without ``--metrics``, every ``*return_mean`` column is
plotted. A group of seed runs (``--seeds K``: a directory of run
directories) is drawn as each metric's median over the runs with a band
from their minimum to their maximum. matplotlib is imported only when plotting, with the ``Agg`` backend
(no display needed).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from parllel.errors import ConfigError, MissingDependencyError
from parllel.errors.base import install_hint
from parllel.logging.csv_sink import STEP_COLUMN, read_progress

OUTPUT_NAME = "learning_curve.png"


def find_progress_csv(run_dir: str | os.PathLike[str]) -> Path:
    """The progress CSV of a run: ``logs/progress.csv``, ``progress.csv``, or the file itself.

    Raises:
        FileNotFoundError: if none exists.
    """
    run_dir = Path(run_dir)
    candidates = [run_dir / "logs" / "progress.csv", run_dir / "progress.csv"]
    if run_dir.is_file():
        candidates.insert(0, run_dir)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"no logs/progress.csv in {run_dir}")


def default_metrics(columns: Sequence[str]) -> list[str]:
    """The columns plotted when none are chosen: those ending in ``return_mean``."""
    return [name for name in columns if name.endswith("return_mean")]


def continuous_rows(
    columns: dict[str, np.ndarray], x: str = STEP_COLUMN
) -> dict[str, np.ndarray]:
    """Keep the rows that make ``x`` strictly increasing, preferring later rows.

    A run resumed from a checkpoint without rewinding its CSV (an older
    parllel, or a hand-written loop) has rows whose step goes back; for each
    such step only the row logged last is kept, so the curve never folds back.
    Rows without an ``x`` value are dropped.

    Example:
        >>> continuous_rows({"step": np.array([0, 256, 512, 256, 512, 768.0])})
        {'step': array([  0., 256., 512., 768.])}
    """
    steps = columns[x]
    keep = np.zeros(len(steps), dtype=bool)
    lowest_later = np.inf
    for row in range(len(steps) - 1, -1, -1):
        if steps[row] < lowest_later:  # False for NaN
            keep[row] = True
            lowest_later = steps[row]
    return {name: values[keep] for name, values in columns.items()}


def seed_run_dirs(path: str | os.PathLike[str]) -> list[Path]:
    """The run directories of a group of seeds (``--seeds K``): the
    subdirectories of ``path`` with a ``logs/progress.csv``, sorted."""
    path = Path(path)
    if not path.is_dir():
        return []
    return sorted(p for p in path.iterdir() if (p / "logs" / "progress.csv").is_file())


def seed_band(
    runs: Sequence[dict[str, np.ndarray]], name: str, x: str = STEP_COLUMN
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Steps, median, min and max of metric ``name`` over the runs, at the
    steps every run logged it.

    Example:
        >>> a = {"step": np.array([1.0, 2.0]), "r": np.array([0.0, 2.0])}
        >>> b = {"step": np.array([1.0, 2.0]), "r": np.array([1.0, 4.0])}
        >>> seed_band([a, b], "r")[1]
        array([0.5, 3. ])
    """
    present = [
        {float(s): float(v) for s, v in zip(run[x], run[name]) if not np.isnan(v)}
        for run in runs
    ]
    steps = np.array(sorted(set.intersection(*(set(p) for p in present))))
    values = np.array([[p[s] for s in steps] for p in present]).reshape(
        len(runs), len(steps)
    )
    return steps, np.median(values, 0), values.min(0), values.max(0)


def plot_seed_runs(
    group: str | os.PathLike[str],
    run_dirs: Sequence[Path],
    metrics: Sequence[str] | None = None,
    *,
    x: str = STEP_COLUMN,
    output: str | os.PathLike[str] | None = None,
) -> Path:
    """Plot K runs of one configuration: each metric's median over the runs
    with a band from their minimum to their maximum (and each run faintly).

    Raises:
        ConfigError: a metric is not in every run, or none is chosen.
    """
    runs = []
    for run_dir in run_dirs:
        columns = read_progress(find_progress_csv(run_dir))
        runs.append(continuous_rows(columns, x) if x in columns else columns)
    common = set.intersection(*(set(run) for run in runs))
    metrics = list(metrics) if metrics else default_metrics(sorted(common))
    unknown = [name for name in [x, *metrics] if name not in common]
    if not metrics or unknown:
        raise ConfigError(
            f"{', '.join(unknown) or 'no return_mean metric'} not in every run of "
            f"{group}; columns: {sorted(common)}"
        )
    output = Path(group) / OUTPUT_NAME if output is None else Path(output)
    pyplot = _pyplot()
    figure, axes = pyplot.subplots(
        len(metrics),
        1,
        sharex=True,
        squeeze=False,
        figsize=(7, 2.6 * len(metrics) + 0.6),
    )
    for axis, name in zip(axes[:, 0], metrics):
        for run in runs:
            present = ~np.isnan(run[name])
            axis.plot(run[x][present], run[name][present], linewidth=0.6, alpha=0.3)
        steps, middle, low, high = seed_band(runs, name, x)
        few = len(steps) < 20  # a short run: its points shown
        axis.plot(
            steps,
            middle,
            color="black",
            linewidth=1.8,
            marker="o" if few else None,
            markersize=3,
            label="median",
        )
        axis.fill_between(steps, low, high, alpha=0.25, linewidth=0, label="range")
        axis.set_ylabel(name)
        axis.grid(True, alpha=0.3)
    axes[0, 0].legend(loc="best", fontsize="small")
    axes[-1, 0].set_xlabel("env steps" if x == STEP_COLUMN else x)
    figure.suptitle(f"{Path(group).name} ({len(runs)} seeds)")
    figure.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=100)
    pyplot.close(figure)
    return output


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as error:
        raise MissingDependencyError(
            "plotting needs the 'matplotlib' package: pip install matplotlib, "
            f"or {install_hint('plot')}"
        ) from error
    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    return pyplot


def plot_learning_curve(
    run_dir: str | os.PathLike[str],
    metrics: Sequence[str] | None = None,
    *,
    x: str = STEP_COLUMN,
    output: str | os.PathLike[str] | None = None,
) -> Path:
    """Plot chosen metrics of a run against env steps into a PNG.

    Args:
        run_dir: the run directory (or its progress CSV).
        metrics: column names to plot, one panel each; None picks every
            ``*return_mean`` column.
        x: the column for the x axis (``step``: env steps).
        output: the PNG path; default ``learning_curve.png`` in the run
            directory (the parent of ``logs/`` when given the CSV).

    Returns:
        The path of the written PNG.

    Raises:
        FileNotFoundError: if the run has no progress CSV.
        ConfigError: if a metric (or ``x``) is not a column, or none is chosen.
        MissingDependencyError: if matplotlib is not installed.
    """
    seed_runs = seed_run_dirs(run_dir)
    if seed_runs:
        return plot_seed_runs(run_dir, seed_runs, metrics, x=x, output=output)
    csv_path = find_progress_csv(run_dir)
    columns = read_progress(csv_path)
    if x in columns:
        columns = continuous_rows(columns, x)
    metrics = list(metrics) if metrics else default_metrics(list(columns))
    if not metrics:
        raise ConfigError(
            f"no metric to plot: none ending in 'return_mean' in {csv_path}; choose "
            f"from {sorted(c for c in columns if c != x)}"
        )
    unknown = [name for name in [x, *metrics] if name not in columns]
    if unknown:
        raise ConfigError(
            f"{', '.join(unknown)} not in {csv_path}; columns: {sorted(columns)}"
        )
    run_root = csv_path.parent
    if run_root.name == "logs":  # <run>/logs/progress.csv
        run_root = run_root.parent
    if output is None:
        output = run_root / OUTPUT_NAME
    output = Path(output)

    pyplot = _pyplot()
    figure, axes = pyplot.subplots(
        len(metrics),
        1,
        sharex=True,
        squeeze=False,
        figsize=(7, 2.6 * len(metrics) + 0.6),
    )
    steps = columns[x]
    for axis, name in zip(axes[:, 0], metrics):
        values = columns[name]
        present = ~np.isnan(values) & ~np.isnan(steps)
        sparse = present.sum() < 0.5 * len(values)  # e.g. eval every N updates
        axis.plot(
            steps[present],
            values[present],
            marker="o" if sparse else None,
            markersize=3,
            linewidth=1.5,
        )
        std_name = name[: -len("_mean")] + "_std" if name.endswith("_mean") else None
        if std_name in columns:
            std = columns[std_name][present]
            axis.fill_between(
                steps[present],
                values[present] - std,
                values[present] + std,
                alpha=0.25,
                linewidth=0,
            )
        axis.set_ylabel(name)
        axis.grid(True, alpha=0.3)
    axes[-1, 0].set_xlabel("env steps" if x == STEP_COLUMN else x)
    figure.suptitle(run_root.name)
    figure.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=100)
    pyplot.close(figure)
    return output


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: ``python -m parllel.plot RUN_DIR [--metrics ...]``.

    Returns:
        The exit status (0 on success, 2 on a usage or data error).
    """
    parser = argparse.ArgumentParser(
        prog="python -m parllel.plot",
        description="Plot a run's learning curve into RUN_DIR/learning_curve.png.",
    )
    parser.add_argument("run_dir", help="run directory (or a progress CSV)")
    parser.add_argument(
        "--metrics",
        nargs="+",
        default=None,
        help="columns to plot (default: every *return_mean column)",
    )
    parser.add_argument(
        "--x", default=STEP_COLUMN, help="x-axis column (default: step)"
    )
    parser.add_argument("--output", default=None, help="PNG path")
    args = parser.parse_args(argv)
    try:
        path = plot_learning_curve(
            args.run_dir, args.metrics, x=args.x, output=args.output
        )
    except (FileNotFoundError, ConfigError, MissingDependencyError) as error:
        print(f"parllel.plot: error: {error}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
