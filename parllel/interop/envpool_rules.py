"""EnvPool's own rules, which :class:`~parllel.interop.envpool_cage.EnvPoolCage`
adapts (the envpool extra).

EnvPool (``envpool.make_gymnasium(task_id, num_envs=..., ...)``) steps its
envs in C++ threads and speaks gymnasium's batched vector-env API, with its
own rules:

- :func:`check_pool`: only EnvPool's gymnasium API in sync mode (``batch_size
  == num_envs``) with one player per env; :func:`check_task_id`: a task id
  EnvPool knows.
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
from typing import Any

import envpool
import gymnasium as gym
import numpy as np
from envpool.python.envpool import EnvPoolMixin
from envpool.python.gymnasium_envpool import GymnasiumEnvPoolMixin

from parllel.cages import EnvSpaces
from parllel.cages.probe import env_error, step_example
from parllel.errors import ConfigError
from parllel.interop.batched_infos import info_row
from parllel.seeding import action_space_seed
from parllel.tree import tree_map

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


def info_rows(infos: dict[str, Any], k: int) -> list[dict[str, Any]]:
    """The ``k`` rows of a batched info dict (row ``j``: the ``j``-th env asked)."""
    return [info_row(infos, j, k) for j in range(k)]


def check_task_id(task_id: str) -> None:
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
