"""BatchedEnvCage: what the cages over one batched env share.

:class:`~parllel.interop.VectorEnvCage` (a gymnasium vector env) and
:class:`~parllel.interop.EnvPoolCage` (an EnvPool) step every env at once in
this process and copy the batch into the slots. This base holds their
common state (episode recorder, info slot tables, which envs were reset) and
the parts of a step and a reset that do not depend on the batched env: the
reward and flags (:func:`write_flags`), final observations
(:func:`write_final_observations`) and episode statistics
(:class:`EpisodeRecorder`, the same numbers a serial cage records).
"""

from __future__ import annotations

import traceback
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
from gymnasium import spaces as gym_spaces
from gymnasium.vector.utils import iterate

from parllel import fields
from parllel.cages import Cage, CageOptions, EnvSpaces, TrajInfo
from parllel.cages.cage_checks import raise_closed_slot
from parllel.cages.env_info import InfoSlotTables, KeptInfos
from parllel.errors import (
    CageStateError,
    ConfigError,
    EnvError,
    ParllelError,
)
from parllel.interop.batching import ObservationWriter, vector_actions

__all__ = [
    "BatchedEnvCage",
    "EpisodeRecorder",
    "StepResult",
    "vector_error",
    "write_final_observations",
    "write_flags",
]


def vector_error(name: str, what: str, exc: Exception) -> EnvError:
    """The :class:`EnvError` for an exception the vector env ``name`` raised in ``what``."""
    return EnvError(
        f"the vector env ({name}) raised {type(exc).__name__} in {what}: {exc}",
        worker_traceback=traceback.format_exc(),
    )


def _refuse_unstarted(started: np.ndarray, env_offset: int) -> None:
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


def _non_empty(infos: dict[int, dict]) -> dict[int, dict]:
    """``infos`` without the envs whose info dict is empty."""
    return {i: info for i, info in infos.items() if info}


def _kept_step_infos(n_envs: int, info_of: Callable[[int], dict]) -> KeptInfos:
    """The non-empty step infos of ``n_envs`` envs, for ``Cage.last_infos``."""
    return KeptInfos(_non_empty({i: info_of(i) for i in range(n_envs)}), {})


def _finish_episodes(
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


class EpisodeRecorder:
    """One running episode per env of a batched env, recorded as a serial cage does.

    Length, return and discounted return are float64 sums in step order (so
    they equal a serial cage's bit for bit), copied into the episode's
    TrajInfo when it ends; a ``traj_info_type`` that overrides
    ``TrajInfo.step`` is called for every env and step instead.

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


class StepResult(NamedTuple):
    """One step of every env, batched (gymnasium's ``step()`` result)."""

    observation: Any
    reward: Any
    terminated: Any
    truncated: Any
    infos: dict[str, Any]


class BatchedEnvCage(Cage):
    """A cage over one env object that steps every env of the batch at once.

    Subclasses build the batched env, call :meth:`_use_spaces` and
    :meth:`~parllel.cages.Cage._finish_init`, and implement the hooks
    :meth:`_send` (hand over the batched actions), :meth:`_receive` (the
    step's results) and :meth:`_write_step` (copy them into the slots, with
    :meth:`_record_step` and :meth:`_start_episodes`).
    """

    needs_shared_memory = False

    #: what the subclass steps, for messages (e.g. "EnvPool")
    batched_env = "a batched env"

    def __init__(self, n_envs: int, name: str, options: CageOptions) -> None:
        super().__init__(None, n_envs, None, options)
        reset_mode = self.reset_mode
        if reset_mode != "auto":
            why = (
                "a finished env cannot idle until the sampler resets it"
                if reset_mode == "wait"
                else "samplers need 'auto', and the batched env already is one"
            )
            raise ConfigError(
                f"{type(self).__name__} cannot run reset_mode={reset_mode!r}: "
                f"{self.batched_env} steps every env at each step, so {why}. Use "
                "reset_mode='auto' (FeedForwardSampler, AlternatingSampler, "
                "EvalSampler, or RecurrentSampler without wait_reset)"
            )
        self._name = name
        self._episodes = EpisodeRecorder(
            self.env_indices, self.traj_info_type, self.traj_info_kwargs
        )
        self._info_slots = InfoSlotTables()
        self._started = np.zeros(self.n_envs, bool)  # reset at least once
        self._everyone = np.ones(self.n_envs, bool)

    def _use_spaces(
        self,
        spaces: EnvSpaces,
        batched_observation: gym_spaces.Space,
        batched_action: gym_spaces.Space,
    ) -> None:
        """Convert actions (clipped as the options say) and write observations
        for these (one env's) spaces."""
        self._batch_actions = vector_actions(spaces.action)
        if self.clip_actions and isinstance(spaces.action, gym_spaces.Box):
            low, high, batch = (
                spaces.action.low,
                spaces.action.high,
                self._batch_actions,
            )
            self._batch_actions = lambda views: np.clip(batch(views), low, high)
        self._observations = ObservationWriter(spaces.observation, batched_observation)
        self._batched_action_space = batched_action

    def _env_call(
        self, what: str, fn: Callable[..., Any], *args: Any, **kw: Any
    ) -> Any:
        """``fn(*args, **kw)``, an exception becoming :class:`EnvError` naming ``what``."""
        try:
            return fn(*args, **kw)
        except ParllelError:
            raise
        except Exception as exc:
            raise vector_error(self._name, what, exc) from exc

    # -- stepping -----------------------------------------------------------------
    def _send(self, actions: Any) -> None:
        """Hand the batched env its actions (or keep them for :meth:`_receive`)."""

    @abstractmethod
    def _receive(self, actions: Any) -> StepResult:
        """The step's results, by env."""

    @abstractmethod
    def _write_step(self, out: Any, actions: Any, step: StepResult) -> list[TrajInfo]:
        """Copy one step's results into ``out``; reset the envs that finished."""

    def _step_async(self, action: Any, out: Any) -> tuple[Any, Any]:
        _refuse_unstarted(self._started, self.env_offset)
        actions = self._batch_actions(action)
        self._send(actions)
        return (actions, out)

    def _await_step(self, pending: tuple[Any, Any]) -> list[TrajInfo]:
        actions, out = pending
        result = self._receive(actions)
        try:
            return self._write_step(out, actions, result)
        except EnvError:
            raise
        except Exception as exc:  # a closed buffer is not the env's fault
            raise_closed_slot(out, exc)

    def _record_step(
        self,
        rows: Callable[[], list[Any]],
        actions: Any,
        reward: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        info_of: Callable[[int], dict[str, Any]],
        stored_keys: Any,
        ended: list[int],
    ) -> list[TrajInfo]:
        """Record the step in the episodes (and the kept infos); finish ``ended``'s.

        ``rows()`` gives every env's observation (read only when TrajInfos
        look at observations), ``info_of(i)`` env ``i``'s info. Returns the
        finished episodes.
        """
        n = self.n_envs
        if self._episodes.plain:
            self._episodes.step(reward)
        else:
            self._episodes.step_each(
                rows(),
                list(iterate(self._batched_action_space, actions)),
                reward.tolist(),
                terminated.tolist(),
                truncated.tolist(),
                [info_of(i) for i in range(n)],
            )
        if self.keep_infos:
            self._last_infos = _kept_step_infos(n, info_of)
        if not ended:
            return []
        return _finish_episodes(
            self._episodes, ended, terminated, truncated, info_of, stored_keys
        )

    def _start_episodes(
        self, index: Sequence[int], reset_infos: Sequence[dict[str, Any]]
    ) -> None:
        """Start the next episode of the envs ``index`` (their reset infos in order)."""
        for i, reset_info in zip(index, reset_infos):
            self._started[i] = True
            self._episodes.start(i, reset_info)
            if self.keep_infos and reset_info:
                self._last_infos.reset[i] = reset_info

    def _waiting_envs(self) -> list[int]:
        return np.flatnonzero(~self._started).tolist()
