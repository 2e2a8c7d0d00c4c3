"""VectorSeeds: the seeds a VectorEnvCage's resets hand its vector env."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["VectorSeeds"]


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
