"""The :class:`Logger` protocol, metric coercion, and :class:`MultiLogger`.

A logger receives ``log(step, metrics)`` calls, where ``step`` is the global
step the runner counts in (by convention the number of environment steps
taken so far) and ``metrics`` maps names such as ``"train/return_mean"`` to
real numbers. Loggers are built in the training script and passed to whatever
logs; parllel keeps no global logger.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from parllel.errors import ConfigError


@runtime_checkable
class Logger(Protocol):
    """Anything that accepts metrics at a step and can be closed.

    Example:
        >>> class PrintLogger:
        ...     def log(self, step, metrics):
        ...         print(step, dict(metrics))
        ...     def close(self):
        ...         pass
        >>> isinstance(PrintLogger(), Logger)
        True
    """

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Record ``metrics`` at ``step``."""
        ...

    def close(self) -> None:
        """Flush and release files; later ``log`` calls are errors or no-ops."""
        ...


def to_scalar(key: str, value: Any) -> int | float:
    """Convert one metric value to a Python ``int`` or ``float``.

    Accepts Python and numpy numbers, bools (as ``0``/``1``) and anything with
    a ``__float__`` (0-d numpy arrays, one-element torch tensors).

    Args:
        key: the metric's name, used in the error message.
        value: the value to convert.

    Returns:
        An ``int`` for integral inputs, otherwise a ``float``.

    Raises:
        ConfigError: if ``key`` is not a string or ``value`` is not a number.
    """
    if not isinstance(key, str):
        raise ConfigError(f"metric names must be strings, got {key!r}")
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, (str, bytes)) or value is None:
        raise ConfigError(f"metric {key!r} is not a number: {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"metric {key!r} is not a number: {value!r}") from error


def to_scalars(metrics: Mapping[str, Any]) -> dict[str, int | float]:
    """Apply :func:`to_scalar` to every entry of ``metrics``."""
    return {key: to_scalar(key, value) for key, value in metrics.items()}


def format_value(value: int | float) -> str:
    """Format a metric for humans: integers in full, floats to 5 significant digits.

    Floats far from 1 (below 1e-3 or at least 1e6 in magnitude) use
    scientific notation, so columns of mixed scales stay narrow.

    Example:
        >>> format_value(40960), format_value(0.012345678), format_value(2.5e-7)
        ('40960', '0.012346', '2.500e-07')
    """
    if isinstance(value, int):
        return str(value)
    if math.isnan(value) or math.isinf(value):
        return str(value)
    magnitude = abs(value)
    if magnitude == 0.0 or 1e-3 <= magnitude < 1e6:
        return f"{value:.5g}"
    return f"{value:.3e}"


class WarmupWatch:
    """Whether each log call of a run falls in a warm-up: its ``time/updates``
    (the runner's count of updates) did not grow since the previous call, as
    while an off-policy run fills its replay before ``learning_starts``.

    The rate of such steps (collection only) says nothing about the rate of
    training, so a remaining-time estimate leaves them out.

    Example:
        >>> watch = WarmupWatch()
        >>> watch.check({"time/updates": 0.0}), watch.check({"time/updates": 4.0})
        (True, False)
    """

    def __init__(self) -> None:
        self._updates: float | None = None

    def check(self, metrics: Mapping[str, float]) -> bool | None:
        """Whether this call is in a warm-up (None: no ``time/updates``)."""
        updates = metrics.get("time/updates")
        if updates is None or not math.isfinite(updates):
            return None
        previous, self._updates = self._updates, float(updates)
        return updates == 0 or updates == previous

    def reset(self) -> None:
        """Forget the count (a resumed run starts counting again)."""
        self._updates = None


class Sink:
    """Small base for parllel's sinks: context-manager support and a closed flag."""

    closed: bool = False

    def log(self, step: int, metrics: Mapping[str, float]) -> None:  # pragma: no cover
        """Record ``metrics`` at ``step``."""
        raise NotImplementedError

    def close(self) -> None:
        """Release resources; calling it twice is harmless."""
        self.closed = True

    def __enter__(self) -> Sink:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class MultiLogger(Sink):
    """Send every ``log`` call to several loggers.

    ``close()`` closes every logger even if one of them raises, then re-raises
    the first error.

    Example:
        >>> logger = MultiLogger([StdoutTable(every=10), CsvSink("progress.csv")])
        >>> logger.log(4096, {"train/return_mean": 21.5})
        >>> logger.close()
    """

    def __init__(self, loggers: Iterable[Logger]) -> None:
        self.loggers = list(loggers)
        for logger in self.loggers:
            if not isinstance(logger, Logger):
                raise TypeError(f"{logger!r} has no log(step, metrics)/close()")

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Forward ``metrics`` at ``step`` to every logger, in order."""
        metrics = to_scalars(metrics)
        for logger in self.loggers:
            logger.log(step, metrics)

    def notice(self, text: str) -> None:
        """Forward ``notice(text)`` (a message for the person watching, such
        as a stop request) to every logger that has it."""
        for logger in self.loggers:
            notice = getattr(logger, "notice", None)
            if callable(notice):
                notice(text)

    def rewind(self, step: int) -> None:
        """Forward ``rewind(step)`` to every logger that has it (when resuming)."""
        for logger in self.loggers:
            rewind = getattr(logger, "rewind", None)
            if callable(rewind):
                rewind(step)

    def close(self) -> None:
        """Close every logger; re-raise the first error any of them raised."""
        if self.closed:
            return
        self.closed = True
        first_error: BaseException | None = None
        for logger in self.loggers:
            try:
                logger.close()
            except Exception as error:  # noqa: BLE001 - close the rest first
                if first_error is None:
                    first_error = error
        if first_error is not None:
            raise first_error
