"""Episode statistics of a vector env's envs, as TrajInfos.

The same numbers as :class:`parllel.cages.EnvGroup` records: length, return
and discounted return per episode (float64 sums in step order, so they equal
a serial cage's bit for bit), kept in arrays over envs and copied into the
episode's :class:`~parllel.cages.TrajInfo` when it ends. A ``traj_info_type``
that overrides :meth:`TrajInfo.step` is called for every env and step
instead, with that env's observation, action, reward, flags and info.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from parllel.cages.traj_info import TrajInfo
from parllel.errors import EnvError
from parllel.interop.vector_spaces import ObservationWriter


class EpisodeRecorder:
    """One running episode per env of a vector env.

    Args:
        env_indices: global index of each env (``TrajInfo.env_index``).
        traj_info_type: TrajInfo class (or factory) used per episode.
        traj_info_kwargs: keyword arguments for it (e.g. ``discount``).
    """

    def __init__(
        self,
        env_indices: Sequence[int],
        traj_info_type: Callable[..., TrajInfo],
        traj_info_kwargs: dict[str, Any],
    ) -> None:
        self.env_indices = tuple(env_indices)
        self.traj_info_type = traj_info_type
        self.traj_info_kwargs = traj_info_kwargs
        n = len(self.env_indices)
        self.trajs = [self._new_traj(i) for i in range(n)]
        #: True if TrajInfo.step is the default (statistics kept in arrays here)
        self.plain = getattr(traj_info_type, "step", None) is TrajInfo.step
        self._gamma = self.trajs[0].discount
        self._lengths = np.zeros(n, np.int64)
        self._returns = np.zeros(n, np.float64)
        self._discounted = np.zeros(n, np.float64)
        self._discounts = np.ones(n, np.float64)

    def _new_traj(self, i: int) -> TrajInfo:
        return self.traj_info_type(
            env_index=self.env_indices[i], **self.traj_info_kwargs
        )

    def start(self, i: int, reset_info: dict[str, Any] | None = None) -> None:
        """Begin env ``i``'s next episode (its reset returned ``reset_info``)."""
        self.trajs[i] = traj = self._new_traj(i)
        if reset_info:
            traj.reset_info = reset_info
        self._lengths[i] = 0
        self._returns[i] = 0.0
        self._discounted[i] = 0.0
        self._discounts[i] = 1.0

    def step(self, rewards: np.ndarray) -> None:
        """Account for one step of every env (default statistics)."""
        self._lengths += 1
        self._returns += rewards
        self._discounted += self._discounts * rewards
        self._discounts *= self._gamma

    def step_each(
        self,
        observations: Sequence[Any],
        actions: Sequence[Any],
        rewards: Sequence[float],
        terminated: Sequence[bool],
        truncated: Sequence[bool],
        infos: Sequence[dict[str, Any]],
    ) -> None:
        """Call every env's ``TrajInfo.step`` (a traj_info_type that overrides it)."""
        for traj, *step in zip(
            self.trajs, observations, actions, rewards, terminated, truncated, infos
        ):
            traj.step(*step)

    def finish(
        self, i: int, terminated: bool, truncated: bool, info: dict[str, Any]
    ) -> TrajInfo:
        """Close env ``i``'s episode and return its TrajInfo.

        ``info``: the last step's info entries that no env-info slot stored.
        The next episode starts with :meth:`start`.
        """
        traj = self.trajs[i]
        if self.plain:
            traj.length = int(self._lengths[i])
            traj.return_ = float(self._returns[i])
            traj.discounted_return = float(self._discounted[i])
            traj._current_discount = float(self._discounts[i])
        traj.finish(terminated, truncated, info)
        return traj


def final_observations(
    mode: AutoresetMode,
    observations: ObservationWriter,
    observation: Any,
    infos: dict[str, Any],
    ended: list[int],
    name: str,
    env_offset: int,
) -> dict[int, Any]:
    """The last observation of each env in ``ended`` (by env) after a vector step.

    ``SAME_STEP``: from ``infos["final_obs"]``; else the step's observation
    rows (copies: a vector env with ``copy=False`` reuses the array at its
    reset).

    Raises:
        EnvError: ``SAME_STEP`` without a ``final_obs`` for an ended env
            (``name`` names the vector env).
    """
    if not ended:
        return {}
    if mode is not AutoresetMode.SAME_STEP:
        return {i: copy.deepcopy(observations.row(observation, i)) for i in ended}
    final = infos.get("final_obs")
    mask = infos.get("_final_obs")
    missing = [i for i in ended if final is None or (mask is not None and not mask[i])]
    if final is None or missing:
        raise EnvError(
            f"{name} ended the episodes of envs "
            f"{[env_offset + i for i in missing]} in autoreset mode "
            "SAME_STEP but gave no info['final_obs'] for them"
        )
    return {i: final[i] for i in ended}
