"""One batched step's results into a cage's slots: what both vector cages share.

:class:`~parllel.interop.VectorEnvCage` and :class:`~parllel.interop.EnvPoolCage`
get a step's results as arrays over envs; both write the reward and flags
(:func:`write_flags`), the final observations of the envs that finished
(:func:`write_final_observations`), keep the step's infos
(:func:`kept_step_infos`) and close the finished episodes
(:func:`finish_episodes`) the same way (their common base,
:class:`~parllel.interop.batched_cage.BatchedEnvCage`, calls the last two).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from parllel import fields
from parllel.cages.env_info import KeptInfos
from parllel.cages.traj_info import TrajInfo
from parllel.errors import CageStateError
from parllel.interop.vector_episodes import EpisodeRecorder


def refuse_unstarted(started: np.ndarray, env_offset: int) -> None:
    """Raise CageStateError if an env was never reset (``started`` over envs)."""
    if not started.all():
        first = int(np.flatnonzero(~started)[0])
        raise CageStateError(
            f"env {env_offset + first} was stepped before its first reset: "
            "call cage.reset(...) before stepping"
        )


def write_flags(
    out: Any, reward: Any, terminated: Any, truncated: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """Write reward and flags into the step slots ``out``.

    Returns ``terminated`` and ``truncated`` as bool arrays, ``done`` (either)
    and the indices of the envs whose episode ended.
    """
    terminated = np.asarray(terminated, bool)
    truncated = np.asarray(truncated, bool)
    done = terminated | truncated
    ended = np.flatnonzero(done).tolist()
    out[fields.REWARD][:] = reward
    out[fields.TERMINATED][:] = terminated
    out[fields.TRUNCATED][:] = truncated
    return terminated, truncated, done, ended


def write_final_observations(
    out: Any, ended: list[int], final_observation: Callable[[int], Any]
) -> None:
    """Write ``final_observation(i)`` of each ended env into the ``final_observation``
    slot of ``out``, if the sample tree has one."""
    out_final = out.get(fields.FINAL_OBSERVATION)
    if out_final is not None:
        for i in ended:
            out_final[i] = final_observation(i)


def non_empty(infos: dict[int, dict]) -> dict[int, dict]:
    """``infos`` without the envs whose info dict is empty."""
    return {i: info for i, info in infos.items() if info}


def kept_step_infos(n_envs: int, info_of: Callable[[int], dict]) -> KeptInfos:
    """The non-empty step infos of ``n_envs`` envs, for ``Cage.last_infos``."""
    return KeptInfos(non_empty({i: info_of(i) for i in range(n_envs)}), {})


def finish_episodes(
    episodes: EpisodeRecorder,
    ended: list[int],
    terminated: np.ndarray,
    truncated: np.ndarray,
    info_of: Callable[[int], dict],
    stored_keys: frozenset[str],
) -> list[TrajInfo]:
    """Close the episodes of the ``ended`` envs; their TrajInfos.

    Each gets its last step's info (``info_of(i)``) without the keys an
    env-info slot stored (``stored_keys``).
    """
    completed = []
    for i in ended:
        info = info_of(i)
        if stored_keys:
            info = {k: v for k, v in info.items() if k not in stored_keys}
        completed.append(
            episodes.finish(i, bool(terminated[i]), bool(truncated[i]), info)
        )
    return completed
