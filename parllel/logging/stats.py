"""Summaries of recent episodes for logging."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from parllel.validation import check_at_least

FIELDS = ("return_", "length", "discounted_return")
_NAMES = {
    "return_": "return",
    "length": "length",
    "discounted_return": "discounted_return",
}


def _field(traj_info: Any, name: str) -> float:
    if isinstance(traj_info, Mapping):
        return float(traj_info[name])
    return float(getattr(traj_info, name))


class EpisodeStats:
    """A window of the most recent episodes' returns and lengths.

    Feed it the :class:`~parllel.cages.TrajInfo` objects a sampler hands back
    (or dicts with the same keys); :meth:`metrics` summarizes the window as
    mean/std/min/max, ready for a logger. The window spans batches, so a
    batch in which no episode finished still reports the recent ones.

    Example:
        >>> stats = EpisodeStats(window=100, prefix="train/")
        >>> stats.extend(completed_traj_infos)
        >>> logger.log(step, {**stats.metrics(), "train/loss": loss})
        >>> # keys: train/return_mean, train/return_std, train/return_min,
        >>> # train/return_max, train/length_mean, ..., train/episodes

    Args:
        window: how many recent episodes to keep.
        prefix: prepended to every metric name.
    """

    def __init__(self, window: int = 100, prefix: str = "train/") -> None:
        check_at_least("EpisodeStats window", window)
        self.window = window
        self.prefix = prefix
        self.episodes = 0
        self._values: dict[str, deque[float]] = {
            name: deque(maxlen=window) for name in FIELDS
        }
        # the summaries, until an episode changes the window: a runner asks
        # every iteration (every env step off-policy), episodes end far less
        self._summary: dict[str, float] | None = None

    def __len__(self) -> int:
        return len(self._values["return_"])

    def add(self, traj_info: Any) -> None:
        """Record one finished episode (a ``TrajInfo`` or a mapping).

        A partial episode (``partial`` True: a life lost while the game goes
        on, see :class:`~parllel.envs.atari.GameTrajInfo`) is skipped.
        """
        if isinstance(traj_info, Mapping):
            partial = traj_info.get("partial", False)
        else:
            partial = getattr(traj_info, "partial", False)
        if partial:
            return
        for name in FIELDS:
            self._values[name].append(_field(traj_info, name))
        self.episodes += 1
        self._summary = None

    def extend(self, traj_infos: Iterable[Any]) -> None:
        """Record several finished episodes."""
        for traj_info in traj_infos:
            self.add(traj_info)

    def clear(self) -> None:
        """Forget the window (the total episode count is kept)."""
        for values in self._values.values():
            values.clear()
        self._summary = None

    def metrics(self) -> dict[str, float]:
        """Summaries of the window, plus ``{prefix}episodes`` (all-time count).

        Returns:
            ``{prefix}{return,length,discounted_return}_{mean,std,min,max}``;
            only the episode count while the window is empty.
        """
        if self._summary is None:
            self._summary = self._summarize()
        return dict(self._summary)

    def _summarize(self) -> dict[str, float]:
        out: dict[str, float] = {f"{self.prefix}episodes": self.episodes}
        if not len(self):
            return out
        for name in FIELDS:
            values = np.asarray(self._values[name], dtype=np.float64)
            base = f"{self.prefix}{_NAMES[name]}"
            out[f"{base}_mean"] = float(values.mean())
            out[f"{base}_std"] = float(values.std())
            out[f"{base}_min"] = float(values.min())
            out[f"{base}_max"] = float(values.max())
        return out

    def state_dict(self) -> dict[str, Any]:
        """The window and counter, for checkpoints."""
        return {
            "episodes": self.episodes,
            **{name: list(values) for name, values in self._values.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.episodes = int(state["episodes"])
        for name in FIELDS:
            self._values[name] = deque(
                (float(v) for v in state[name]), maxlen=self.window
            )
        self._summary = None
