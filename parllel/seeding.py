"""One seed scheme: every random stream of a run from one master seed.

The master seed feeds numpy's :class:`~numpy.random.SeedSequence` and each
consumer (python, numpy, torch, envs, eval envs, decorrelation, replay,
actions) gets the child of its own spawn key (:class:`Stream`); every seed
is in ``[0, 2**31)``. Env ``i``'s seed depends only on the master seed and
``i``, and ``CageOptions(seed=master)`` seeds the same envs as
``CageOptions(seed=Seeds.from_master(master, 8).envs)``. The table of
streams: docs/logging.md ("Seeding"); the envs' keys: docs/cages.md.
"""

from __future__ import annotations

import dataclasses
import enum
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import numpy as np

from parllel.backends import backend_named, loaded_backends
from parllel.errors import ConfigError


class Stream(enum.IntEnum):
    """First spawn-key element of each stream; never reorder (seeds would change)."""

    PYTHON = 0
    NUMPY = 1
    TORCH = 2
    ENVS = 3
    EVAL_ENVS = 4
    DECORRELATION = 5
    REPLAY = 6
    ACTION_SPACE = 7  # under an env's own seed, not under the master seed
    RESTART = 8  # under an env's own seed: (8, restart number)
    ACTIONS = 9  # (9, sampler index): a sampler's action draws


#: Every derived seed is below this: C++ envs (e.g. hanabi) take a signed
#: 32-bit seed and refuse larger ones.
SEED_LIMIT = 2**31


def derive_seed(entropy: int, *spawn_key: int) -> int:
    """The seed of ``SeedSequence(entropy, spawn_key=spawn_key)``, in ``[0, 2**31)``.

    The sequence's first 32-bit word with its top bit cleared, so a signed
    32-bit int holds it (a word below ``2**31`` is its own seed).

    Example:
        >>> derive_seed(1234, Stream.ENVS, 0) == Seeds.from_master(1234, 1).envs[0]
        True
    """
    sequence = np.random.SeedSequence(int(entropy), spawn_key=tuple(spawn_key))
    return int(sequence.generate_state(1, dtype=np.uint32)[0]) & (SEED_LIMIT - 1)


def check_seed(name: str, seed: Any) -> int:
    """Return ``seed`` as a non-negative int, or raise ConfigError naming it."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ConfigError(f"{name} must be a non-negative int, got {seed!r}")
    if seed < 0:
        raise ConfigError(f"{name} must be >= 0, got {seed}")
    return int(seed)


def env_seed(master: int | None, env_index: int) -> int | None:
    """Seed of training env ``env_index`` under ``master`` (None: unseeded).

    Equals ``Seeds.from_master(master, n_envs).envs[env_index]``.
    """
    if master is None:
        return None
    return derive_seed(master, Stream.ENVS, env_index)


def action_space_seed(seed: int) -> int:
    """Seed of an env's action space, derived from the env's own seed."""
    return derive_seed(seed, Stream.ACTION_SPACE)


def restart_seed(seed: int, restart: int) -> int:
    """Seed of an env recreated after its worker died (``restart`` >= 1)."""
    return derive_seed(seed, Stream.RESTART, restart)


def actions_seed(master: int, sampler_index: int = 0) -> int:
    """Seed of the action draws of sampler ``sampler_index`` under ``master``.

    A run with one sampler (synchronous or background) uses index 0, i.e.
    :attr:`Seeds.actions`; a :class:`~parllel.distributed.RaySampler`'s actor
    ``i`` uses index ``i``, so the actors draw independent actions and one
    actor draws those of the local run.
    """
    return derive_seed(check_seed("master seed", master), Stream.ACTIONS, sampler_index)


def resolve_env_seeds(
    seed: int | Sequence[int] | None, env_indices: Sequence[int]
) -> tuple[int, ...] | None:
    """Per-env seeds of a cage from its ``seed`` argument.

    Args:
        seed: None (unseeded), a master seed (env ``i`` gets
            :func:`env_seed`\\ ``(seed, i)``, i.e. ``Seeds.envs[i]``), or one
            seed per env of the cage, in order (e.g. ``seeds.eval_envs``).
        env_indices: global indices of the cage's envs.

    Returns:
        One seed per env, or None.

    Raises:
        ConfigError: for a negative or non-integer seed, or a sequence whose
            length is not the number of envs.
    """
    if seed is None:
        return None
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        master = check_seed("seed", seed)
        return tuple(derive_seed(master, Stream.ENVS, i) for i in env_indices)
    if isinstance(seed, (str, bytes)) or not isinstance(seed, Sequence):
        raise ConfigError(
            "seed must be None, a master seed (int) or one seed per env "
            f"(e.g. seeds.envs), got {seed!r}"
        )
    if len(seed) != len(env_indices):
        field = seed.field if isinstance(seed, EnvSeeds) else None
        raise ConfigError(
            f"seed holds {len(seed)} per-env seeds but the cage has "
            f"{len(env_indices)} envs; {_seeds_hint(field, len(env_indices))}"
        )
    return tuple(check_seed(f"seed[{i}]", s) for i, s in enumerate(seed))


def _seeds_hint(field: str | None, n: int) -> str:
    """What to pass instead, for per-env seeds that came from ``Seeds.<field>``."""
    training = f"Seeds.from_master(master, n_envs={n}).envs"
    evaluation = f"Seeds.from_master(master, n_eval_envs={n}).eval_envs"
    if field == "eval_envs":
        return (
            f"these are seeds.eval_envs: a training cage takes seeds.envs, an "
            f"evaluation cage of {n} envs {evaluation}"
        )
    if field == "envs":
        return (
            f"these are seeds.envs: an evaluation cage takes seeds.eval_envs, a "
            f"training cage of {n} envs {training}"
        )
    return (
        f"pass one seed per env: a training cage {training}, an evaluation cage "
        f"{evaluation}"
    )


class EnvSeeds(tuple[int, ...]):
    """One seed per env of a cage, knowing which :class:`Seeds` field it is
    (``"envs"`` or ``"eval_envs"``), so a cage of another size names the one
    to pass.

    Example:
        >>> seeds = Seeds.from_master(0, n_envs=2, n_eval_envs=1)
        >>> seeds.eval_envs.field, len(seeds.eval_envs)
        ('eval_envs', 1)
    """

    field: str | None

    def __new__(cls, seeds: Iterable[int] = (), field: str | None = None) -> EnvSeeds:
        """A tuple of ``seeds``, from the :class:`Seeds` field ``field``."""
        self = super().__new__(cls, seeds)
        self.field = field
        return self


@dataclasses.dataclass(frozen=True)
class Seeds:
    """Seeds for every random consumer in a run, derived from one master seed.

    Example:
        >>> seeds = Seeds.from_master(1234, n_envs=8, n_eval_envs=2)
        >>> rng = seed_everything(seeds)  # python, numpy, torch seeded
        >>> cage = build_cage(make_env, 8, options=CageOptions(seed=seeds.envs))
        >>> eval_cage = SerialCage(make_env, 2, options=CageOptions(seed=seeds.eval_envs))

    Attributes:
        master: the master seed everything else derives from.
        decorrelation: a sampler's decorrelation actions (``seed=``).
        replay: a replay buffer's generator (``np.random.default_rng``).
        actions: the handler's action draws (``TorchHandler(..., seed=)``), so
            actions do not depend on the learner's randomness.
        envs: one seed per training env; ``eval_envs``: per evaluation env.
    """

    master: int
    python: int
    numpy: int
    torch: int
    decorrelation: int
    replay: int
    actions: int
    envs: tuple[int, ...] = ()
    eval_envs: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        # the per-env seeds know their field (for the cages' size errors)
        for name in ("envs", "eval_envs"):
            object.__setattr__(self, name, EnvSeeds(getattr(self, name), name))

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
            # fresh OS entropy: a single int
            master = int(cast(int, np.random.SeedSequence().entropy))
        master = check_seed("master seed", master)
        if n_envs < 0 or n_eval_envs < 0:
            raise ConfigError(
                f"counts must be >= 0, got n_envs={n_envs}, n_eval_envs={n_eval_envs}"
            )
        return cls(
            master=master,
            python=derive_seed(master, Stream.PYTHON),
            numpy=derive_seed(master, Stream.NUMPY),
            torch=derive_seed(master, Stream.TORCH),
            decorrelation=derive_seed(master, Stream.DECORRELATION),
            replay=derive_seed(master, Stream.REPLAY),
            actions=actions_seed(master),
            envs=tuple(derive_seed(master, Stream.ENVS, i) for i in range(n_envs)),
            eval_envs=tuple(
                derive_seed(master, Stream.EVAL_ENVS, i) for i in range(n_eval_envs)
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
        """Inverse of :meth:`to_dict` (streams a record lacks are derived)."""
        master = int(data["master"])

        def stream(name: str, *key: int) -> int:
            value = data.get(name)
            return int(value) if value is not None else derive_seed(master, *key)

        return cls(
            master=master,
            python=stream("python", Stream.PYTHON),
            numpy=stream("numpy", Stream.NUMPY),
            torch=stream("torch", Stream.TORCH),
            decorrelation=stream("decorrelation", Stream.DECORRELATION),
            replay=stream("replay", Stream.REPLAY),
            actions=stream("actions", Stream.ACTIONS, 0),
            envs=tuple(int(s) for s in data.get("envs", ())),
            eval_envs=tuple(int(s) for s in data.get("eval_envs", ())),
        )


def seed_everything(
    seeds: Seeds, *, torch_deterministic: bool = False
) -> np.random.Generator:
    """Seed python ``random``, numpy's global RNG and the learning library's.

    The library is each one the script has imported (its
    :class:`~parllel.backends.Backend`): torch's CPU and CUDA RNGs get
    ``seeds.torch``; JAX has no global RNG (its keys are derived from the
    seeds explicitly). Call it after the script's imports.

    Envs are not touched: give the cages ``seed=seeds.envs`` (or
    ``seeds.master``: the same seeds) and evaluation cages
    ``seed=seeds.eval_envs``; they seed env ``i`` at its first reset.

    Args:
        seeds: the run's seeds.
        torch_deterministic: also call
            ``torch.use_deterministic_algorithms(True)`` (slower on GPU; some
            ops then raise instead of running nondeterministically); imports
            torch.

    Returns:
        A ``np.random.Generator`` seeded from ``seeds.numpy``, for code that
        prefers an explicit generator over the global one.

    Raises:
        ConfigError: ``torch_deterministic`` without torch installed.
    """
    random.seed(seeds.python)
    np.random.seed(seeds.numpy)
    backends = loaded_backends()
    if torch_deterministic and all(backend.name != "torch" for backend in backends):
        try:
            backends.append(backend_named("torch"))
        except ImportError as error:
            raise ConfigError(
                "torch_deterministic=True but torch is not installed"
            ) from error
    for backend in backends:
        backend.seed(
            seeds.torch,
            deterministic=torch_deterministic and backend.name == "torch",
        )
    return seeds.numpy_generator()
