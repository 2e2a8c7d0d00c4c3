"""The tool's layouts: which are tried, the split they use, the call they print."""

from __future__ import annotations

import pytest

from parllel.bench.factory import EnvFactory
from parllel.bench.layouts import (
    LAYOUT_NAMES,
    Layout,
    candidate_layouts,
    suggested_layout,
)
from parllel.builders import build_alternating_cages
from parllel.cages import ProcessCage, ProcessLayout, SerialCage, build_cage
from parllel.cages.layout.cost_model import suggest_layout
from parllel.errors import ConfigError
from tests.helpers.bench_envs import make_noop_env


def test_all_layouts_for_many_envs_on_two_cores():
    layouts = candidate_layouts(64, cores=2)
    assert [layout.name for layout in layouts] == list(LAYOUT_NAMES)
    by_name = {layout.name: layout for layout in layouts}
    assert by_name["process-main"].kwargs == {
        "parallel": "process",
        "main_process_envs": 32,
        "n_workers": 1,
    }
    assert by_name["process-workers"].kwargs == {"parallel": "process", "n_workers": 2}
    assert by_name["process-rebalance"].kwargs == {
        **by_name["process-main"].kwargs,
        "rebalance": True,
    }
    assert by_name["alternating"].kwargs == {}
    assert [layout.stepping for layout in layouts] == ["serial"] + ["process"] * 4


def test_main_share_is_the_split_suggest_layout_would_choose():
    for n_envs, cores in [(64, 2), (8, 4), (3, 8), (5, 2)]:
        suggestion = suggest_layout(n_envs, step_seconds=1e-3, cores=cores)
        predicted = suggested_layout(n_envs, suggestion)
        assert predicted in candidate_layouts(n_envs, cores=cores), (n_envs, cores)
        assert predicted.name == "process-main"
    assert suggested_layout(8, None) == candidate_layouts(8, cores=2)[0]


def test_one_env_and_one_core():
    assert [layout.name for layout in candidate_layouts(1, cores=2)] == [
        "serial",
        "process-workers",
    ]
    assert candidate_layouts(1, cores=2)[1].kwargs["n_workers"] == 1
    # one core: suggest_layout never suggests processes, but they are still timed
    by_name = {layout.name: layout for layout in candidate_layouts(8, cores=1)}
    assert by_name["process-main"].kwargs["main_process_envs"] == 4
    assert by_name["process-main"].kwargs["n_workers"] == 1
    assert by_name["process-workers"].kwargs["n_workers"] == 1


def test_names_filter_and_bad_arguments():
    names = [
        layout.name for layout in candidate_layouts(8, 2, ["alternating", "serial"])
    ]
    assert names == ["serial", "alternating"]
    with pytest.raises(ConfigError, match="unknown layouts \\['threads'\\]"):
        candidate_layouts(8, 2, ["threads"])
    with pytest.raises(ConfigError, match="n_envs must be >= 1"):
        candidate_layouts(0, 2)


def test_descriptions_and_calls():
    by_name = {layout.name: layout for layout in candidate_layouts(64, cores=2)}
    assert by_name["process-main"].describe() == "process: main 32 + 1 worker"
    assert by_name["process-workers"].describe() == "process: 2 workers"
    assert by_name["process-rebalance"].describe() == (
        "process: main 32 + 1 worker, rebalance"
    )
    assert by_name["alternating"].describe() == "alternating: 32 + 32, 1 worker each"
    assert by_name["serial"].builder_call("make_env") == (
        'build_cage(make_env, n_envs=64, parallel="serial")'
    )
    assert by_name["process-rebalance"].builder_call("make_env") == (
        'build_cage(make_env, n_envs=64, parallel="process", layout=ProcessLayout('
        "main_process_envs=32, n_workers=1, rebalance=True))"
    )
    assert by_name["alternating"].builder_call("make_env") == (
        "build_alternating_cages(make_env, n_envs=64)"
    )
    lines = by_name["process-main"].script_lines("", "make_env")
    assert "from parllel.cages import ProcessLayout, build_cage" in lines
    assert "from parllel.cages import build_cage" in (
        by_name["serial"].script_lines("", "make_env")
    )
    factory = EnvFactory("pkg.envs:make_env", "pkg.envs", "make_env", make_noop_env)
    lines = by_name["alternating"].script_lines(factory.import_line(), factory.name)
    assert lines[0] == "from pkg.envs import make_env"
    assert "sampler = AlternatingSampler(cages, handler, sample_tree)" in lines


@pytest.mark.parametrize("name", ["serial", "process-main", "process-workers"])
def test_the_printed_call_builds_the_layout_it_names(name):
    (layout,) = candidate_layouts(4, cores=2, names=[name])
    namespace = {
        "build_cage": build_cage,
        "ProcessLayout": ProcessLayout,
        "make_env": make_noop_env,
    }
    cage = eval(layout.builder_call("make_env"), namespace)
    try:
        if name == "serial":
            assert isinstance(cage, SerialCage)
        else:
            assert isinstance(cage, ProcessCage)
            assert cage.main_process_envs == layout.kwargs.get("main_process_envs", 0)
            assert len(cage.env_slices) == layout.kwargs["n_workers"]
        assert cage.n_envs == 4
    finally:
        cage.close()


def test_the_alternating_call_builds_two_halves():
    (layout,) = candidate_layouts(4, cores=2, names=["alternating"])
    namespace = {"build_alternating_cages": build_alternating_cages}
    cages = eval(
        layout.builder_call("make_env"), {**namespace, "make_env": make_noop_env}
    )
    try:
        assert [cage.n_envs for cage in cages] == [2, 2]
    finally:
        for cage in cages:
            cage.close()


def test_layouts_are_hashable_values():
    assert Layout("serial", 8, (("parallel", "serial"),)) == suggested_layout(8, None)
    assert len({*candidate_layouts(8, cores=2), *candidate_layouts(8, cores=2)}) == 5
