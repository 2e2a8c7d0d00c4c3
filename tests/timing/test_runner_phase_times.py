"""Runners log where the learner's time went (fractions summing to 1) and the
sampler's breakdown per batch; a simulated clock makes the figures exact."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from parllel import fields
from parllel.cages import TrajInfo
from parllel.runners import OnPolicyRunner
from parllel.timing import PhaseTimes
from tests.timing.simulated_clock import SimulatedClock

pytestmark = pytest.mark.timeout(60)

T, B = 4, 5
SAMPLE, UPDATE, EVAL, LOG, CHECKPOINT = 10.0, 20.0, 5.0, 1.0, 2.0


class CostlySampler:
    """Each batch takes SAMPLE s: 6 stepping envs, 4 in inference (as a
    parllel sampler would record them)."""

    def __init__(self, clock: SimulatedClock, timed: bool = True) -> None:
        self.clock = clock
        self.sample_tree = {fields.REWARD: np.zeros((T, B), np.float32)}
        self.timed = timed
        self.phase_times = PhaseTimes()  # left empty unless timed
        self.action_generator = None

    def collect_batch(self) -> tuple[dict, list[TrajInfo]]:
        self.clock.advance(SAMPLE)
        if self.timed:
            times = {"batch": SAMPLE, "env_step": 6.0, "inference": 4.0}
            self.phase_times.record(times)
        return self.sample_tree, [TrajInfo(length=T, return_=1.0)]

    def reset(self) -> None:
        pass


class CostlyAlgorithm:
    def __init__(self, clock: SimulatedClock) -> None:
        self.clock = clock

    def optimize(self, batch: Any, progress: float) -> dict[str, float]:
        self.clock.advance(UPDATE)
        return {"loss": 0.5}

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class CostlyEval:
    def __init__(self, clock: SimulatedClock) -> None:
        self.clock = clock

    def collect(self) -> list[TrajInfo]:
        self.clock.advance(EVAL)
        return [TrajInfo(length=3, return_=9.0)]


class CostlyLogger:
    def __init__(self, clock: SimulatedClock) -> None:
        self.clock, self.rows = clock, []

    def log(self, step: int, metrics: dict) -> None:
        self.clock.advance(LOG)
        self.rows.append(dict(metrics))

    def close(self) -> None:
        pass


def test_each_log_line_says_where_the_time_went(monkeypatch, tmp_path):
    clock = SimulatedClock()
    monkeypatch.setattr("parllel.runners.runner.clock", clock)
    real_save = OnPolicyRunner.save

    def costly_save(runner):
        clock.advance(CHECKPOINT)
        return real_save(runner)

    monkeypatch.setattr(OnPolicyRunner, "save", costly_save)
    logger = CostlyLogger(clock)
    runner = OnPolicyRunner(
        CostlySampler(clock),
        CostlyAlgorithm(clock),
        4 * T * B,
        logger=logger,
        log_interval_steps=2 * T * B,  # every second iteration
        eval_sampler=CostlyEval(clock),
        eval_interval_steps=4 * T * B,  # at the end
        checkpoint_dir=tmp_path,
        checkpoint_interval_steps=2 * T * B,
        handle_interrupt=False,
    )
    runner.run()
    first, second = logger.rows
    # first line: two iterations, nothing else yet
    wall = 2 * (SAMPLE + UPDATE)
    assert first["time/frac/sample"] == pytest.approx(2 * SAMPLE / wall)
    assert first["time/frac/update"] == pytest.approx(2 * UPDATE / wall)
    assert first["time/frac/log"] == first["time/frac/checkpoint"] == 0.0
    # second: the first line's logging and checkpoint, two iterations, eval
    wall = LOG + CHECKPOINT + 2 * (SAMPLE + UPDATE) + EVAL
    assert second["time/frac/sample"] == pytest.approx(2 * SAMPLE / wall)
    assert second["time/frac/update"] == pytest.approx(2 * UPDATE / wall)
    assert second["time/frac/eval"] == pytest.approx(EVAL / wall)
    assert second["time/frac/log"] == pytest.approx(LOG / wall)
    assert second["time/frac/checkpoint"] == pytest.approx(CHECKPOINT / wall)
    for row in (first, second):
        fractions = [v for k, v in row.items() if k.startswith("time/frac/")]
        assert len(fractions) == 6 and sum(fractions) == pytest.approx(1.0)
        assert row["time/frac/other"] == pytest.approx(0.0, abs=1e-12)
        # the sampler's own breakdown, per batch
        assert row["time/sampler/batch_ms"] == pytest.approx(1000 * SAMPLE)
        assert row["time/sampler/env_step_ms"] == pytest.approx(6000.0)
        assert row["time/sampler/inference_ms"] == pytest.approx(4000.0)
        assert row["time/sampler/other_ms"] == pytest.approx(0.0)


def test_time_outside_the_phases_is_other(monkeypatch):
    clock = SimulatedClock()
    monkeypatch.setattr("parllel.runners.runner.clock", clock)
    logger = CostlyLogger(clock)

    class SlowCallback:  # a callback's time is the runner's "other"
        def __getattr__(self, hook):
            if hook == "on_update_end":
                return lambda runner, metrics: clock.advance(30.0)
            return lambda *args: None

    runner = OnPolicyRunner(
        CostlySampler(clock, timed=False),  # no timings: no time/sampler/
        CostlyAlgorithm(clock),
        T * B,
        logger=logger,
        callbacks=[SlowCallback()],
        handle_interrupt=False,
    )
    runner.run()
    (row,) = logger.rows
    wall = SAMPLE + UPDATE + 30.0
    assert row["time/frac/other"] == pytest.approx(30.0 / wall)
    assert not any(key.startswith("time/sampler/") for key in row)
