"""Checking a ProcessCage's settings: the env split over workers, CPUs, policies."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np

from parllel.cages.balance import Balancer, LoadBalancer
from parllel.errors import ConfigError

DEATH_POLICIES = ("raise", "restart")
DEFAULT_STEP_TIMEOUT = 300.0  # seconds; generous: only a hung env should reach it


def split_envs(
    n_envs: int, n_main: int, envs_per_worker: int | None, n_workers: int | None
) -> list[tuple[int, int]]:
    """Cage-local ``[lo, hi)`` env ranges of the workers (main's share is ``[0, n_main)``)."""
    remaining = n_envs - n_main
    if remaining < 1:
        raise ConfigError(
            f"main_process_envs ({n_main}) leaves no env for the workers out of {n_envs}"
        )
    if envs_per_worker is not None:
        if envs_per_worker < 1:
            raise ConfigError(f"envs_per_worker must be >= 1, got {envs_per_worker}")
        n_workers = math.ceil(remaining / envs_per_worker)
    elif n_workers is None:
        cores = (
            len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else (os.cpu_count() or 1)
        )
        n_workers = max(1, cores - (1 if n_main else 0))
    if n_workers < 1:
        raise ConfigError(f"n_workers must be >= 1, got {n_workers}")
    n_workers = min(n_workers, remaining)
    bounds = np.linspace(n_main, n_envs, n_workers + 1).round().astype(int)
    return [(int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:])]


def check_cpus(cpus: Sequence[int] | None) -> tuple[int, ...] | None:
    """Validate a worker CPU set against this process's allowed CPUs."""
    if cpus is None:
        return None
    cpus = tuple(int(cpu) for cpu in cpus)
    if not hasattr(os, "sched_setaffinity"):
        raise ConfigError("worker_cpus needs os.sched_setaffinity (Linux)")
    allowed = os.sched_getaffinity(0)
    if not cpus or not set(cpus) <= allowed:
        raise ConfigError(
            f"worker_cpus {list(cpus)} must be a non-empty subset of the CPUs this "
            f"process may use, {sorted(allowed)}"
        )
    return cpus


def check_death_policy(on_worker_death: str) -> str:
    """Raise ConfigError unless ``on_worker_death`` is one of DEATH_POLICIES."""
    if on_worker_death not in DEATH_POLICIES:
        raise ConfigError(
            f"on_worker_death must be one of {DEATH_POLICIES}, got {on_worker_death!r}"
        )
    return on_worker_death


def make_balancer(rebalance: bool | Balancer) -> Balancer | None:
    """The balancer a ``rebalance`` argument asks for (True: a default LoadBalancer)."""
    if isinstance(rebalance, bool):
        return LoadBalancer() if rebalance else None
    if not callable(getattr(rebalance, "propose", None)):
        raise ConfigError(
            "rebalance must be True/False or an object with a propose(seconds, "
            f"counts) method (e.g. LoadBalancer()), got {rebalance!r}"
        )
    return rebalance


def check_step_timeout(step_timeout: float | None) -> float | None:
    """``step_timeout`` as a float (or None), or ConfigError unless it is > 0."""
    if step_timeout is not None and not step_timeout > 0:
        raise ConfigError(
            f"step_timeout must be > 0 seconds or None, got {step_timeout}"
        )
    return None if step_timeout is None else float(step_timeout)
