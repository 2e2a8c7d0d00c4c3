"""The two process cages of an alternating sampler."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from numbers import Integral
from typing import Any

from parllel.cages import CageOptions, ProcessCage, ProcessLayout
from parllel.cages.layout.process_layout import default_worker_count
from parllel.errors import ConfigError

__all__ = ["build_alternating_cages"]


def build_alternating_cages(
    env_factory: Callable[..., Any],
    n_envs: int,
    env_kwargs: dict[str, Any] | None = None,
    *,
    options: CageOptions = CageOptions(),
    layout: ProcessLayout | None = None,
    share_core: bool | None = None,
    pin_main_process: bool = False,
    **process_kwargs: Any,
) -> list[ProcessCage]:
    """The two cages of an :class:`~parllel.samplers.AlternatingSampler`.

    Envs ``[0, n // 2)`` and ``[n // 2, n)``, one worker each (from 4 usable
    cores on, :func:`alternating_workers` each; pass ``layout`` to choose).
    ``share_core`` (default: with 2 or 3 usable CPUs) pins both workers to one
    CPU, polling, since only one half steps at a time; ``pin_main_process``
    keeps this process off that CPU. ``options`` and other keyword arguments go
    to both :class:`~parllel.cages.ProcessCage`s (a per-env ``seed`` is split).
    See docs/samplers.md ("The samplers").

    Example:
        >>> cages = build_alternating_cages(make_env, 8, options=CageOptions(seed=0))
        >>> sampler = AlternatingSampler(cages, handler, sample_tree)
    """
    if n_envs < 2:
        raise ConfigError(f"alternating sampling needs n_envs >= 2, got {n_envs}")
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if share_core is None:
        share_core = 2 <= len(cpus) <= 3
    if share_core:
        if not cpus:
            raise ConfigError("share_core needs os.sched_setaffinity (Linux)")
        process_kwargs = {
            "worker_cpus": cpus[-1:],
            "worker_spin_seconds": 0.002,
            **process_kwargs,
        }
    half = n_envs // 2
    seed = options.seed
    seeds: tuple[Any, Any] = (seed, seed)
    if seed is not None and not isinstance(seed, (int, Integral)):
        seed = list(seed)
        if len(seed) != n_envs:
            raise ConfigError(f"seed holds {len(seed)} per-env seeds for {n_envs} envs")
        seeds = (seed[:half], seed[half:])
    if layout is None:
        layout = ProcessLayout(n_workers=alternating_workers(len(cpus)))
    first = ProcessCage(
        env_factory,
        half,
        env_kwargs,
        layout=layout,
        options=replace(options, seed=seeds[0]),
        **process_kwargs,
    )
    try:
        second = ProcessCage(
            env_factory,
            n_envs - half,
            env_kwargs,
            layout=layout,
            options=replace(
                options, seed=seeds[1], env_offset=options.env_offset + half
            ),
            **process_kwargs,
        )
    except BaseException:
        first.close()
        raise
    if share_core and pin_main_process:
        os.sched_setaffinity(0, set(cpus[:-1]))
    return [first, second]


def alternating_workers(cores: int) -> int:
    """Workers per half of :func:`build_alternating_cages` on ``cores`` usable
    cores: one below 4 cores, else half of the workers a process cage would
    start (one core stays with the main process, which infers)."""
    if cores < 4:
        return 1
    return max(1, default_worker_count(cores) // 2)
