"""Layout suggestions follow the cost model; step timing measures a real env."""

from __future__ import annotations

import pytest

from parllel.cages import ProcessLayout
from parllel.cages.layout.cost_model import measure_step_seconds, suggest_layout
from parllel.errors import ConfigError
from tests.helpers.envs import CountingEnv


def test_cheap_envs_stay_serial_and_expensive_ones_go_parallel():
    assert suggest_layout(8, step_seconds=8e-6, cores=2) is None
    assert suggest_layout(64, step_seconds=8e-6, cores=2) == ProcessLayout(
        main_process_envs=32, n_workers=1
    )
    assert suggest_layout(8, step_seconds=200e-6, cores=4) == ProcessLayout(
        main_process_envs=2, n_workers=3
    )
    assert suggest_layout(3, step_seconds=1e-3, cores=8) == ProcessLayout(
        main_process_envs=1, n_workers=2
    )
    assert suggest_layout(64, step_seconds=1.0, cores=1) is None
    with pytest.raises(ConfigError):
        suggest_layout(0, 1e-3)


def test_measure_step_seconds_is_positive():
    assert measure_step_seconds(CountingEnv, steps=20) > 0
