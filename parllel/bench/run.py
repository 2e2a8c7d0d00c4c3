"""One run of the tool: check the factory, predict, measure every layout, recommend."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from parllel.bench.factory import EnvFactory, check_factory, load_factory
from parllel.bench.layouts import candidate_layouts
from parllel.bench.measure import Measurement, measure_layout
from parllel.bench.policies import require_policy
from parllel.bench.recommend import (
    DEFAULT_MARGIN,
    Recommendation,
    predict_layout,
    recommend,
)
from parllel.cages import usable_cores
from parllel.errors import ConfigError

__all__ = ["BenchReport", "run_bench"]


@dataclass
class BenchReport:
    """Everything one run measured and concluded.

    Attributes:
        env_factory: the factory measured.
        cores: usable cores of the measuring process.
        seconds: timed seconds per measurement.
        batch_T: time steps per batch.
        measurements: one per layout, env count and policy, in the order run.
        recommendations: one per env count and policy.
    """

    env_factory: EnvFactory
    cores: int
    seconds: float
    batch_T: int
    measurements: list[Measurement] = field(default_factory=list)
    recommendations: list[Recommendation] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The report as plain data (the CLI's ``--json`` object)."""
        name = self.env_factory.name
        best = {
            (r.n_envs, r.policy): r.fastest.steps_per_second
            for r in self.recommendations
        }
        return {
            "factory": self.env_factory.reference,
            "cores": self.cores,
            "seconds": self.seconds,
            "batch_T": self.batch_T,
            "measurements": [
                {
                    **m.to_dict(),
                    "relative": round(
                        m.steps_per_second / best[m.layout.n_envs, m.policy], 3
                    ),
                }
                for m in self.measurements
            ],
            "recommendations": [r.to_dict(name) for r in self.recommendations],
        }


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_bench(
    env_factory: str | EnvFactory,
    envs: Sequence[int] = (8, 64),
    *,
    seconds: float = 1.0,
    policies: Sequence[str] = ("random",),
    batch_T: int = 64,
    layouts: Sequence[str] | None = None,
    margin: float = DEFAULT_MARGIN,
    progress: Callable[[str], None] | None = _stderr,
) -> BenchReport:
    """Time ``collect_batch()`` of every layout for each env count and policy.

    For each env count, first asks :func:`~parllel.cages.suggest_layout_for`
    for its prediction, then measures each layout
    (:func:`~parllel.bench.measure.measure_layout`) with each policy, and
    recommends one (:func:`~parllel.bench.recommend.recommend`).

    Args:
        env_factory: ``MODULE:FACTORY`` or a loaded :class:`EnvFactory`.
        envs: env counts to try (each >= 1).
        seconds: timed seconds per measurement.
        policies: ``"random"`` and/or ``"mlp"``.
        batch_T: time steps per batch.
        layouts: names of the layouts to try (default: all that apply).
        margin: a simpler layout within this fraction of the fastest is
            recommended instead.
        progress: called with a line before each step (default: print to
            stderr; None: silent).

    Raises:
        EnvFactoryError: the factory does not import, is not callable, raises
            or returns no env.
        ConfigError: invalid arguments.
        MissingDependencyError: ``"mlp"`` without torch.

    Example:
        >>> report = run_bench("gymnasium.envs.classic_control.cartpole:CartPoleEnv",
        ...                    envs=[8], seconds=0.5)
        >>> report.recommendations[0].chosen.layout.builder_call("CartPoleEnv")
        'build_cages(CartPoleEnv, n_envs=8, parallel="serial")'
    """
    envs = [int(n) for n in envs]
    if not envs or min(envs) < 1:
        raise ConfigError(f"env counts must be >= 1, got {envs}")
    if not seconds > 0 or batch_T < 1:
        raise ConfigError(
            f"seconds must be > 0 and batch_T >= 1, got {seconds}, {batch_T}"
        )
    if not policies:
        raise ConfigError("give at least one policy")
    if margin < 0:
        raise ConfigError(f"margin must be >= 0, got {margin}")
    for policy in policies:
        require_policy(policy)
    if isinstance(env_factory, str):
        env_factory = load_factory(env_factory)
    check_factory(env_factory)
    say = progress or (lambda message: None)
    report = BenchReport(env_factory, usable_cores(), seconds, batch_T)
    for n_envs in envs:
        candidates = candidate_layouts(n_envs, report.cores, layouts)
        if not candidates:
            raise ConfigError(
                f"none of the layouts {list(layouts or ())} applies to {n_envs} envs"
            )
        say(f"{n_envs} envs: suggest_layout_for ...")
        predicted = predict_layout(env_factory.factory, n_envs)
        for policy in policies:
            group = []
            for layout in candidates:
                say(f"{n_envs} envs, {policy} policy: {layout.describe()} ...")
                group.append(
                    measure_layout(
                        env_factory.factory, layout, policy, seconds, batch_T
                    )
                )
            report.measurements += group
            report.recommendations.append(recommend(group, predicted, margin))
    return report
