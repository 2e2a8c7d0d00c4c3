"""What :class:`~parllel.jax.algos.SeededPPO` and
:class:`~parllel.jax.algos.SeededSAC` share: the check that K runs'
algorithms are one configuration, and the runs stopped by a non-finite update."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from parllel.errors import ConfigError, NonFiniteError
from parllel.jax.seeds import SeedStack

__all__ = ["OnNonFinite", "SeededRuns"]

OnNonFinite = Literal["stop_run", "stop_all"]
"""What a non-finite loss in one run does: freeze that run, or raise."""


class SeededRuns:
    """K runs of one algorithm: their seeds and the runs stopped so far.

    Args:
        kind: the algorithm's name in errors (``"PPO"``).
        algorithms: one algorithm per run, built on ``stack.agents[k]``.
        stack: the runs' stacked parameters.
        seeds: each run's master seed, named in errors.
        on_nonfinite: ``"stop_run"`` or ``"stop_all"``.
        shared: the attributes every run's algorithm must have alike.

    Raises:
        ConfigError: not one algorithm and seed per run, a bad
            ``on_nonfinite``, or algorithms with other hyperparameters.
    """

    def __init__(
        self,
        kind: str,
        algorithms: Sequence[Any],
        stack: SeedStack,
        seeds: Sequence[int],
        on_nonfinite: OnNonFinite,
        shared: Sequence[str],
    ) -> None:
        if len(algorithms) != stack.n_runs or len(seeds) != stack.n_runs:
            raise ConfigError(
                f"Seeded{kind} needs one {kind} and one seed per run: "
                f"{stack.n_runs} runs, {len(algorithms)} {kind}s, {len(seeds)} seeds"
            )
        if on_nonfinite not in ("stop_run", "stop_all"):
            raise ConfigError(
                f"on_nonfinite must be 'stop_run' or 'stop_all'; got {on_nonfinite!r}"
            )
        first = algorithms[0]
        for run, algorithm in enumerate(algorithms[1:], start=1):
            for name in shared:
                if getattr(algorithm, name) != getattr(first, name):
                    raise ConfigError(
                        f"run {run}'s {kind} has {name} = "
                        f"{getattr(algorithm, name)!r}, run 0's "
                        f"{getattr(first, name)!r}: the runs share one configuration"
                    )
        self.stack = stack
        self.seeds = [int(seed) for seed in seeds]
        self.on_nonfinite = on_nonfinite
        self.stopped: dict[int, Exception] = {}

    @property
    def n_runs(self) -> int:
        """K, the number of runs."""
        return len(self.seeds)

    def stop(self, run: int, error: Exception) -> None:
        """Stop run ``run``: its weights and optimizer state never change
        again (e.g. a run stopped before the checkpoint it resumes from)."""
        self.stopped[run] = error

    def _stop_nonfinite(self, run: int, error: NonFiniteError) -> None:
        """Stop run ``run`` for ``error``, naming the run and its seed."""
        self.stopped[run] = NonFiniteError(
            f"run {run} (seed {self.seeds[run]}): {error}", error.terms
        )

    def _raise_if_stop_all(self, failed: Sequence[int]) -> None:
        """With ``on_nonfinite="stop_all"``, raise the first failed run's error."""
        if failed and self.on_nonfinite == "stop_all":
            raise self.stopped[failed[0]]
