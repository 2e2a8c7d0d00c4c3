"""The dashboard drawn with ``rich``: one panel, a labelled block per section.

Imported only when a :class:`~parllel.logging.Dashboard` draws (it imports
``rich``). :func:`build_view` turns a
:class:`~parllel.logging.dashboard_state.DashboardState` into a panel laid
out for a given width; :class:`DashboardView` does it for the width of the
console it is printed on. The lines are styled ``Text`` (no nested tables),
which keeps a redraw cheap.
"""

from __future__ import annotations

import math

from rich.console import Console, ConsoleOptions, RenderResult
from rich.panel import Panel
from rich.text import Text

from parllel.logging.dashboard_state import EPISODE_STATS, DashboardState
from parllel.logging.dashboard_text import (
    format_bytes,
    format_count,
    format_duration,
    format_number,
    format_return,
    hbar,
    sparkline,
)
from parllel.logging.process_usage import ProcessUsage

LABEL_WIDTH = 9
NAME_WIDTH = 12
LABEL_STYLE = "bold cyan"
TRACK_STYLE = "on grey23"
PHASE_STYLES = {
    "sample": "green",
    "env_step": "green",
    "update": "magenta",
    "inference": "magenta",
    "eval": "cyan",
    "worker_wait": "yellow",
    "checkpoint": "yellow",
    "transforms": "blue",
    "log": "blue",
}
SEPARATOR = " · "

Block = list[Text]  # the lines of one section, without the label column


def bar_text(fraction: float, width: int, style: str = "green") -> Text:
    """:func:`~parllel.logging.dashboard_text.hbar` styled, on a visible track."""
    text = hbar(fraction, width)
    filled = text.rstrip(" ")
    return Text.assemble(
        (filled, f"{style} {TRACK_STYLE}"), (text[len(filled) :], TRACK_STYLE)
    )


def auto_bar_width(width: int) -> int:
    """The bar width that fits a console ``width`` columns wide (10 to 40)."""
    return min(max(width - 60, 10), 40)


def _pack(parts: list[Text | str], width: int, separator: str = SEPARATOR) -> Block:
    """``parts`` joined by ``separator`` in lines at most ``width`` wide, where
    they fit; a part is never split across lines."""
    lines: Block = []
    line = Text()
    for part in parts:
        text = Text(part) if isinstance(part, str) else part
        if line.plain and len(line.plain) + len(separator) + len(text.plain) > width:
            lines.append(line)
            line = Text()
        if line.plain:
            line.append(separator)
        line.append_text(text)
    if line.plain:
        lines.append(line)
    return lines


def _progress(
    state: DashboardState, now: float, bars: int, width: int
) -> list[tuple[str, Block]]:
    fraction = state.fraction_done()
    steps = format_count(state.step)
    if fraction is None:
        progress = Text(f"{steps} env steps")
    else:
        total = format_count(state.total_steps or 0)
        progress = Text.assemble(
            bar_text(fraction, bars), f" {fraction:6.1%}  {steps} / {total} env steps"
        )
    rate, average = state.current_rate(), state.average_rate()
    speed_parts: list[Text | str] = []
    if rate is not None:
        speed_parts.append(Text.assemble((format_count(rate), "bold"), " steps/s now"))
    if average is not None:
        speed_parts.append(f"{format_count(average)} average")
    updates = state.latest.get("time/updates")
    if updates is not None:
        plural = "" if updates == 1 else "s"
        speed_parts.append(f"{format_count(updates)} update{plural}")
    speed = (
        _pack(speed_parts, width)
        if rate is not None or average is not None
        else [Text("waiting for the first log line", style="dim")]
    )
    times: list[Text | str] = [f"{format_duration(state.elapsed(now))} elapsed"]
    if state.total_steps is not None:
        times.append(f"{format_duration(state.remaining(now))} remaining")
    return [("progress", [progress]), ("speed", speed), ("time", _pack(times, width))]


def _phase_line(name: str, fraction: float, value: str, bars: int) -> Text:
    style = PHASE_STYLES.get(name, "white")
    return Text.assemble(
        f"{name:<{NAME_WIDTH}}", bar_text(fraction, bars, style), f" {value}"
    )


def _timings(state: DashboardState, bars: int) -> list[tuple[str, Block]]:
    sections: list[tuple[str, Block]] = []
    learner = state.learner_phases()
    if learner:
        lines = [
            _phase_line(name, fraction, f"{fraction:6.1%}", bars)
            for name, fraction in learner
        ]
        sections.append(("learner", lines))
    total, sampler = state.sampler_phases()
    if sampler or math.isfinite(total):
        lines = [
            _phase_line(name, ms / total if total > 0 else 0.0, f"{ms:7.2f} ms", bars)
            for name, ms in sampler
        ]
        per_batch = f"{'per batch':<{NAME_WIDTH}}{'':<{bars}} {total:7.2f} ms"
        lines.append(Text(per_batch, style="bold"))
        sections.append(("sampler", lines))
    return sections


def _episodes(
    state: DashboardState, spark_width: int, width: int
) -> list[tuple[str, Block]]:
    sources = [
        ("train", "train/", state.episode_table("train/")),
        ("eval", "eval/", state.episode_table("eval/")),
    ]
    rows: list[tuple[list[str], Text]] = []
    for name, prefix, quantities in sources:
        for quantity, stats in quantities.items():
            cells = [f"{name} {quantity}"]
            cells += [
                format_return(stats[s]) if s in stats else "" for s in EPISODE_STATS
            ]
            episodes = state.latest.get(f"{prefix}episodes")
            first = quantity == next(iter(quantities))
            cells.append(
                format_count(episodes) if episodes is not None and first else ""
            )
            note = Text()
            if name == "train" and quantity == "return":
                values = [value for _, value in state.returns]
                note = Text(sparkline(values, spark_width), style="green")
            elif name == "eval" and first and state.eval_step is not None:
                note = Text(f"at step {format_count(state.eval_step)}", style="dim")
            rows.append((cells, note))
    sections: list[tuple[str, Block]] = []
    if rows:
        header = ["", *EPISODE_STATS, "episodes"]
        widths = [
            max(len(cells[column]) for cells in [header, *(r[0] for r in rows)])
            for column in range(len(header))
        ]

        def line(cells: list[str]) -> str:
            first, *numbers = cells
            right = "  ".join(f"{c:>{w}}" for c, w in zip(numbers, widths[1:]))
            return f"{first:<{widths[0]}}  {right}"

        lines = [Text(line(header), style="dim")]
        lines += [Text.assemble(line(cells), "  ", note) for cells, note in rows]
        sections.append(("episodes", lines))
    extras = state.eval_extras()
    if extras:
        sections.append(("eval", _pairs(extras, width)))
    return sections


def _pairs(pairs: list[tuple[str, float]], width: int) -> Block:
    """``name value`` pairs packed into lines at most ``width`` wide (never split)."""
    texts: list[Text | str] = [
        Text.assemble((name, "dim"), " ", format_number(value)) for name, value in pairs
    ]
    return _pack(texts, width, separator="   ")


def _async(state: DashboardState, width: int) -> list[tuple[str, Block]]:
    metrics = state.with_prefix("async/")
    parts: list[Text | str] = []
    lags = [metrics.get(f"lag_{what}") for what in ("min", "mean", "max")]
    if any(value is not None for value in lags):
        shown = " / ".join("-" if v is None else format_number(v, 3) for v in lags)
        parts.append(f"lag {shown} (min/mean/max)")
    if "policy_version" in metrics:
        parts.append(f"policy version {format_count(metrics['policy_version'])}")
    for key, label in (
        ("restarts", "restarts"),
        ("dropped_batches", "dropped batches"),
        ("timeouts", "timeouts"),
    ):
        if key in metrics:
            value = metrics[key]
            style = "bold red" if value > 0 else ""
            parts.append(Text(f"{label} {format_count(value)}", style=style))
    return [("async", _pack(parts, width))] if parts else []


def _system(usage: ProcessUsage | None, width: int) -> list[tuple[str, Block]]:
    if usage is None:
        return []
    cpu = f"{usage.cpu_percent:.0f}%" if math.isfinite(usage.cpu_percent) else "-"
    processes = "process" if usage.processes == 1 else "processes"
    parts: list[Text | str] = [
        f"cpu {cpu} ({usage.processes} {processes}, {usage.cores} cores)",
        f"memory {format_bytes(usage.rss_bytes)}",
    ]
    return [("system", _pack(parts, width))]


def build_view(
    state: DashboardState,
    now: float,
    usage: ProcessUsage | None = None,
    *,
    width: int = 100,
    bar_width: int | None = None,
    title: str = "parllel",
) -> Panel:
    """The dashboard panel for ``state`` at clock reading ``now``.

    Sections whose metrics were never logged are left out.

    Args:
        state: what the dashboard knows.
        now: the clock reading the times are computed at.
        usage: CPU and memory of the run's processes (no row if None).
        width: the console width the panel is laid out for.
        bar_width: cells of every bar; None fits them to ``width``.
        title: the panel's title.
    """
    bars = bar_width if bar_width is not None else auto_bar_width(width)
    inner = max(width - LABEL_WIDTH - 4, 20)  # inside the border and the labels
    sections = _progress(state, now, bars, inner)
    sections += _timings(state, bars)
    sections += _episodes(state, max(bars, 8), inner)
    losses = state.losses()
    if losses:
        sections.append(("algo", _pairs(losses, inner)))
    sections += _async(state, inner)
    sections += _system(usage, inner)
    body = Text(no_wrap=True, overflow="ellipsis")
    for label, block in sections:
        for index, line in enumerate(block):
            if body.plain:
                body.append("\n")
            body.append(f"{label if index == 0 else '':<{LABEL_WIDTH}}", LABEL_STYLE)
            body.append_text(line)
    return Panel(body, title=title, title_align="left", border_style="blue")


class DashboardView:
    """A renderable that lays the dashboard out for the console it is drawn on.

    Args:
        state: what to show; keep a snapshot if the original may change.
        now: the clock reading the times are computed at.
        usage: CPU and memory of the run's processes (no row if None).
        bar_width: cells of every bar; None fits them to the console.
        title: the panel's title.
        show_errors: draw an error raised while laying out as a red line
            instead of raising it (for a display thread that must go on).
    """

    def __init__(
        self,
        state: DashboardState,
        now: float,
        usage: ProcessUsage | None = None,
        *,
        bar_width: int | None = None,
        title: str = "parllel",
        show_errors: bool = False,
    ) -> None:
        self.state, self.now, self.usage = state, now, usage
        self.bar_width, self.title = bar_width, title
        self.show_errors = show_errors

    def __rich_console__(
        self, console: Console, options: ConsoleOptions
    ) -> RenderResult:
        try:
            panel = build_view(
                self.state,
                self.now,
                self.usage,
                width=options.max_width,
                bar_width=self.bar_width,
                title=self.title,
            )
        except Exception as error:
            if not self.show_errors:
                raise
            yield Text(f"dashboard error: {error!r}", style="bold red")
            return
        yield panel
