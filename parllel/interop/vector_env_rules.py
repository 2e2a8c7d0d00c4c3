"""gymnasium's vector-env rules, which
:class:`~parllel.interop.vector_env_cage.VectorEnvCage` adapts.

- which vector envs a cage can step: :func:`check_vector_env` (an open
  gymnasium ``VectorEnv``, not an EnvPool) and :func:`autoreset_mode`
  (``SAME_STEP`` or ``DISABLED``);
- the seeds a reset hands the vector env (:class:`VectorSeeds`): a first
  reset of some envs resets all of them;
- the probe step, preferably from a separate env built by ``env_fns[0]`` of a
  ``SyncVectorEnv`` / ``AsyncVectorEnv`` (:func:`probe_factory`), so the
  vector env sees nothing before the first reset, else with
  :func:`probe_actions`;
- where an ended episode's last observation is (:func:`final_observations`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv
from gymnasium.vector.utils import iterate

from parllel.errors import ConfigError, EnvError
from parllel.interop.batching import ObservationWriter
from parllel.seeding import action_space_seed

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
