"""The synchronization round trip is measured on the machine at hand."""

from __future__ import annotations

import math
import multiprocessing as mp
import os

import pytest

from parllel.cages import ProcessLayout
from parllel.cages.building import suggest_layout_for
from parllel.cages.layout.cost_model import suggest_layout
from parllel.cages.process.step_overhead import measure_sync_seconds
from tests.helpers.envs import CountingEnv


@pytest.mark.parametrize("start_method", [None, "fork"])
def test_measure_sync_seconds_leaves_no_process(start_method):
    seconds = measure_sync_seconds(rounds=5, start_method=start_method)
    assert 0 < seconds and math.isfinite(seconds)
    assert not [p for p in mp.active_children() if p.name == "parllel-sync-probe"]


def test_measure_sync_seconds_refuses_no_rounds():
    with pytest.raises(ValueError, match="rounds"):
        measure_sync_seconds(rounds=0)


def test_a_measured_sync_cost_decides_the_layout():
    # 8 envs of 8 us: serial under the assumed cost, processes if syncs are cheap
    assert suggest_layout(8, step_seconds=8e-6, cores=2) is None
    assert suggest_layout(
        8, step_seconds=8e-6, cores=2, sync_seconds=1e-6
    ) == ProcessLayout(main_process_envs=4, n_workers=1)
    assert suggest_layout(64, step_seconds=8e-6, cores=2, sync_seconds=1e-3) is None


def test_suggest_layout_for_one_env_is_serial_without_a_probe_process():
    assert suggest_layout_for(CountingEnv, 1) is None
    assert not mp.active_children()


def test_measure_step_overhead_seconds_leaves_no_process_or_segment():
    from parllel.arrays.shared_memory import list_segments
    from parllel.cages.process.step_overhead import measure_step_overhead_seconds

    seconds = measure_step_overhead_seconds(steps=20)
    assert 0.0 <= seconds < 1.0
    assert mp.active_children() == []
    assert list_segments(os.getpid()) == []


def test_measure_step_overhead_seconds_refuses_no_steps():
    from parllel.cages.process.step_overhead import measure_step_overhead_seconds
    from parllel.errors import ConfigError

    with pytest.raises(ConfigError, match="steps"):
        measure_step_overhead_seconds(steps=0)
