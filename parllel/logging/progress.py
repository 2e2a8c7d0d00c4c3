"""A tqdm progress bar showing environment steps per second and recent return."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from parllel.errors import MissingDependencyError
from parllel.errors.base import install_hint
from parllel.logging.base import Sink, WarmupWatch, format_value, to_scalar

DEFAULT_POSTFIX = {"return": "train/return_mean", "eval": "eval/return_mean"}


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class ProgressBar(Sink):
    """Show progress in environment steps, the step rate and recent returns.

    A :class:`~parllel.logging.Logger`: ``log(step, metrics)`` moves the bar to
    ``step`` and shows the ``postfix`` metrics; :meth:`update_to` moves it
    between logs. Shown only on a terminal by default; tqdm is imported only
    when shown.

    Example:
        >>> bar = ProgressBar(total=1_000_000)
        >>> bar.log(4096, {"train/return_mean": 21.5})  # 4096/1000000 ... step/s, return=21.5
        >>> bar.close()

    Args:
        total: env steps of the whole run, or None for an open-ended counter.
        disable: None (show if ``stream`` is a TTY), True or False.
        stream: where to draw; ``sys.stderr`` if None.
        postfix: label to metric name, or metric names (their own labels).
        initial: starting step (when resuming).

    Raises:
        MissingDependencyError: if the bar is shown and tqdm is not installed.
    """

    def __init__(
        self,
        total: int | None = None,
        *,
        disable: bool | None = None,
        stream: TextIO | None = None,
        postfix: Mapping[str, str] | Sequence[str] | None = None,
        initial: int = 0,
        description: str = "",
    ) -> None:
        stream = stream if stream is not None else sys.stderr
        if postfix is None:
            postfix = DEFAULT_POSTFIX
        if not isinstance(postfix, Mapping):
            postfix = {key: key for key in postfix}
        self.postfix = dict(postfix)
        self.disabled = (not _is_tty(stream)) if disable is None else bool(disable)
        self._values: dict[str, str] = {}
        self._bar: Any = None
        self._warmup = WarmupWatch()
        if self.disabled:
            return
        try:
            from tqdm import tqdm
        except ImportError as error:
            raise MissingDependencyError(
                "ProgressBar needs the 'tqdm' package: pip install tqdm, or "
                f"{install_hint('logging')} (or pass disable=True)"
            ) from error
        self._bar = tqdm(
            total=total,
            initial=initial,
            file=stream,
            desc=description or None,
            unit="step",
            unit_scale=True,
            dynamic_ncols=True,
        )

    @property
    def position(self) -> int:
        """The step the bar shows (0 when disabled)."""
        return int(self._bar.n) if self._bar is not None else 0

    def update_to(self, step: int) -> None:
        """Move the bar to ``step`` (env steps so far)."""
        if self._bar is not None and step != self._bar.n:
            self._bar.update(int(step) - self._bar.n)

    def rewind(self, step: int) -> None:
        """Show ``step`` as the starting point (when resuming), without counting
        the steps before it in the rate."""
        self._warmup.reset()
        self._restart_rate(step)

    def _restart_rate(self, step: int) -> None:
        """Show ``step``, with the rate counted from it on."""
        if self._bar is None:
            return
        self._bar.reset()
        self._bar.initial = self._bar.n = self._bar.last_print_n = int(step)
        self._bar.refresh()

    def write(self, text: str, stream: TextIO | None = None) -> None:
        """Print ``text`` (plus a newline) to ``stream`` without breaking the bar.

        While the bar is shown, tqdm clears it, prints, and redraws it below;
        otherwise the text is written as is. ``stream`` defaults to
        ``sys.stdout`` (looked up at each call).
        """
        stream = stream if stream is not None else sys.stdout
        if self._bar is not None and not self.closed:
            self._bar.write(text, file=stream)
        else:
            stream.write(text + "\n")
        stream.flush()

    def set_metrics(self, metrics: Mapping[str, float]) -> None:
        """Show the ``postfix`` metrics found in ``metrics`` next to the bar."""
        if self._bar is None:
            return
        changed = False
        for label, key in self.postfix.items():
            if key in metrics:
                self._values[label] = format_value(to_scalar(key, metrics[key]))
                changed = True
        if changed:
            self._bar.set_postfix(self._values, refresh=True)

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Move to ``step`` and show the chosen metrics.

        A call in a warm-up (:class:`~parllel.logging.base.WarmupWatch`: no
        update since the previous call) restarts the rate from ``step``, so
        the remaining time follows the rate of training, not of collecting
        alone.
        """
        if self._warmup.check(metrics):
            self._restart_rate(step)
        else:
            self.update_to(step)
        self.set_metrics(metrics)

    def close(self) -> None:
        """Finish the bar (leaves its last state on screen)."""
        if self._bar is not None and not self.closed:
            self._bar.close()
        super().close()
