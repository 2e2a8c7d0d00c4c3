"""Per-episode statistics handed back by cages when episodes complete."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class TrajInfo:
    """Statistics of one episode (trajectory), filled while it runs.

    The cage calls :meth:`step` after every env step and :meth:`finish` when the
    episode ends. To record more, subclass, extend :meth:`step` and pass the
    subclass as ``traj_info_type``; instances must pickle (see docs/cages.md).

    Attributes:
        env_index: global index of the env that ran the episode.
        return_: undiscounted sum of rewards.
        truncated: the episode was cut (time limit, or its worker was lost).
        lost: the episode was cut because its worker process died.
        partial: the game goes on after this episode (a life lost); statistics
            skip it.
        extra: env-info entries of the last step that no slot stored.
        reset_info: the info dict of the reset that started the episode.

    Example:
        >>> class LivesTrajInfo(TrajInfo):
        ...     def step(self, observation, action, reward, terminated, truncated, env_info):
        ...         super().step(observation, action, reward, terminated, truncated, env_info)
        ...         self.extra["lives"] = env_info.get("lives")
    """

    env_index: int = -1
    discount: float = 0.99
    length: int = 0
    return_: float = 0.0
    discounted_return: float = 0.0
    terminated: bool = False
    truncated: bool = False
    lost: bool = False
    partial: bool = False
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    reset_info: dict[str, Any] = dataclasses.field(default_factory=dict)
    _current_discount: float = dataclasses.field(default=1.0, repr=False)

    def step(
        self,
        observation: Any,
        action: Any,
        reward: float,
        terminated: bool,
        truncated: bool,
        env_info: dict[str, Any],
    ) -> None:
        """Account for one env step."""
        self.length += 1
        reward = float(reward)  # numpy 2 keeps float + np.float32 in float32
        self.return_ += reward
        self.discounted_return += self._current_discount * reward
        self._current_discount *= self.discount

    def finish(
        self, terminated: bool, truncated: bool, env_info: dict[str, Any]
    ) -> None:
        """Close the episode.

        ``env_info`` holds the entries of the last step's info dict that no
        env-info slot stored (all of them if the cage had no such slots); the
        default keeps them in :attr:`extra`. Extend :meth:`step` to see every
        entry of every step.
        """
        self.terminated = bool(terminated)
        self.truncated = bool(truncated)
        for key, value in env_info.items():
            self.extra.setdefault(key, value)

    def to_dict(self) -> dict[str, Any]:
        """The public fields as a dict (``extra`` entries merged in, ``reset_info`` nested)."""
        data = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if not f.name.startswith("_") and f.name != "extra"
        }
        data.update(self.extra)
        return data
