"""VectorEnvCage: any gymnasium vector env as a parllel cage.

gymnasium's rules it adapts (which vector envs it can step, how their resets
take seeds, the probe step, where an ended episode's last observation is)
are :mod:`parllel.interop.vector_env_rules`'.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from time import perf_counter
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode

from parllel import fields
from parllel.cages import CageOptions, EnvSpaces, TrajInfo
from parllel.cages.cage import ResetRequest
from parllel.cages.cage_checks import raise_closed_slot
from parllel.cages.env_info import KeptInfos
from parllel.cages.probe import probe_env, spaces_example, step_example
from parllel.interop.batched_cage import (
    BatchedEnvCage,
    StepResult,
    write_final_observations,
    write_flags,
)
from parllel.interop.batched_infos import (
    FINAL_KEYS,
    StepInfos,
    info_row,
    write_info_slots,
)
from parllel.interop.vector_env_access import (
    apply_envs,
    call_envs,
    set_envs_attr,
    vector_env_name,
)
from parllel.interop.vector_env_rules import (
    VectorSeeds,
    autoreset_mode,
    check_vector_env,
    final_observations,
    probe_actions,
    probe_factory,
)

__all__ = ["VectorEnvCage"]


class VectorEnvCage(BatchedEnvCage):
    """A gymnasium vector env (``SyncVectorEnv``, ``AsyncVectorEnv``, ...) as a parllel cage.

    The vector env must autoreset in ``SAME_STEP`` or ``DISABLED`` mode (not
    gymnasium's default ``NEXT_STEP``); the cage owns it and closes it. For the
    same env factory, seed and actions its batches equal a
    :class:`~parllel.cages.SerialCage`'s bit for bit. docs/interop.md ("Any
    gymnasium vector env as a cage") says what it does with autoreset, seeds,
    the probe step, infos, resets and env access.

    Example:
        >>> venv = gym.vector.SyncVectorEnv(
        ...     [lambda: gym.make("CartPole-v1")] * 4,
        ...     autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
        ... )
        >>> cage = VectorEnvCage(venv, options=CageOptions(seed=0))
        >>> cage.n_envs, cage.example[fields.OBSERVATION].shape
        (4, (4,))
    """

    batched_env = "a gymnasium vector env"

    def __init__(
        self,
        vector_env: gym.vector.VectorEnv,
        *,
        options: CageOptions = CageOptions(),
    ) -> None:
        check_vector_env(vector_env)
        super().__init__(vector_env.num_envs, vector_env_name(vector_env), options)
        self.autoreset_mode = autoreset_mode(vector_env)
        self.vector_env = vector_env
        spaces = EnvSpaces(
            vector_env.single_observation_space,
            vector_env.single_action_space,
            self._name,
        )
        self._use_spaces(spaces, vector_env.observation_space, vector_env.action_space)
        self._seeds = VectorSeeds(self.env_seeds, self.n_envs)
        # AsyncVectorEnv steps in its workers between step_async and await_step
        self._async_env = vector_env if isinstance(vector_env, AsyncVectorEnv) else None
        example = self._probe(spaces) if options.probe else spaces_example(spaces)
        self._finish_init(spaces, example)

    # -- talking to the vector env ----------------------------------------------
    def _reset_vector(
        self,
        mask: np.ndarray,
        what: str,
        seeds: dict[int, int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict]:
        """Reset the envs in ``mask`` (all: a plain ``reset``); observations, infos."""
        partial_first = not self._seeds.reset_once and not mask.all()
        seed, mask = self._seeds.for_reset(mask, seeds)
        if partial_first:
            what = f"{what} (a first reset of a vector env resets all its envs)"
        if mask.all():
            return self._env_call(
                what, self.vector_env.reset, seed=seed, options=options
            )
        # a fresh dict: gymnasium's vector envs pop the reset_mask from it
        partial = {**(options or {}), "reset_mask": mask.copy()}
        return self._env_call(
            f"{what} of some envs (reset(options={{'reset_mask': ...}}), which "
            "partial resets need; gymnasium's SyncVectorEnv and AsyncVectorEnv "
            "take it)",
            self.vector_env.reset,
            seed=seed,
            options=partial,
        )

    def _probe(self, spaces: EnvSpaces) -> dict[str, Any]:
        """Example values of env 0: from a probe env if there is a factory for one.

        The probe env (:func:`probe_factory`) is reset with env 0's seed,
        stepped once and closed.
        """
        seed = None if self.env_seeds is None else int(self.env_seeds[0])
        factory = probe_factory(self.vector_env)
        if factory is None:
            return self._probe_vector_env(seed)
        envs = getattr(self.vector_env, "envs", ())
        return probe_env(factory, {}, self.env_offset, seed, spaces, envs)

    def _probe_vector_env(self, seed: int | None) -> dict[str, Any]:
        """Reset (seeded) and step every env of the vector env once: env 0's example.

        The first :meth:`reset` seeds the envs again, so only an env whose
        state ``reset(seed=...)`` does not fully determine keeps a trace.
        """
        venv = self.vector_env
        self._reset_vector(self._everyone, "its probe reset")
        actions, action_0 = probe_actions(venv.action_space, seed)
        observation, reward, terminated, truncated, infos = self._env_call(
            "its probe step", venv.step, actions
        )
        done = np.asarray(terminated, bool) | np.asarray(truncated, bool)
        if done[0]:  # the episode's last observation, as a serial cage's probe
            observation_0 = self._final_observations(observation, infos, [0])[0]
        else:
            observation_0 = self._observations.row(observation, 0)
        info_0 = StepInfos(infos, done, self.autoreset_mode, self.n_envs).row(0)
        self._seeds.restart()
        self._started[:] = False
        return step_example(
            copy.deepcopy(observation_0),
            action_0,
            reward[0],
            terminated[0],
            truncated[0],
            info_0,
        )

    # -- stepping ---------------------------------------------------------------
    def _send(self, actions: Any) -> None:
        if self._async_env is not None:
            self._env_call("step_async", self._async_env.step_async, actions)

    def _receive(self, actions: Any) -> StepResult:
        if self._async_env is not None:
            return StepResult(*self._env_call("step", self._async_env.step_wait))
        start = perf_counter()  # stepped here, in this process
        result = self._env_call("step", self.vector_env.step, actions)
        self.local_step_seconds += perf_counter() - start
        return StepResult(*result)

    def _write_step(self, out: Any, actions: Any, step: StepResult) -> list[TrajInfo]:
        """Copy one step's results into ``out``; auto-reset finished envs."""
        observation, reward, terminated, truncated, infos = step
        reward = np.asarray(reward, np.float64)
        terminated, truncated, done, ended = write_flags(
            out, reward, terminated, truncated
        )
        # SAME_STEP moves a finished env's step info to final_info
        step_infos = StepInfos(infos, done, self.autoreset_mode, self.n_envs)
        info_items, stored_keys = self._info_slots.get(out.get(fields.ENV_INFO))
        if info_items:
            write_info_slots(
                info_items, step_infos.sources, self.n_envs, self.env_offset
            )
        out_observation = out[fields.OBSERVATION]
        self._observations.write(out_observation, observation)
        final_observations = {}
        final_slot = out.get(fields.FINAL_OBSERVATION)
        if ended and (final_slot is not None or not self._episodes.plain):
            final_observations = self._final_observations(observation, infos, ended)
        write_final_observations(out, ended, final_observations.__getitem__)

        def rows() -> list[Any]:  # the episodes' last observations where they ended
            every_row = self._observations.rows(observation)
            for i, final in final_observations.items():
                every_row[i] = final
            return every_row

        completed = self._record_step(
            rows, actions, reward, terminated, truncated, step_infos.row,
            stored_keys, ended,
        )  # fmt: skip
        if not ended:
            return completed
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            reset_infos = infos
        else:  # DISABLED: the cage resets the finished envs itself
            reset_observation, reset_infos = self._reset_vector(done, "auto-reset")
            self._observations.write_rows(out_observation, reset_observation, ended)
        n = self.n_envs
        rows_infos = [info_row(reset_infos, i, n, FINAL_KEYS) for i in ended]
        self._start_episodes(ended, rows_infos)
        return completed

    def _final_observations(
        self, observation: Any, infos: dict[str, Any], ended: list[int]
    ) -> dict[int, Any]:
        """The last observation of each env in ``ended``, by env."""
        return final_observations(
            self.autoreset_mode, self._observations, observation, infos, ended,
            f"the vector env ({self._name})", self.env_offset,
        )  # fmt: skip

    # -- resetting --------------------------------------------------------------
    def _await_reset(self, request: ResetRequest) -> None:
        out_observation, env_indices, seeds, options = request
        mask = self._everyone.copy()
        if env_indices is not None:
            mask[:] = False
            mask[env_indices] = True
        if not mask.any():
            return
        observation, infos = self._reset_vector(mask, "reset", seeds, options)
        index = np.flatnonzero(mask).tolist()
        try:
            if mask.all():
                self._observations.write(out_observation, observation)
            else:
                self._observations.write_rows(out_observation, observation, index)
        except Exception as exc:
            raise_closed_slot({fields.OBSERVATION: out_observation}, exc)
        if self.keep_infos:
            self._last_infos = KeptInfos({}, {})
        self._start_episodes(index, [info_row(infos, i, self.n_envs) for i in index])

    # -- env access -------------------------------------------------------------
    def _call(
        self, name: str, args: tuple, kwargs: dict, indices: list[int]
    ) -> list[Any]:
        return call_envs(
            self.vector_env, name, args, kwargs, indices, self.env_offset, self._name
        )

    def _apply(
        self,
        function: Callable[..., Any],
        args: tuple,
        kwargs: dict,
        indices: list[int],
    ) -> list[Any]:
        return apply_envs(
            self.vector_env, function, args, kwargs, indices, self.env_offset
        )

    def _set_attr(self, name: str, values: list[Any], indices: list[int]) -> None:
        set_envs_attr(
            self.vector_env, name, values, indices, self.env_offset, self._name
        )

    # -- lifetime ---------------------------------------------------------------
    def _close(self) -> None:
        try:
            self.vector_env.close()
        except Exception:
            # a broken vector env (e.g. a dead worker): force its processes down
            with contextlib.suppress(Exception):
                self.vector_env.close(terminate=True)
