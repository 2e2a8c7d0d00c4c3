"""EnvPoolCage: EnvPool's batched C++ envs as a parllel cage (the envpool extra).

:func:`make_envpool_cage` builds an EnvPool with parllel's seeds and wraps it.
EnvPool (``envpool.make_gymnasium(task_id, num_envs=..., ...)``) steps its
envs in C++ threads and speaks gymnasium's batched vector-env API, with its
own rules (sync mode only, seeds given once at construction, int32 discrete
actions, rows named by ``info["env_id"]``), which
:mod:`parllel.interop.envpool_rules` states and the cage adapts.
"""

from __future__ import annotations

from dataclasses import replace
from time import perf_counter
from typing import Any

import envpool
import numpy as np
from gymnasium.vector.utils import batch_space

from parllel import fields
from parllel.arrays import Array
from parllel.cages import CageOptions, EnvSpaces, TrajInfo
from parllel.cages.cage import ResetRequest
from parllel.cages.cage_checks import raise_closed_slot
from parllel.cages.env_info import KeptInfos
from parllel.cages.probe import spaces_example
from parllel.errors import ConfigError
from parllel.interop.batched_cage import (
    BatchedEnvCage,
    StepResult,
    write_final_observations,
    write_flags,
)
from parllel.interop.batched_infos import info_row, write_info_slots
from parllel.interop.envpool_rules import (
    check_pool,
    check_task_id,
    env_id_array,
    in_env_order,
    info_rows,
    native_action_space,
    pool_name,
    pool_seeds,
    probe_pool,
    without_routing,
)
from parllel.seeding import resolve_env_seeds
from parllel.tree import tree_map

__all__ = ["EnvPoolCage", "make_envpool_cage"]


class EnvPoolCage(BatchedEnvCage):
    """An EnvPool (``envpool.make_gymnasium(...)``) as a parllel cage.

    The pool must have the gymnasium API, be synchronous and have one player
    per env; the cage owns it and closes it. ``options.seed`` is None (record
    the pool's seeds) or the seed the pool was built with; resets cannot
    reseed. :func:`make_envpool_cage` builds the pool with parllel's seeds.
    docs/interop.md ("EnvPool") says how autoreset, seeds, actions, infos and
    env access work.

    Example:
        >>> pool = envpool.make_gymnasium("Pong-v5", num_envs=8, num_threads=2)
        >>> cage = EnvPoolCage(pool)  # or make_envpool_cage("Pong-v5", 8)
        >>> cage.spaces.action, cage.example[fields.OBSERVATION].shape
        (Discrete(6, dtype=int32), (4, 84, 84))
    """

    batched_env = "EnvPool"

    def __init__(
        self,
        pool: Any,
        *,
        options: CageOptions = CageOptions(),
    ) -> None:
        check_pool(pool)
        super().__init__(int(pool.config["num_envs"]), pool_name(pool), options)
        built = pool_seeds(pool)
        if self.env_seeds is not None and tuple(self.env_seeds) != built:
            raise ConfigError(
                f"seed={options.seed!r} gives the envs the seeds {list(self.env_seeds)[:4]}"
                f"..., but the EnvPool {self._name} was built with the seeds "
                f"{list(built)[:4]}... (env i: env_seed[i], else seed + i), and "
                "EnvPool seeds its envs only when it is built. Build the pool with "
                "parllel's seeds (make_envpool_cage(task_id, n_envs, options=CageOptions(seed=...)), "
                "or envpool.make_gymnasium(..., seed=list(Seeds.from_master("
                "master, n_envs).envs))), or pass no seed to record the pool's"
            )
        self.env_seeds = built
        self.pool = pool
        n = self.n_envs
        spaces = EnvSpaces(
            pool.observation_space, native_action_space(pool), self._name
        )
        self._use_spaces(
            spaces, batch_space(spaces.observation, n), batch_space(spaces.action, n)
        )
        self._all_ids = env_id_array(range(n))
        example = (
            probe_pool(pool, spaces, built[0], self.env_offset)
            if options.probe
            else spaces_example(spaces)
        )
        self._finish_init(spaces, example)

    # -- talking to EnvPool -------------------------------------------------------
    def _reset_pool(self, env_ids: np.ndarray, what: str) -> tuple[Any, dict]:
        """Reset the envs ``env_ids`` (all: ``None``); observations, infos in that order."""
        everyone = len(env_ids) == self.n_envs
        observation, infos = self._env_call(
            what, self.pool.reset, None if everyone else env_ids
        )
        return in_env_order(observation, infos, env_ids)

    # -- stepping -----------------------------------------------------------------
    def _send(self, actions: Any) -> None:
        start = perf_counter()
        self._env_call("step (send)", self.pool.send, actions)
        self.local_step_seconds += perf_counter() - start

    def _receive(self, actions: Any) -> StepResult:
        observation, reward, terminated, truncated, infos = self._env_call(
            "step", self.pool.recv
        )
        (observation, reward, terminated, truncated), infos = in_env_order(
            (observation, reward, terminated, truncated), infos, self._all_ids
        )
        return StepResult(observation, reward, terminated, truncated, infos)

    def _await_step(self, pending: tuple[Any, Any]) -> list[TrajInfo]:
        start = perf_counter()
        try:
            return super()._await_step(pending)
        finally:
            # EnvPool's threads step in this process, as a serial cage's envs
            self.local_step_seconds += perf_counter() - start

    def _write_step(self, out: Any, actions: Any, step: StepResult) -> list[TrajInfo]:
        """Copy one step's results into ``out``; reset the envs that finished."""
        observation, reward, terminated, truncated, infos = step
        infos = without_routing(infos)
        terminated, truncated, _, ended = write_flags(
            out, reward, terminated, truncated
        )
        info_items, stored_keys = self._info_slots.get(out.get(fields.ENV_INFO))
        if info_items:
            self._write_infos(info_items, infos)
        out_observation = out[fields.OBSERVATION]
        self._observations.write(out_observation, observation)
        write_final_observations(
            out, ended, lambda i: self._observations.row(observation, i)
        )
        n = self.n_envs

        def info_of(i: int) -> dict[str, Any]:
            return info_row(infos, i, n)

        completed = self._record_step(
            lambda: self._observations.rows(observation), actions,
            np.asarray(reward, np.float64), terminated, truncated, info_of,
            stored_keys, ended,
        )  # fmt: skip
        if not ended:
            return completed
        # EnvPool resets a finished env during its next step (NEXT_STEP): that
        # step, now, for the finished envs alone (a forced pool.reset would
        # differ: e.g. Atari's episodic life restarts the game there)
        ids = env_id_array(ended)
        self._env_call(
            "its autoreset step (send)",
            self.pool.send,
            self._idle_actions(len(ids)),
            ids,
        )
        reset_observation, _, _, _, reset_infos = self._env_call(
            "its autoreset step", self.pool.recv
        )
        reset_observation, reset_infos = in_env_order(
            reset_observation, reset_infos, ids
        )
        self._write_reset_rows(out_observation, reset_observation, ended)
        self._start_episodes(ended, info_rows(without_routing(reset_infos), len(ended)))
        return completed

    def _idle_actions(self, k: int) -> Any:
        """Actions for ``k`` envs in EnvPool's autoreset step (which ignores them)."""
        return tree_map(
            lambda leaf: np.zeros((k, *np.shape(leaf)), np.asarray(leaf).dtype),
            self.example[fields.ACTION],
        )

    def _write_infos(self, info_items: list[tuple], infos: dict[str, Any]) -> None:
        """Write the ``env_info`` slots (EnvPool gives every key for every env).

        A key whose array's dtype the slot stores exactly (EnvPool's int32,
        uint8 and float32 infos in float64 slots) is copied at once; others
        take the checked path of every cage (:func:`write_info_slots`).
        """
        checked = []
        for item in info_items:
            key, view, exact, _ = item
            values = infos.get(key)
            target = view.to_ndarray() if isinstance(view, Array) else view
            if (
                isinstance(values, np.ndarray)
                and values.dtype.type in exact
                and values.shape == target.shape
            ):
                target[...] = values
            else:
                checked.append(item)
        if checked:
            write_info_slots(
                checked, [(infos, self._everyone)], self.n_envs, self.env_offset
            )

    def _write_reset_rows(
        self, out_observation: Any, reset_observation: Any, index: list[int]
    ) -> None:
        """Write the reset observations (row ``j`` for env ``index[j]``) into ``out``."""
        for j, i in enumerate(index):
            out_observation[i] = self._observations.row(reset_observation, j)

    # -- resetting ----------------------------------------------------------------
    def _reset_async(self, request: ResetRequest) -> ResetRequest:
        _, _, seeds, options = request
        if seeds is not None and any(s is not None for s in seeds.values()):
            raise ConfigError(
                f"EnvPool seeds its envs once, when it is built ({self._name}: "
                f"{list(self.env_seeds or ())[:4]}...), and cannot reseed them at a "
                "reset: reset without seeds, or build the pool with the seeds "
                "(make_envpool_cage(task_id, n_envs, options=CageOptions(seed=...)))"
            )
        if options:
            raise ConfigError(
                f"EnvPool resets take no options, got {options!r}: set what the "
                "options would when building the pool (envpool.make_gymnasium"
                "(task_id, ...))"
            )
        return request

    def _await_reset(self, request: ResetRequest) -> None:
        out_observation, env_indices, _, _ = request
        index = list(range(self.n_envs)) if env_indices is None else env_indices
        if not index:
            return
        observation, infos = self._reset_pool(env_id_array(index), "reset")
        try:
            if len(index) == self.n_envs and index == list(range(self.n_envs)):
                self._observations.write(out_observation, observation)
            else:
                self._write_reset_rows(out_observation, observation, index)
        except Exception as exc:
            raise_closed_slot({fields.OBSERVATION: out_observation}, exc)
        if self.keep_infos:
            self._last_infos = KeptInfos({}, {})
        self._start_episodes(index, info_rows(without_routing(infos), len(index)))

    # -- env access ---------------------------------------------------------------
    def _call(
        self, name: str, args: tuple, kwargs: dict, indices: list[int]
    ) -> list[Any]:
        if name != "render" or args or kwargs:
            raise ConfigError(
                f"EnvPoolCage cannot call {name!r} on its envs: EnvPool's envs are "
                "C++ objects without Python attributes (only render() is "
                f"forwarded). Read the pool's settings from cage.pool.config"
            )
        frames = self._env_call("render", self.pool.render, env_id_array(indices))
        return list(frames)

    def _set_attr(self, name: str, values: list[Any], indices: list[int]) -> None:
        raise ConfigError(
            f"EnvPoolCage cannot set {name!r} on its envs: EnvPool's envs are C++ "
            "objects configured when the pool is built (envpool.make_gymnasium"
            "(task_id, ...) keyword arguments)"
        )

    # -- lifetime -----------------------------------------------------------------
    def _close(self) -> None:
        self.pool.close()


def make_envpool_cage(
    task_id: str,
    n_envs: int,
    *,
    options: CageOptions = CageOptions(),
    **envpool_kwargs: Any,
) -> EnvPoolCage:
    """Build an EnvPool of ``n_envs`` envs of ``task_id`` with parllel's seeds, as a cage.

    Each env gets the seed a parllel cage would give it
    (``Seeds.from_master(seed, ...).envs[env_offset + i]``, or ``seed[i]``
    for one seed per env, from ``options``; None: fresh seeds from the OS,
    recorded in :attr:`EnvPoolCage.env_seeds`), passed to EnvPool as one seed
    per env.

    Args:
        task_id: an EnvPool task id (``envpool.list_all_envs()``), e.g.
            ``"Pong-v5"``, ``"CartPole-v1"``, ``"HalfCheetah-v4"``.
        n_envs: number of envs (EnvPool's ``num_envs``; ``batch_size`` is
            the same).
        options: as for :class:`EnvPoolCage`.
        **envpool_kwargs: the rest of ``envpool.make_gymnasium``'s settings
            (``num_threads``, ``max_episode_steps``, ``stack_num``,
            ``episodic_life``, ...).

    Raises:
        ConfigError: ``task_id`` is not one of EnvPool's tasks (the message
            suggests the closest ones: EnvPool's Atari ids have no ``ALE/``
            prefix), or ``envpool_kwargs`` sets what the other arguments set
            (``num_envs``, ``batch_size``, ``seed``, ``env_seed``,
            ``env_type``).
    """
    check_task_id(task_id)
    taken = {"num_envs", "batch_size", "seed", "env_seed", "env_type"}
    clash = sorted(taken & set(envpool_kwargs))
    if clash:
        raise ConfigError(
            f"make_envpool_cage sets {clash} itself (n_envs=, seed=; the pool is "
            "synchronous and has the gymnasium API): leave them out of the "
            "EnvPool keyword arguments"
        )
    seed = options.seed
    if seed is None:
        seed = int(np.random.SeedSequence().entropy)  # type: ignore[arg-type]
    offset = options.env_offset
    env_seeds = resolve_env_seeds(seed, range(offset, offset + int(n_envs)))
    assert env_seeds is not None
    pool = envpool.make_gymnasium(
        task_id,
        num_envs=int(n_envs),
        batch_size=int(n_envs),
        seed=list(env_seeds),
        **envpool_kwargs,
    )
    try:
        return EnvPoolCage(pool, options=replace(options, seed=env_seeds))
    except BaseException:
        pool.close()
        raise
