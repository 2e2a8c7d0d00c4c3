"""One run of the tool: check the factory, predict, measure every layout, recommend."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from parllel.bench.factory import (
    EnvFactory,
    check_factory,
    load_factory,
    move_refusal_of,
)
from parllel.bench.layouts import Layout, candidate_layouts
from parllel.bench.measure import Measurement, measure_layout
from parllel.bench.policies import require_policy
from parllel.bench.recommend import (
    DEFAULT_MARGIN,
    Recommendation,
    predict_layout,
    recommend,
)
from parllel.cages.child_processes import usable_cores
from parllel.errors import ConfigError
from parllel.validation import check_at_least, check_positive

__all__ = ["BenchReport", "run_bench"]


@dataclass
class BenchReport:
    """Everything one run measured and concluded.

    Attributes:
        env_factory: the factory measured.
        cores: usable cores of the measuring process.
        seconds: timed seconds per measurement.
        batch_T: time steps per batch.
        measurements: one per layout, env count and policy, in the order
            run; a layout that raised is a row with its ``error``.
        recommendations: one per env count and policy that has a layout to
            recommend (one that ran and that the env does not refuse).
    """

    env_factory: EnvFactory
    cores: int
    seconds: float
    batch_T: int
    measurements: list[Measurement] = field(default_factory=list)
    recommendations: list[Recommendation] = field(default_factory=list)

    @property
    def anything_ran(self) -> bool:
        """True if at least one layout was timed."""
        return any(m.ok for m in self.measurements)

    def relative(self, measurement: Measurement) -> float | None:
        """Steps/s relative to the fastest recommendable layout of the same env
        count and policy (None for a failed row, or with nothing to compare)."""
        for r in self.recommendations:
            if (r.n_envs, r.policy) == (measurement.layout.n_envs, measurement.policy):
                if measurement.ok:
                    return measurement.steps_per_second / r.fastest.steps_per_second
        return None

    def to_dict(self) -> dict[str, Any]:
        """The report as plain data (the CLI's ``--json`` object)."""
        name = self.env_factory.name
        return {
            "factory": self.env_factory.reference,
            "cores": self.cores,
            "seconds": self.seconds,
            "batch_T": self.batch_T,
            "measurements": [
                {**m.to_dict(), "relative": _rounded(self.relative(m))}
                for m in self.measurements
            ],
            "recommendations": [r.to_dict(name) for r in self.recommendations],
        }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


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

    For each env count: the predicted layout, a measurement of each layout with
    each policy, and a recommendation. A layout, policy or prediction that fails
    is kept as a row with its error; balancing of envs that cannot move between
    processes is measured but never recommended.

    Args:
        env_factory: ``MODULE:FACTORY`` or a loaded :class:`EnvFactory`.
        policies: ``"random"`` and/or ``"mlp"`` (needs torch).
        layouts: names of the layouts to try (default: all that apply).
        margin: a simpler layout within this fraction of the fastest wins.
        progress: called with a line before each step (None: silent).

    Raises:
        ConfigError: invalid arguments, or a factory that fails to build an env.

    Example:
        >>> report = run_bench("gymnasium.envs.classic_control.cartpole:CartPoleEnv",
        ...                    envs=[8], seconds=0.5)
        >>> report.recommendations[0].chosen.layout.builder_call("CartPoleEnv")
        'build_cage(CartPoleEnv, n_envs=8, parallel="serial")'
    """
    envs = [int(n) for n in envs]
    if not envs or min(envs) < 1:
        raise ConfigError(f"env counts must be >= 1, got {envs}")
    check_positive("seconds", seconds, allow_inf=True)
    check_at_least("batch_T", batch_T)
    if not policies:
        raise ConfigError("give at least one policy")
    check_at_least("margin", margin, minimum=0)
    for policy in policies:
        require_policy(policy)
    if isinstance(env_factory, str):
        env_factory = load_factory(env_factory)
    cores = usable_cores()
    plan = {n_envs: candidate_layouts(n_envs, cores, layouts) for n_envs in envs}
    for n_envs, candidates in plan.items():
        if not candidates:
            raise ConfigError(
                f"none of the layouts {list(layouts or ())} applies to {n_envs} envs"
            )
    check_factory(env_factory)
    refusal = None
    if any(layout.rebalances for group in plan.values() for layout in group):
        refusal = move_refusal_of(env_factory)
    say = progress or (lambda message: None)
    report = BenchReport(env_factory, cores, seconds, batch_T)
    for n_envs, candidates in plan.items():
        say(f"{n_envs} envs: suggest_layout_for ...")
        predicted, prediction_error = _predict(env_factory, n_envs, say)
        candidates = _with_prediction(candidates, predicted, layouts)
        for policy in policies:
            group = []
            for layout in candidates:
                say(f"{n_envs} envs, {policy} policy: {layout.describe()} ...")
                measurement = _measure(
                    env_factory, layout, policy, seconds, batch_T, say
                )
                if measurement.ok and layout.rebalances and refusal is not None:
                    measurement = replace(measurement, refused=refusal)
                group.append(measurement)
            report.measurements += group
            chosen = recommend(group, predicted, margin, prediction_error)
            if chosen is not None:
                report.recommendations.append(chosen)
    return report


def _predict(
    env_factory: EnvFactory, n_envs: int, say: Callable[[str], None]
) -> tuple[Layout | None, str | None]:
    """suggest_layout_for's layout, or None and what it raised (the layouts
    are measured either way)."""
    try:
        return predict_layout(env_factory.factory, n_envs), None
    except Exception as exc:  # the user's env: report whatever it raises
        error = f"{type(exc).__name__}: {exc}"
        say(f"  suggest_layout_for failed: {error}")
        return None, error


def _measure(
    env_factory: EnvFactory,
    layout: Layout,
    policy: str,
    seconds: float,
    batch_T: int,
    say: Callable[[str], None],
) -> Measurement:
    """One layout's measurement; a layout that raises is a row with its error
    (its cages are closed by then; the traceback goes to ``say``), so the
    other rows are kept."""
    try:
        return measure_layout(env_factory.factory, layout, policy, seconds, batch_T)
    except Exception as exc:  # the user's env or policy: whatever it raises
        say(f"  failed:\n{traceback.format_exc().rstrip()}")
        return Measurement.failure(layout, policy, exc)


def _with_prediction(
    candidates: list[Layout], predicted: Layout | None, names: Sequence[str] | None
) -> list[Layout]:
    """``candidates`` and, after its namesake, suggest_layout_for's layout if
    it is not among them (on many cores it may use fewer processes than the
    candidates' split), so the recommendation compares it with a measurement."""
    if predicted is None or predicted in candidates:
        return candidates
    if names is not None and predicted.name not in names:
        return candidates
    names_in_order = [layout.name for layout in candidates]
    at = (
        names_in_order.index(predicted.name) + 1
        if predicted.name in names_in_order
        else len(candidates)
    )
    return [*candidates[:at], predicted, *candidates[at:]]
