"""MultiAgentTrajInfo: per-agent returns and lengths of an episode."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from parllel import fields
from parllel.cages import TrajInfo


@dataclasses.dataclass
class MultiAgentTrajInfo(TrajInfo):
    """A :class:`~parllel.cages.TrajInfo` that also sums each agent's rewards.

    Reads the ``agent_reward`` and ``agent_mask`` info keys that the
    multi-agent adapters write every step. ``return_`` stays the team
    return (the sum over agents), so the usual episode statistics keep
    working. Pass it to a cage as ``traj_info_type``.

    Attributes:
        agent_returns: float64 ``[A]``, each agent's undiscounted return.
        agent_lengths: int64 ``[A]``, the steps at which each agent acted.

    Example:
        >>> cage = SerialCage(factory, n_envs=4, traj_info_type=MultiAgentTrajInfo)
        >>> traj_infos[0].agent_returns, traj_infos[0].to_dict()["return_1"]
    """

    agent_returns: np.ndarray = dataclasses.field(
        default_factory=lambda: np.zeros(0, np.float64)
    )
    agent_lengths: np.ndarray = dataclasses.field(
        default_factory=lambda: np.zeros(0, np.int64)
    )

    def step(
        self,
        observation: Any,
        action: Any,
        reward: float,
        terminated: bool,
        truncated: bool,
        env_info: dict[str, Any],
    ) -> None:
        """Account for one env step, per agent too."""
        super().step(observation, action, reward, terminated, truncated, env_info)
        agent_reward = np.asarray(env_info[fields.AGENT_REWARD])
        if len(self.agent_returns) != len(agent_reward):
            self.agent_returns = np.zeros(len(agent_reward), np.float64)
            self.agent_lengths = np.zeros(len(agent_reward), np.int64)
        self.agent_returns += agent_reward
        self.agent_lengths += np.asarray(env_info[fields.AGENT_MASK], np.bool_)

    def to_dict(self) -> dict[str, Any]:
        """The public fields; per agent ``i`` also ``return_<i>`` and ``length_<i>``.

        ``agent_returns`` and ``agent_lengths`` become lists.
        """
        data = super().to_dict()
        data["agent_returns"] = [float(value) for value in self.agent_returns]
        data["agent_lengths"] = [int(value) for value in self.agent_lengths]
        for i, value in enumerate(self.agent_returns):
            data[f"return_{i}"] = float(value)
        for i, value in enumerate(self.agent_lengths):
            data[f"length_{i}"] = int(value)
        return data
