"""ProcessLayout: how a process cage splits its envs between processes."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from parllel.cages.child_processes import usable_cores
from parllel.cages.layout.balance import Balancer, LoadBalancer
from parllel.errors import ConfigError

__all__ = ["ProcessLayout", "default_worker_count"]


def default_worker_count(cores: int, main_steps: bool = False) -> int:
    """Worker processes to step envs on ``cores`` usable cores.

    One per core but the main process's when it steps a share of the envs
    itself; when it steps none, also one fewer from 4 cores on, so the
    sampler loop and inference keep a core that no worker competes for; on 2
    or 3 cores every core steps.
    """
    if main_steps or cores >= 4:
        return max(1, cores - 1)
    return max(1, cores)


@dataclass(frozen=True)
class ProcessLayout:
    """Which process steps which envs of a :class:`~parllel.cages.ProcessCage`.

    Attributes:
        main_process_envs: envs ``[0, main_process_envs)`` are stepped by the
            main process itself, inside ``await_step``.
        n_workers: worker processes for the other envs (None: one per core,
            :func:`default_worker_count`), unless ``envs_per_worker`` is given.
        envs_per_worker: envs per worker (sets the worker count).
        rebalance: move envs from a persistently slower stepping process to
            its faster neighbour (True: a default :class:`LoadBalancer`; or
            any object with its ``propose`` method). docs/cages.md says when
            it pays and which envs can move.

    Example:
        >>> ProcessCage(make_env, 64, layout=ProcessLayout(main_process_envs=32, n_workers=1))
    """

    main_process_envs: int = 0
    n_workers: int | None = None
    envs_per_worker: int | None = None
    rebalance: bool | Balancer = False

    def __post_init__(self) -> None:
        if self.main_process_envs < 0:
            raise ConfigError(
                f"main_process_envs must be >= 0, got {self.main_process_envs}"
            )
        if self.envs_per_worker is not None and self.envs_per_worker < 1:
            raise ConfigError(
                f"envs_per_worker must be >= 1, got {self.envs_per_worker}"
            )
        if self.n_workers is not None and self.n_workers < 1:
            raise ConfigError(f"n_workers must be >= 1, got {self.n_workers}")
        if not isinstance(self.rebalance, bool) and not callable(
            getattr(self.rebalance, "propose", None)
        ):
            raise ConfigError(
                "rebalance must be True/False or an object with a propose(seconds, "
                f"counts) method (e.g. LoadBalancer()), got {self.rebalance!r}"
            )

    def worker_slices(self, n_envs: int) -> list[tuple[int, int]]:
        """Cage-local ``[lo, hi)`` env ranges of the workers (the main
        process's share is ``[0, main_process_envs)``)."""
        n_main = self.main_process_envs
        remaining = n_envs - n_main
        if remaining < 1:
            raise ConfigError(
                f"main_process_envs must be in [0, n_envs): {n_main} leaves no "
                f"env for the workers out of {n_envs}"
            )
        if self.envs_per_worker is not None:
            n_workers = math.ceil(remaining / self.envs_per_worker)
        elif self.n_workers is None:
            n_workers = default_worker_count(usable_cores(), main_steps=n_main > 0)
        else:
            n_workers = self.n_workers
        n_workers = min(n_workers, remaining)
        bounds = np.linspace(n_main, n_envs, n_workers + 1).round().astype(int)
        return [(int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:])]

    def balancer(self) -> Balancer | None:
        """A fresh balancer for one cage, or None (``rebalance=False``)."""
        if isinstance(self.rebalance, bool):
            return LoadBalancer() if self.rebalance else None
        return self.rebalance
