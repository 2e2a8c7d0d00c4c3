"""make_envpool_cage: an EnvPool built with parllel's seeds, as a cage."""

from __future__ import annotations

import difflib
from dataclasses import replace
from typing import Any

import envpool
import numpy as np

from parllel.cages import CageOptions
from parllel.errors import ConfigError
from parllel.interop.envpool_cage import EnvPoolCage
from parllel.seeding import resolve_env_seeds

__all__ = ["make_envpool_cage"]


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
