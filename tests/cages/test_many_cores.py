"""Layouts on 16 cores (and on 2, unchanged), with the core count mocked.

Nothing here starts a process: the cage classes the builders call are
replaced by recorders of their keyword arguments.
"""

from __future__ import annotations

from typing import Any

import pytest

import parllel.builders.cages as pattern_cages
import parllel.cages.building as building
import parllel.cages.layout.process_layout as policy
from parllel.bench.layouts import candidate_layouts, suggested_layout
from parllel.bench.run import _with_prediction
from parllel.builders import build_alternating_cages
from parllel.builders.cages import alternating_workers
from parllel.cages import CageOptions, ProcessLayout, build_cage
from parllel.cages.layout.cost_model import suggest_layout
from parllel.cages.layout.process_layout import default_worker_count
from tests.helpers.envs import CountingEnv

SYNC = 40e-6  # ASSUMED_SYNC_SECONDS


class Recorder:
    """Stands in for a cage class: records the keyword arguments of each build."""

    def __init__(self) -> None:
        self.builds: list[dict[str, Any]] = []

    def __call__(self, factory: Any, n_envs: int, *args: Any, **kwargs: Any) -> Any:
        self.builds.append({"n_envs": n_envs, **kwargs})
        return self


@pytest.mark.parametrize(
    ("cores", "main_steps", "workers"),
    [(1, False, 1), (2, False, 2), (2, True, 1), (3, False, 3), (4, False, 3),
     (16, False, 15), (16, True, 15)],
)  # fmt: skip
def test_default_worker_count_leaves_the_main_process_a_core_from_4_cores(
    cores, main_steps, workers
):
    assert default_worker_count(cores, main_steps) == workers


def test_a_process_cage_on_16_cores_starts_15_workers(monkeypatch):
    monkeypatch.setattr(policy, "usable_cores", lambda: 16)
    ranges = ProcessLayout().worker_slices(64)
    assert len(ranges) == 15 and ranges[0][0] == 0 and ranges[-1][1] == 64
    assert len(ProcessLayout(main_process_envs=4).worker_slices(64)) == 15
    monkeypatch.setattr(policy, "usable_cores", lambda: 2)
    assert len(ProcessLayout().worker_slices(64)) == 2  # as before


def test_suggest_layout_on_16_cores_caps_processes_by_the_sync_cost():
    # CartPole-like (8 us): 12 processes, each stepping >= one sync's worth
    assert suggest_layout(64, 8e-6, cores=16, sync_seconds=SYNC) == ProcessLayout(
        main_process_envs=5, n_workers=11
    )
    # Atari-like (400 us): every core
    assert suggest_layout(64, 400e-6, cores=16, sync_seconds=SYNC) == ProcessLayout(
        main_process_envs=4, n_workers=15
    )
    # barely worth processes: few of them
    assert suggest_layout(64, 3e-6, cores=16, sync_seconds=SYNC) == ProcessLayout(
        main_process_envs=16, n_workers=3
    )
    assert suggest_layout(64, 1e-6, cores=16, sync_seconds=SYNC) is None
    # 2 cores: unchanged
    assert suggest_layout(64, 8e-6, cores=2, sync_seconds=SYNC) == ProcessLayout(
        main_process_envs=32, n_workers=1
    )


@pytest.mark.parametrize(
    ("cores", "expected"),
    [
        (16, ProcessLayout(main_process_envs=5, n_workers=11)),
        (2, ProcessLayout(main_process_envs=32, n_workers=1)),
    ],
)
def test_build_cage_auto_on_16_and_2_cores(monkeypatch, cores, expected):
    monkeypatch.setattr(building, "usable_cores", lambda: cores)
    monkeypatch.setattr(building, "measure_step_seconds", lambda *a, **k: 8e-6)
    monkeypatch.setattr(building, "measure_step_overhead_seconds", lambda **k: SYNC)
    recorder = Recorder()
    monkeypatch.setattr(building, "ProcessCage", recorder)
    assert (
        build_cage(CountingEnv, 64, parallel="auto", options=CageOptions(seed=0))
        is recorder
    )
    (kwargs,) = recorder.builds
    assert kwargs["layout"] == expected


@pytest.mark.parametrize(
    ("cores", "workers"), [(2, 1), (3, 1), (4, 1), (8, 3), (16, 7)]
)
def test_alternating_halves_share_the_workers_from_4_cores(monkeypatch, cores, workers):
    assert alternating_workers(cores) == workers
    monkeypatch.setattr(
        pattern_cages.os, "sched_getaffinity", lambda pid: set(range(cores))
    )
    recorder = Recorder()
    monkeypatch.setattr(pattern_cages, "ProcessCage", recorder)
    build_alternating_cages(CountingEnv, 64, options=CageOptions(seed=0))
    assert [build["layout"].n_workers for build in recorder.builds] == [workers] * 2
    shared = [build.get("worker_cpus") for build in recorder.builds]
    assert shared == ([[cores - 1]] * 2 if cores <= 3 else [None, None])


def test_the_bench_on_16_cores_leaves_a_core_and_times_the_prediction():
    by_name = {layout.name: layout for layout in candidate_layouts(64, cores=16)}
    assert by_name["process-workers"].kwargs["n_workers"] == 15
    assert by_name["process-main"].kwargs == {
        "parallel": "process",
        "main_process_envs": 4,
        "n_workers": 15,
    }
    assert by_name["alternating"].kwargs == {"n_workers": 7}
    assert by_name["alternating"].describe() == "alternating: 32 + 32, 7 workers each"
    assert "n_workers=7" in by_name["alternating"].builder_call("make_env")
    candidates = candidate_layouts(64, cores=16)
    predicted = suggested_layout(64, ProcessLayout(main_process_envs=5, n_workers=11))
    timed = _with_prediction(candidates, predicted, None)
    names = [layout.name for layout in timed]
    assert names.index("process-main") + 1 == timed.index(predicted)
    assert len(timed) == len(candidates) + 1
    # already a candidate, or filtered out: nothing added
    assert _with_prediction(timed, predicted, None) == timed
    assert _with_prediction(candidates, predicted, ["serial"]) == candidates
    # 2 cores: the alternating layout is as before
    assert candidate_layouts(64, cores=2)[-1].kwargs == {}
