"""EnvPoolCage: EnvPool's batched C++ envs as a parllel cage (the envpool extra).

:func:`make_envpool_cage` builds an EnvPool with parllel's seeds and wraps it.
EnvPool (``envpool.make_gymnasium(task_id, num_envs=..., ...)``) steps its
envs in C++ threads and speaks gymnasium's batched vector-env API, with its
own rules that the cage adapts, in the functions before the cage:

- :func:`check_pool`: only EnvPool's gymnasium API in sync mode (``batch_size
  == num_envs``) with one player per env.
- :func:`pool_seeds`: EnvPool seeds its envs once, when it is built: env
  ``i`` gets ``env_seed[i]`` if the pool was built with one seed per env
  (``seed=[...]``), else ``seed + i``.
- :func:`native_action_space`: the pool's action space with the dtype its C++
  side takes (``int32`` for discrete actions).
- :func:`probe_pool`: the example step, from a separate one-env pool built
  like env 0 of the pool (same config, env 0's seed), so the pool itself sees
  nothing before the cage's first reset.
- :func:`in_env_order`: a result's rows in env order (EnvPool says which env
  each row is in ``info["env_id"]``).
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Sequence
from dataclasses import replace
from time import perf_counter
from typing import Any

import envpool
import gymnasium as gym
import numpy as np
from envpool.python.envpool import EnvPoolMixin
from envpool.python.gymnasium_envpool import GymnasiumEnvPoolMixin
from gymnasium.vector.utils import batch_space

from parllel import fields
from parllel.arrays import Array
from parllel.cages import CageOptions, EnvSpaces, TrajInfo
from parllel.cages.cage import ResetRequest
from parllel.cages.cage_checks import raise_closed_slot
from parllel.cages.env_info import KeptInfos
from parllel.cages.probe import env_error, spaces_example, step_example
from parllel.errors import (
    ConfigError,
)
from parllel.interop.batched_cage import (
    BatchedEnvCage,
    StepResult,
    write_final_observations,
    write_flags,
)
from parllel.interop.batching import info_row, write_info_slots
from parllel.seeding import action_space_seed, resolve_env_seeds
from parllel.tree import tree_map

__all__ = ["EnvPoolCage", "make_envpool_cage"]


#: EnvPool's own info entries saying which env (and player) a row is: the
#: cage knows (TrajInfo.env_index), so they get no slot
ROUTING_KEYS = ("env_id", "players")


def pool_name(pool: Any) -> str:
    """A readable name: the pool's class and, for Atari, its game."""
    task = pool.config.get("task")
    name = type(pool).__name__
    return f"{name}({task!r})" if task else name


def check_pool(pool: Any) -> None:
    """Raise :class:`ConfigError` unless an EnvPoolCage can step ``pool``.

    It must be an EnvPool with the gymnasium API (``envpool.make_gymnasium``,
    or ``envpool.make(..., env_type="gymnasium")`` / ``"gym"``), open, in sync
    mode (``batch_size`` equal to ``num_envs``, EnvPool's default) and with
    one player per env.
    """
    if isinstance(pool, EnvPoolMixin) and not isinstance(pool, GymnasiumEnvPoolMixin):
        raise ConfigError(
            f"{type(pool).__name__} is an EnvPool with the dm_env API "
            "(env_type='dm'); EnvPoolCage needs EnvPool's gymnasium API: build it "
            "with envpool.make_gymnasium(task_id, ...) or envpool.make(task_id, "
            "env_type='gymnasium', ...)"
        )
    if not isinstance(pool, GymnasiumEnvPoolMixin):
        raise ConfigError(
            f"EnvPoolCage needs an EnvPool built by envpool.make_gymnasium(...), got "
            f"{type(pool).__name__}; for other gymnasium vector envs use "
            "VectorEnvCage, for env factories SerialCage or ProcessCage"
        )
    env: Any = pool  # an EnvPool: its config and mode come from its C++ side
    if getattr(env, "closed", False):
        raise ConfigError(f"the EnvPool {pool_name(env)} is closed")
    config = env.config
    if env.is_async:
        raise ConfigError(
            f"the EnvPool {pool_name(pool)} is asynchronous (batch_size="
            f"{config['batch_size']} < num_envs={config['num_envs']}): each step "
            "would return a different subset of envs, but a cage steps every env "
            "each step. Build it with batch_size=num_envs (EnvPool's default)"
        )
    if int(config.get("max_num_players", 1)) != 1:
        raise ConfigError(
            f"the EnvPool {pool_name(pool)} has max_num_players="
            f"{config['max_num_players']}; EnvPoolCage steps one player per env"
        )


def pool_seeds(pool: Any) -> tuple[int, ...]:
    """The seed each env of ``pool`` was built with (EnvPool seeds only then).

    ``env_seed[i]`` if the pool was built with one seed per env
    (``envpool.make_gymnasium(..., seed=[...])``), else ``seed + i``.
    """
    config = pool.config
    per_env = list(config.get("env_seed") or ())
    if per_env:
        return tuple(int(s) for s in per_env)
    return tuple(int(config["seed"]) + i for i in range(int(config["num_envs"])))


def native_action_space(pool: Any) -> gym.Space:
    """The pool's action space, with the dtype EnvPool's C++ side takes.

    EnvPool declares ``Discrete`` actions as int64 but takes int32 (and casts
    whatever it gets); declaring int32 makes samplers store the actions
    EnvPool steps with, with no cast per step. Other spaces are kept as they
    are.
    """
    space = pool.action_space
    spec = pool.spec.action_array_spec.get("action")
    if spec is None:
        return space
    dtype = np.dtype(spec.dtype)
    if isinstance(space, gym.spaces.Discrete) and space.dtype != dtype:
        return gym.spaces.Discrete(int(space.n), start=int(space.start), dtype=dtype)
    if isinstance(space, gym.spaces.MultiDiscrete) and space.dtype != dtype:
        return gym.spaces.MultiDiscrete(space.nvec, dtype=dtype, start=space.start)
    return space


def without_routing(infos: dict[str, Any]) -> dict[str, Any]:
    """``infos`` without EnvPool's :data:`ROUTING_KEYS`."""
    return {k: v for k, v in infos.items() if k not in ROUTING_KEYS}


def in_env_order(
    values: Any, infos: dict[str, Any], env_ids: np.ndarray
) -> tuple[Any, dict[str, Any]]:
    """``values`` (a tree of ``[n, ...]`` arrays) and ``infos``, rows in ``env_ids`` order.

    EnvPool names each row's env in ``infos["env_id"]``; in sync mode the rows
    come in the order the envs were sent, so this is a check that costs one
    comparison. Rows that came otherwise are put in order.
    """
    got = infos.get("env_id")
    if got is None or (got.shape == env_ids.shape and (got == env_ids).all()):
        return values, infos
    position = {int(e): j for j, e in enumerate(np.asarray(got).tolist())}
    order = np.asarray([position[int(e)] for e in env_ids.tolist()], dtype=np.intp)
    n = len(order)

    def take(leaf: Any) -> Any:
        if isinstance(leaf, np.ndarray) and leaf.ndim >= 1 and len(leaf) == n:
            return leaf[order]
        return leaf

    return tree_map(take, values), tree_map(take, infos)


def probe_pool(
    pool: Any,
    spaces: EnvSpaces,
    seed: int,
    env_index: int,
) -> dict[str, Any]:
    """The example step of env 0, from a one-env pool built like it (then closed).

    The probe pool has ``pool``'s config with one env seeded ``seed`` (env
    0's), so it is reset, stepped once with a random action (drawn from a
    seeded copy of the action space) and closed, and ``pool`` sees nothing.

    Raises:
        EnvError: building, stepping or closing the probe pool raised
            (naming env ``env_index``'s probe).
    """
    config = {
        **pool.config,
        "num_envs": 1,
        "batch_size": 1,
        "num_threads": 1,
        "seed": int(seed),
        "env_seed": [],
    }
    spec_type = type(pool.spec)
    try:
        probe = type(pool)(spec_type(spec_type.gen_config(**config)))
    except Exception as exc:
        raise env_error(env_index, "its probe's construction", exc) from exc
    try:
        probe.reset()
        space = copy.deepcopy(spaces.action)
        space.seed(action_space_seed(int(seed)))
        action = space.sample()
        batch = tree_map(lambda leaf: np.asarray(leaf)[None], action)
        observation, reward, terminated, truncated, infos = probe.step(batch)
    except Exception as exc:
        raise env_error(env_index, "its probe step", exc) from exc
    finally:
        probe.close()
    return step_example(
        tree_map(lambda leaf: np.array(leaf[0]), observation),
        action,
        reward[0],
        terminated[0],
        truncated[0],
        info_row(without_routing(infos), 0, 1),
    )


def env_id_array(indices: Sequence[int]) -> np.ndarray:
    """Cage-local env indices as EnvPool's ``env_id`` array (int32)."""
    return np.asarray(list(indices), dtype=np.int32)


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
        self._start_episodes(ended, _rows(without_routing(reset_infos), len(ended)))
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
        self._start_episodes(index, _rows(without_routing(infos), len(index)))

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


def _rows(infos: dict[str, Any], k: int) -> list[dict[str, Any]]:
    """The ``k`` rows of a batched info dict (row ``j``: the ``j``-th env asked)."""
    return [info_row(infos, j, k) for j in range(k)]


def _check_task_id(task_id: str) -> None:
    """Refuse a task id EnvPool does not know, suggesting the closest ones."""
    tasks = envpool.list_all_envs()
    if task_id in tasks:
        return
    stem = task_id.rpartition("/")[2]  # gymnasium's "ALE/Pong-v5" is "Pong-v5"
    close = [stem] if stem in tasks else difflib.get_close_matches(stem, tasks, n=3)
    hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
    raise ConfigError(
        f"EnvPool has no task {task_id!r} (envpool.list_all_envs() lists them; "
        f"its Atari ids have no ALE/ prefix){hint}"
    )


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
    _check_task_id(task_id)
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
