"""Reporting a run: the table, the recommendations with their code, a bar chart.

matplotlib is imported only by :func:`write_png` (the ``plot`` extra), with
the ``Agg`` backend.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from parllel.bench.run import BenchReport
from parllel.errors import MissingDependencyError
from parllel.errors.base import install_hint

__all__ = ["format_recommendations", "format_table", "require_png", "write_png"]

POLICY_WORDS = {"random": "random actions", "mlp": "MLP policy"}


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def format_table(report: BenchReport) -> str:
    """The measurements as a text table: envs, policy, layout, steps/s, relative to
    the best recommendable layout of the same env count and policy; the
    recommended rows are marked, refused ones say why, failed ones show
    their error."""
    chosen = {id(r.chosen) for r in report.recommendations}
    width = max(
        [len("layout")] + [len(m.layout.describe()) for m in report.measurements]
    )
    lines = [
        f"{report.env_factory.reference}: {report.cores} usable cores, "
        f"{report.seconds:g} s per measurement, batch_T {report.batch_T}",
        "",
        f"{'envs':>5}  {'policy':<6}  {'layout':<{width}}  {'steps/s':>11}  vs best",
    ]
    for m in report.measurements:
        start = f"{m.layout.n_envs:>5}  {m.policy:<6}  {m.layout.describe():<{width}}"
        if m.error is not None:
            lines.append(f"{start}  {'failed':>11}  {'':>7}  {_first_line(m.error)}")
            continue
        relative = report.relative(m)
        shown = "" if relative is None else f"{relative:.2f}"
        mark = "  <- recommended" if id(m) in chosen else ""
        if m.refused is not None:
            mark = f"  refused: {_first_line(m.refused)}"
        lines.append(f"{start}  {m.steps_per_second:>11,.0f}  {shown:>7}{mark}")
    return "\n".join(lines)


def format_recommendations(report: BenchReport) -> str:
    """For each env count and policy: the layout, the code that builds it, and
    how it compares with suggest_layout_for's prediction (or why there is
    nothing to recommend)."""
    factory = report.env_factory
    recommended = {(r.n_envs, r.policy): r for r in report.recommendations}
    groups = dict.fromkeys((m.layout.n_envs, m.policy) for m in report.measurements)
    lines = []
    for n_envs, policy in groups:
        words = f"{n_envs} envs, {POLICY_WORDS.get(policy, policy)}"
        r = recommended.get((n_envs, policy))
        if r is None:
            lines += [
                f"{words}: nothing to recommend: every layout failed or was refused",
                "",
            ]
            continue
        layout = r.chosen.layout
        lines.append(
            f"{words}: use {layout.describe()} ({r.chosen.steps_per_second:,.0f} steps/s)"
        )
        lines += [
            f"    {line}"
            for line in layout.script_lines(factory.import_line(), factory.name)
        ]
        lines += [f"  - {note}" for note in r.notes()]
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as error:
        raise MissingDependencyError(
            "--png needs the 'matplotlib' package: pip install matplotlib, or "
            f"{install_hint('plot')}"
        ) from error
    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    return pyplot


def require_png() -> None:
    """Raise :class:`~parllel.errors.MissingDependencyError` now if matplotlib is missing."""
    _pyplot()


def write_png(report: BenchReport, path: str | os.PathLike[str]) -> Path:
    """A bar chart of steps/s: one panel per env count and policy, one bar per layout.

    Returns:
        The PNG's path.

    Raises:
        MissingDependencyError: matplotlib is not installed (the ``plot`` extra).
    """
    pyplot = _pyplot()
    groups = list(
        dict.fromkeys((m.layout.n_envs, m.policy) for m in report.measurements)
    )
    chosen = {id(r.chosen) for r in report.recommendations}
    figure, axes = pyplot.subplots(
        len(groups),
        1,
        squeeze=False,
        figsize=(8, 0.5 + 0.45 * len(report.measurements)),
    )
    for axis, (n_envs, policy) in zip(axes[:, 0], groups):
        rows = [
            m
            for m in report.measurements
            if (m.layout.n_envs, m.policy) == (n_envs, policy)
        ]
        names = [
            m.layout.describe()
            + (" (failed)" if not m.ok else " (refused)" if m.refused else "")
            for m in rows
        ]
        values = [m.steps_per_second for m in rows]
        colors = ["tab:green" if id(m) in chosen else "tab:gray" for m in rows]
        axis.barh(names, values, color=colors)
        axis.invert_yaxis()
        axis.set_title(f"{n_envs} envs, {POLICY_WORDS.get(policy, policy)}")
        axis.set_xlabel("env steps per second")
        axis.grid(True, axis="x", alpha=0.3)
    figure.suptitle(report.env_factory.reference)
    figure.tight_layout()
    output = Path(path)
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=100)
    pyplot.close(figure)
    return output
