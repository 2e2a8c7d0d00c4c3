"""BatchedEnvCage: what the cages over one batched env share.

:class:`~parllel.interop.VectorEnvCage` (a gymnasium vector env) and
:class:`~parllel.interop.EnvPoolCage` (an EnvPool) step every env at once in
this process and copy the batch into the slots. This base holds their
common state (episode recorder, info slot tables, which envs were reset) and
the parts of a step and a reset that do not depend on the batched env.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
from gymnasium import spaces as gym_spaces
from gymnasium.vector.utils import iterate

from parllel.cages import Cage, CageOptions, EnvSpaces, TrajInfo
from parllel.cages.cage_checks import raise_closed_slot
from parllel.cages.env_info import InfoSlotTables
from parllel.errors import ConfigError, EnvError, ParllelError
from parllel.interop.vector_env_access import vector_error
from parllel.interop.vector_episodes import EpisodeRecorder
from parllel.interop.vector_spaces import ObservationWriter, vector_actions
from parllel.interop.vector_steps import (
    finish_episodes,
    kept_step_infos,
    refuse_unstarted,
)

__all__ = ["BatchedEnvCage", "StepResult"]


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
        refuse_unstarted(self._started, self.env_offset)
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
            self._last_infos = kept_step_infos(n, info_of)
        if not ended:
            return []
        return finish_episodes(
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
