"""Timing ``collect_batch()`` of a real sampler on one layout.

One measurement builds the layout's cages, handler, sample tree and sampler
(no transforms), warms up, then keeps the median steps/s of ``repeats``
timed repeats; a layout whose load balancing the envs refuse is marked
``refused``. Layouts are timed one at a time and everything is closed
before returning. Details: docs/logging.md ("Measure your env's best
layout").
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from parllel.bench.layouts import Layout
from parllel.bench.policies import build_handler, policy_threads
from parllel.builders import build_sample_tree
from parllel.cages import Cage
from parllel.errors import ConfigError, ParllelWarning
from parllel.samplers import AlternatingSampler, FeedForwardSampler
from parllel.tree import ArrayDict

__all__ = ["WARMUP_FRACTION", "Measurement", "measure_layout"]

WARMUP_FRACTION = 0.25  # of ``seconds``, spent warming up before timing


@dataclass(frozen=True)
class Measurement:
    """Steps/s of one layout with one policy, or why there is none.

    Attributes:
        layout: what was timed.
        policy: ``"random"`` or ``"mlp"``.
        steps_per_second: median over the repeats of env steps per second
            of ``collect_batch()`` (0 if it failed).
        repeats: each repeat's steps/s.
        batches: timed batches in all repeats.
        error: ``"ExceptionType: message"`` if building or timing the
            layout raised (nothing was timed), else None.
        refused: why the env refuses what the layout asks (load balancing
            of envs that cannot move between processes); it was timed as
            it ran, but is never recommended. None if not refused.
    """

    layout: Layout
    policy: str
    steps_per_second: float
    repeats: tuple[float, ...]
    batches: int
    error: str | None = None
    refused: str | None = None

    @classmethod
    def failure(cls, layout: Layout, policy: str, error: BaseException) -> Measurement:
        """The row of a layout whose measurement raised ``error``."""
        return cls(layout, policy, 0.0, (), 0, f"{type(error).__name__}: {error}")

    @property
    def ok(self) -> bool:
        """True if the layout was timed (it did not raise)."""
        return self.error is None

    @property
    def eligible(self) -> bool:
        """True if it can be recommended: timed, and not refused by the env."""
        return self.error is None and self.refused is None

    def to_dict(self) -> dict[str, Any]:
        """The measurement as plain data (for JSON; ``steps_per_second`` is
        null for a failed one)."""
        return {
            "layout": self.layout.name,
            "description": self.layout.describe(),
            "n_envs": self.layout.n_envs,
            "policy": self.policy,
            "steps_per_second": (
                round(self.steps_per_second, 1) if self.error is None else None
            ),
            "repeats": [round(value, 1) for value in self.repeats],
            "batches": self.batches,
            "error": self.error,
            "refused": self.refused,
        }


def _run_for(collect: Callable[[], Any], seconds: float) -> tuple[int, float]:
    """Collect whole batches until ``seconds`` have passed (one at least)."""
    batches = 0
    start = time.perf_counter()
    while True:
        collect()
        batches += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return batches, elapsed


def _refusal(cages: list[Cage]) -> str | None:
    """Why a cage switched load balancing off while measuring, if one did."""
    for cage in cages:
        refusal = getattr(cage, "rebalance_refusal", None)
        if refusal is not None:
            return str(refusal)
    return None


def _close(cages: list[Cage], sample_tree: ArrayDict | None) -> None:
    """Close the cages (workers first), then the tree, even if one close raises."""
    with ExitStack() as stack:
        if sample_tree is not None:
            stack.callback(sample_tree.close)  # registered first: runs last
        for cage in cages:
            stack.callback(cage.close)


def measure_layout(
    env_factory: Callable[..., Any],
    layout: Layout,
    policy: str = "random",
    seconds: float = 1.0,
    batch_T: int = 64,
    repeats: int = 3,
) -> Measurement:
    """Time ``collect_batch()`` of a sampler on ``layout`` (see the module docstring).

    Args:
        env_factory: zero-argument callable returning a gymnasium env.
        layout: the cages and sampler to build.
        policy: ``"random"`` or ``"mlp"`` (:mod:`parllel.bench.policies`).
        seconds: timed seconds (split over the repeats; the warm-up adds a
            quarter of it).
        batch_T: time steps per batch.
        repeats: timed repeats; their median is reported.

    Raises:
        ConfigError: ``seconds``, ``batch_T`` or ``repeats`` out of range.
        MissingDependencyError: ``policy="mlp"`` without torch.
        EnvError, WorkerDiedError, ...: the envs failed while stepping.
    """
    if not seconds > 0 or batch_T < 1 or repeats < 1:
        raise ConfigError(
            f"measure_layout needs seconds > 0, batch_T >= 1 and repeats >= 1; got "
            f"{seconds}, {batch_T}, {repeats}"
        )
    cages: list[Cage] = []
    sample_tree: ArrayDict | None = None
    try:
        with warnings.catch_warnings():
            # a refusal is reported in the measurement (and the table), not warned
            warnings.simplefilter("ignore", ParllelWarning)
            cages = layout.build(env_factory)
            handler = build_handler(policy, cages[0].spaces, layout.n_envs)
            sample_tree = build_sample_tree(cages, handler, batch_T)
            sampler = (
                AlternatingSampler(cages, handler, sample_tree)
                if layout.alternating
                else FeedForwardSampler(cages[0], handler, sample_tree)
            )
            with policy_threads(policy):
                _run_for(sampler.collect_batch, WARMUP_FRACTION * seconds)
                rates, total = [], 0
                for _ in range(repeats):
                    batches, elapsed = _run_for(
                        sampler.collect_batch, seconds / repeats
                    )
                    rates.append(batches * batch_T * layout.n_envs / elapsed)
                    total += batches
        refused = _refusal(cages)
    finally:
        _close(cages, sample_tree)
    return Measurement(
        layout, policy, statistics.median(rates), tuple(rates), total, refused=refused
    )
