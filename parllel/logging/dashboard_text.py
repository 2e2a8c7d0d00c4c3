"""Text pieces of the dashboard: bars, sparklines, numbers and durations.

Pure functions on plain strings (no ``rich``), shared by the live view and the
plain one-line summaries, and testable against a plain reference.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

#: The eight heights of a sparkline, lowest first.
SPARK_LEVELS = "▁▂▃▄▅▆▇█"

#: A full bar cell, then the partial cells by eighths (1/8 to 7/8 of a cell).
FULL_BLOCK = "█"
PARTIAL_BLOCKS = "▏▎▍▌▋▊▉"


def hbar(fraction: float, width: int) -> str:
    """A horizontal bar ``width`` cells wide, filled to ``fraction`` in eighths.

    The fraction is clipped to ``[0, 1]`` (NaN counts as 0); the unfilled
    cells are spaces, so the result is always ``width`` characters.

    Example:
        >>> hbar(0.5, 8), hbar(0.3, 4), hbar(1.5, 3)
        ('████    ', '█▎  ', '███')

    Args:
        fraction: how full the bar is.
        width: the number of cells (at least 0).

    Returns:
        The bar, ``width`` characters long.
    """
    if width <= 0:
        return ""
    if math.isnan(fraction):
        fraction = 0.0
    eighths = round(min(max(fraction, 0.0), 1.0) * width * 8)
    full, partial = divmod(eighths, 8)
    text = FULL_BLOCK * full + (PARTIAL_BLOCKS[partial - 1] if partial else "")
    return text.ljust(width)


def sparkline(values: Sequence[float], width: int | None = None) -> str:
    """The last ``width`` values as a line of eight-level block characters.

    The lowest finite value is ``▁``, the highest ``█``, the others in
    between (linearly, rounded to the nearest level). When all finite values
    are equal the line is flat at ``▄``; NaN and infinite values are spaces.

    Example:
        >>> sparkline([0, 1, 2, 3, 4, 5, 6, 7])
        '▁▂▃▄▅▆▇█'
        >>> sparkline([5, 5, float("nan"), 5])
        '▄▄ ▄'

    Args:
        values: the series, oldest first.
        width: keep only the newest ``width`` values (all if None).

    Returns:
        One character per kept value.
    """
    if width is not None:
        values = values[-width:] if width > 0 else []
    finite = [value for value in values if math.isfinite(value)]
    if not finite:
        return " " * len(values)
    low, high = min(finite), max(finite)
    top = len(SPARK_LEVELS) - 1
    chars = []
    for value in values:
        if not math.isfinite(value):
            chars.append(" ")
        elif high == low:
            chars.append(SPARK_LEVELS[top // 2])
        else:
            chars.append(SPARK_LEVELS[round((value - low) / (high - low) * top)])
    return "".join(chars)


def format_count(value: float) -> str:
    """An integer count with thousands separators: ``12,288``."""
    if not math.isfinite(value):
        return "-"
    return f"{round(value):,}"


def format_number(value: float, digits: int = 4) -> str:
    """A float to ``digits`` significant digits, scientific far from 1.

    Example:
        >>> format_number(0.253111), format_number(-1.5e-6), format_number(87.25)
        ('0.2531', '-1.50e-06', '87.25')
    """
    if not math.isfinite(value):
        return str(value)
    magnitude = abs(value)
    if magnitude == 0.0 or 1e-3 <= magnitude < 1e6:
        return f"{value:.{digits}g}"
    return f"{value:.{max(digits - 2, 1)}e}"


def format_return(value: float) -> str:
    """A return (or episode length) with one decimal: ``87.3``, ``-1,234.5``."""
    if not math.isfinite(value):
        return str(value)
    return f"{value:,.1f}"


def format_duration(seconds: float | None) -> str:
    """``H:MM:SS`` (``Nd H:MM:SS`` from a day on); ``--:--`` when unknown.

    Example:
        >>> format_duration(75.4), format_duration(90061), format_duration(None)
        ('0:01:15', '1d 1:01:01', '--:--')
    """
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "--:--"
    total = int(seconds)
    days, rest = divmod(total, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{days}d {clock}" if days else clock


def format_bytes(size: float) -> str:
    """A memory size in binary units: ``512 KiB``, ``1.21 GiB``."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    value, index = float(size), 0
    while abs(value) >= 1024 and index < len(units) - 1:
        value, index = value / 1024, index + 1
    unit = units[index]
    if unit in ("B", "KiB") or abs(value) >= 100:
        return f"{value:.0f} {unit}"
    return f"{value:.{1 if abs(value) >= 10 else 2}f} {unit}"


def join_parts(parts: Iterable[str], separator: str = " | ") -> str:
    """The non-empty ``parts`` joined by ``separator``."""
    return separator.join(part for part in parts if part)
