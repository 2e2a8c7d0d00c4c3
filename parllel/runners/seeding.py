"""One master seed for a whole run, split into independent seeds.

:meth:`Seeds.from_master` feeds the master seed to numpy's
:class:`~numpy.random.SeedSequence` and spawns one child per consumer
(python ``random``, numpy, torch, each training env, each evaluation env).
Children are statistically independent, and env ``i``'s seed depends only on
the master seed and ``i``: adding envs does not change the seeds of the
existing ones. The seeds are plain ints, recorded in the run's
``metadata.json`` so a run can be repeated exactly.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any

import numpy as np

from parllel.errors import ConfigError

# spawn-key slots of the master SeedSequence; never reorder (seeds would change)
_PYTHON, _NUMPY, _TORCH, _ENVS, _EVAL_ENVS = range(5)


def _seed_of(sequence: np.random.SeedSequence) -> int:
    return int(sequence.generate_state(1, dtype=np.uint32)[0])


def _child(master: int, *spawn_key: int) -> np.random.SeedSequence:
    return np.random.SeedSequence(master, spawn_key=spawn_key)


@dataclasses.dataclass(frozen=True)
class Seeds:
    """Seeds for every random consumer in a run, derived from one master seed.

    Example:
        >>> seeds = Seeds.from_master(1234, n_envs=8, n_eval_envs=2)
        >>> rng = seed_everything(seeds)  # python, numpy, torch seeded
        >>> envs = [make_env() for _ in range(8)]
        >>> for env, seed in zip(envs, seeds.envs):
        ...     env.reset(seed=seed)

    Attributes:
        master: the master seed everything else derives from.
        python: seed for the ``random`` module.
        numpy: seed for numpy's global RNG and :meth:`numpy_generator`.
        torch: seed for ``torch.manual_seed``.
        envs: one seed per training env.
        eval_envs: one seed per evaluation env.
    """

    master: int
    python: int
    numpy: int
    torch: int
    envs: tuple[int, ...] = ()
    eval_envs: tuple[int, ...] = ()

    @classmethod
    def from_master(
        cls, master: int | None = None, n_envs: int = 0, n_eval_envs: int = 0
    ) -> Seeds:
        """Derive all seeds from ``master``.

        Args:
            master: a non-negative int; if None, fresh entropy is drawn from
                the OS (and recorded as ``master``, so the run can be repeated).
            n_envs: number of training env seeds.
            n_eval_envs: number of evaluation env seeds.

        Returns:
            The seeds.

        Raises:
            ConfigError: for a negative or non-integer master seed or counts.
        """
        if master is None:
            master = int(np.random.SeedSequence().entropy)
        if isinstance(master, bool) or not isinstance(master, (int, np.integer)):
            raise ConfigError(f"master seed must be an int, got {master!r}")
        master = int(master)
        if master < 0 or n_envs < 0 or n_eval_envs < 0:
            raise ConfigError(
                f"seed and counts must be >= 0, got master={master}, "
                f"n_envs={n_envs}, n_eval_envs={n_eval_envs}"
            )
        return cls(
            master=master,
            python=_seed_of(_child(master, _PYTHON)),
            numpy=_seed_of(_child(master, _NUMPY)),
            torch=_seed_of(_child(master, _TORCH)),
            envs=tuple(_seed_of(_child(master, _ENVS, i)) for i in range(n_envs)),
            eval_envs=tuple(
                _seed_of(_child(master, _EVAL_ENVS, i)) for i in range(n_eval_envs)
            ),
        )

    def numpy_generator(self) -> np.random.Generator:
        """A fresh ``np.random.Generator`` seeded from :attr:`numpy`."""
        return np.random.default_rng(self.numpy)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (tuples become lists), as stored in metadata."""
        data = dataclasses.asdict(self)
        data["envs"] = list(self.envs)
        data["eval_envs"] = list(self.eval_envs)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Seeds:
        """Inverse of :meth:`to_dict`."""
        return cls(
            master=int(data["master"]),
            python=int(data["python"]),
            numpy=int(data["numpy"]),
            torch=int(data["torch"]),
            envs=tuple(int(s) for s in data.get("envs", ())),
            eval_envs=tuple(int(s) for s in data.get("eval_envs", ())),
        )


def seed_everything(
    seeds: Seeds, *, torch_deterministic: bool = False
) -> np.random.Generator:
    """Seed python ``random``, numpy's global RNG and torch's (CPU and CUDA) RNGs.

    Envs are not touched: pass ``seeds.envs[i]`` to env ``i``'s first
    ``reset(seed=...)`` (cages do this when given the seeds).

    Args:
        seeds: the run's seeds.
        torch_deterministic: also call
            ``torch.use_deterministic_algorithms(True)`` (slower on GPU; some
            ops then raise instead of running nondeterministically).

    Returns:
        A ``np.random.Generator`` seeded from ``seeds.numpy``, for code that
        prefers an explicit generator over the global one.
    """
    random.seed(seeds.python)
    np.random.seed(seeds.numpy)
    try:
        import torch
    except ImportError as error:  # torch is optional below parllel.torch
        if torch_deterministic:
            raise ConfigError(
                "torch_deterministic=True but torch is not installed"
            ) from error
    else:
        torch.manual_seed(seeds.torch)  # also seeds every CUDA device
        if torch_deterministic:
            torch.use_deterministic_algorithms(True)
    return seeds.numpy_generator()
