"""How many gradient updates to run for the environment steps just collected."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from parllel.errors import ConfigError

__all__ = ["ReplayRatio"]


class ReplayRatio:
    """Turn "updates per environment step" into whole updates per batch.

    The fractional remainder carries over, so over many batches the number
    of updates is ``updates_per_step * steps`` to within one.

    Example:
        >>> ratio = ReplayRatio(0.25)
        >>> [ratio.updates(6) for _ in range(4)]   # 1.5 per batch
        [1, 2, 1, 2]

    Args:
        updates_per_step: gradient updates per environment step (> 0).
    """

    def __init__(self, updates_per_step: float) -> None:
        if not (math.isfinite(updates_per_step) and updates_per_step > 0):
            raise ConfigError(
                f"updates_per_step must be positive and finite; got {updates_per_step}"
            )
        self.updates_per_step = float(updates_per_step)
        self._carry = 0.0

    def updates(self, new_steps: int) -> int:
        """Updates owed for ``new_steps`` environment steps (over all envs)."""
        if new_steps < 0:
            raise ConfigError(f"new_steps must be >= 0; got {new_steps}")
        owed = self._carry + self.updates_per_step * new_steps
        whole = int(math.floor(owed + 1e-9))
        self._carry = owed - whole
        return whole

    def state_dict(self) -> dict[str, Any]:
        """The fractional carry."""
        return {"carry": self._carry}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self._carry = float(state["carry"])
