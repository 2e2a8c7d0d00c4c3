"""VectorEnvCage: any gymnasium vector env as a parllel cage.

Besides the cage: the checks of what a cage can step (:func:`check_vector_env`,
:func:`autoreset_mode`), the seeds its resets hand the vector env
(:class:`VectorSeeds`), and its probe step, preferably from a separate env
built by ``env_fns[0]`` of a ``SyncVectorEnv`` / ``AsyncVectorEnv``
(:func:`probe_factory`), so the vector env sees nothing before the first reset.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Sequence
from time import perf_counter
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv
from gymnasium.vector.utils import iterate

from parllel import fields
from parllel.cages import CageOptions, EnvSpaces, TrajInfo
from parllel.cages.cage import ResetRequest
from parllel.cages.cage_checks import raise_closed_slot
from parllel.cages.env_info import KeptInfos
from parllel.cages.probe import probe_env, spaces_example, step_example
from parllel.errors import ConfigError, EnvError
from parllel.interop.batched_cage import (
    BatchedEnvCage,
    StepResult,
    write_final_observations,
    write_flags,
)
from parllel.interop.batching import (
    FINAL_KEYS,
    ObservationWriter,
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
from parllel.seeding import action_space_seed

__all__ = ["VectorEnvCage"]


_HOW_TO_BUILD = (
    "Build the vector env with autoreset mode SAME_STEP (or DISABLED), e.g. "
    "gym.make_vec(env_id, num_envs, vectorization_mode='sync', vector_kwargs="
    "{'autoreset_mode': gym.vector.AutoresetMode.SAME_STEP}) or "
    "gym.vector.SyncVectorEnv(env_fns, autoreset_mode="
    "gym.vector.AutoresetMode.SAME_STEP) (AsyncVectorEnv takes the same argument)"
)


def check_vector_env(vector_env: Any) -> None:
    """Refuse what is no open gymnasium vector env, or is an EnvPool.

    Raises:
        ConfigError: not a ``gymnasium.vector.VectorEnv``, or closed.
        ConfigError: an EnvPool (it has its own cage).
    """
    if not isinstance(vector_env, gym.vector.VectorEnv):
        raise ConfigError(
            f"VectorEnvCage needs a gymnasium.vector.VectorEnv, got "
            f"{type(vector_env).__name__}; for single envs use SerialCage or "
            "ProcessCage with an env factory"
        )
    if getattr(vector_env, "closed", False):
        raise ConfigError(f"the vector env {vector_env} is closed")
    if _is_envpool(vector_env):
        raise ConfigError(
            f"{type(vector_env).__name__} is an EnvPool, whose autoreset "
            "(NEXT_STEP), spaces, action dtype and seeds a VectorEnvCage "
            "cannot take: use parllel.interop.EnvPoolCage(pool), or "
            "make_envpool_cage(task_id, n_envs, options=CageOptions(seed=...))"
        )


def _is_envpool(vector_env: Any) -> bool:
    """True for an EnvPool (told by its classes' module, without importing it)."""
    return any(
        cls.__module__.split(".")[0] == "envpool" for cls in type(vector_env).__mro__
    )


def autoreset_mode(vector_env: gym.vector.VectorEnv) -> AutoresetMode:
    """The autoreset mode of ``vector_env``, if a cage can use it.

    Read from ``vector_env.metadata["autoreset_mode"]`` (an
    :class:`~gymnasium.vector.AutoresetMode` or its value, e.g.
    ``"SameStep"``).

    Raises:
        ConfigError: the mode is ``NEXT_STEP``, missing (gymnasium
            then assumes ``NEXT_STEP``) or unknown. In the step that ends an
            episode a cage must write both the episode's final observation
            and the next episode's first one; a ``NEXT_STEP`` vector env only
            resets the env during the following ``step()``, which steps every
            other env too. The message says how to build a usable vector env.
    """
    mode = getattr(vector_env, "metadata", {}).get("autoreset_mode")
    if mode is None:
        raise ConfigError(
            f"{vector_env} has no metadata['autoreset_mode'], so gymnasium assumes "
            "NEXT_STEP, which a cage cannot use (it needs the final and the reset "
            "observation in the step that ends an episode). If the vector env "
            "resets in the same step (SAME_STEP) or not at all (DISABLED), say so "
            "in its metadata['autoreset_mode']; else: " + _HOW_TO_BUILD
        )
    try:
        mode = mode if isinstance(mode, AutoresetMode) else AutoresetMode(mode)
    except ValueError:
        raise ConfigError(
            f"{vector_env} has metadata['autoreset_mode'] = {mode!r}, which is not "
            f"one of gymnasium's autoreset modes {[m.value for m in AutoresetMode]}"
        ) from None
    if mode is AutoresetMode.NEXT_STEP:
        raise ConfigError(
            f"{vector_env} uses autoreset mode NEXT_STEP: it resets a finished env "
            "only during the following step() (which steps every other env too), "
            "but a cage must write, in the step that ends an episode, both its "
            "final observation and the next episode's first observation. "
            + _HOW_TO_BUILD
        )
    return mode


class VectorSeeds:
    """Per-env seeds of a vector env's resets, as a serial cage seeds its envs.

    An env gets its seed from the reset's ``seeds`` if given there, else the
    cage's seed at its first reset, else none.

    Args:
        env_seeds: one seed per env, or None (unseeded).
        n_envs: number of envs.
    """

    def __init__(self, env_seeds: Sequence[int] | None, n_envs: int) -> None:
        self.env_seeds = env_seeds
        self.n_envs = n_envs
        self.needs_seed = np.full(n_envs, env_seeds is not None)
        self.reset_once = False  # the vector env was reset (all its envs)

    def restart(self) -> None:
        """Every env gets its own seed again at its next reset (after a probe)."""
        self.needs_seed[:] = self.env_seeds is not None

    def for_reset(
        self, mask: np.ndarray, seeds: dict[int, int | None] | None
    ) -> tuple[list[int | None] | None, np.ndarray]:
        """The seeds of a reset of the envs in ``mask``, and the envs to reset.

        gymnasium's vector envs reset some envs only after a full reset: a
        first reset of some envs resets all of them, the others with their
        own seed (which they get again at their own first reset).
        """
        first, self.reset_once = not self.reset_once, True
        per_env: list[int | None] = [None] * self.n_envs
        for i in np.flatnonzero(mask).tolist():
            seed = None if seeds is None else seeds.get(i)
            if seed is None and self.needs_seed[i] and self.env_seeds is not None:
                seed = int(self.env_seeds[i])
            per_env[i] = seed
        self.needs_seed &= ~mask
        if first and not mask.all():
            if self.env_seeds is not None:
                for i in np.flatnonzero(~mask).tolist():
                    per_env[i] = int(self.env_seeds[i])
            mask = np.ones(self.n_envs, bool)
        if all(seed is None for seed in per_env):
            return None, mask
        return per_env, mask


def probe_factory(vector_env: gym.vector.VectorEnv) -> Callable[[], Any] | None:
    """The function that built env 0 of a ``SyncVectorEnv`` / ``AsyncVectorEnv``.

    None for other vector envs (wrapped ones included: a vector wrapper may
    change what the envs return), which the cage probes themselves.
    """
    if not isinstance(vector_env, (SyncVectorEnv, AsyncVectorEnv)):
        return None
    env_fns = getattr(vector_env, "env_fns", None)
    return env_fns[0] if env_fns else None


def probe_actions(action_space: gym.Space, seed: int | None) -> tuple[Any, Any]:
    """Random batched actions for probing a vector env itself, and env 0's.

    Drawn from a copy of the batched ``action_space`` (seeded from ``seed``,
    env 0's, if given), so the vector env's own action space is left as it is.
    """
    space = copy.deepcopy(action_space)
    if seed is not None:
        space.seed(action_space_seed(seed))
    actions = space.sample()
    return actions, copy.deepcopy(next(iter(iterate(space, actions))))


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
