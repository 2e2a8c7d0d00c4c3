"""Choosing a layout from measurements and comparing it with the prediction."""

from __future__ import annotations

import pytest

from parllel.bench.layouts import candidate_layouts, suggested_layout
from parllel.bench.measure import Measurement
from parllel.bench.recommend import recommend
from parllel.cages import ProcessLayout
from parllel.errors import ConfigError


def measured(n_envs: int, rates: dict[str, float], policy: str = "random") -> list:
    layouts = {layout.name: layout for layout in candidate_layouts(n_envs, cores=2)}
    return [
        Measurement(layouts[name], policy, rate, (rate,), 1)
        for name, rate in rates.items()
    ]


SERIAL = suggested_layout(64, None)
MAIN_SPLIT = suggested_layout(64, ProcessLayout(main_process_envs=32, n_workers=1))


def test_the_fastest_wins_beyond_the_margin():
    group = measured(
        64, {"serial": 100.0, "process-main": 180.0, "process-workers": 150.0}
    )
    r = recommend(group, MAIN_SPLIT, margin=0.05)
    assert r.chosen.layout.name == "process-main" and r.fastest is r.chosen
    assert r.agree and r.same_layout
    assert r.notes() == [
        "suggest_layout_for predicts the same layout (process: main 32 + 1 worker)"
    ]


def test_serial_within_the_margin_is_preferred():
    group = measured(64, {"serial": 100.0, "process-main": 104.0})
    r = recommend(group, MAIN_SPLIT, margin=0.05)
    assert r.chosen.layout.name == "serial"
    assert r.fastest.layout.name == "process-main"
    assert not r.agree
    notes = r.notes()
    assert "it disagrees" in notes[0]
    # the disagreement says which measured faster: here the prediction did
    assert notes[1].startswith(
        "process: main 32 + 1 worker measured 4% faster than serial, within the 5% "
        "margin: too close to call"
    )
    # a faster layout other than the predicted one is named on its own
    other = measured(64, {"serial": 100.0, "process-main": 90.0, "alternating": 104.0})
    notes = recommend(other, MAIN_SPLIT, margin=0.05).notes()
    assert notes[0].startswith("alternating: 32 + 32, 1 worker each measured 4% faster")
    assert "within the 5% margin: the simpler layout is recommended" in notes[0]
    assert "serial measured 11% faster than process: main 32 + 1 worker" in notes[2]
    # a margin of zero takes the fastest
    assert recommend(group, MAIN_SPLIT, margin=0.0).chosen.layout.name == "process-main"


def test_the_predicted_layout_within_the_margin_beats_other_process_layouts():
    group = measured(
        64, {"serial": 50.0, "process-main": 100.0, "process-rebalance": 103.0}
    )
    r = recommend(group, MAIN_SPLIT, margin=0.05)
    assert r.chosen.layout.name == "process-main" and r.same_layout
    far = measured(64, {"serial": 50.0, "process-main": 100.0, "alternating": 130.0})
    r = recommend(far, MAIN_SPLIT, margin=0.05)
    assert r.chosen.layout.name == "alternating"
    assert r.agree and not r.same_layout
    assert "agrees on process stepping, with another layout" in r.notes()[0]
    assert "measured 100 steps/s" in r.notes()[0]


def test_a_disagreement_is_explained_with_both_figures():
    group = measured(8, {"serial": 300.0, "process-main": 100.0})
    predicted = suggested_layout(8, ProcessLayout(main_process_envs=4, n_workers=1))
    r = recommend(group, predicted)
    assert r.chosen.layout.name == "serial" and not r.agree
    notes = r.notes()
    assert notes[0] == (
        "suggest_layout_for predicts process: main 4 + 1 worker (measured 100 "
        "steps/s): it disagrees"
    )
    assert notes[1].startswith(
        "on this machine, now, serial measured 200% faster than process: main 4 + 1 worker"
    )
    data = r.to_dict("make_env")
    assert data["agree"] is False and data["layout"]["name"] == "serial"
    assert data["call"] == 'build_cage(make_env, n_envs=8, parallel="serial")'
    assert data["predicted_call"] == (
        'build_cage(make_env, n_envs=8, parallel="process", '
        "layout=ProcessLayout(main_process_envs=4, n_workers=1))"
    )


def test_an_unmeasured_prediction_is_said_so():
    group = measured(64, {"serial": 100.0})
    r = recommend(group, MAIN_SPLIT)
    assert not r.agree and r.predicted_measurement is None
    assert "(not measured here)" in r.notes()[0]


def test_bad_groups_are_refused():
    with pytest.raises(ConfigError, match="at least one measurement"):
        recommend([], SERIAL)
    mixed = measured(64, {"serial": 1.0}) + measured(8, {"serial": 1.0})
    with pytest.raises(ConfigError, match="one env count and policy at a time"):
        recommend(mixed, SERIAL)
    policies = measured(64, {"serial": 1.0}) + measured(64, {"serial": 1.0}, "mlp")
    with pytest.raises(ConfigError, match="one env count and policy at a time"):
        recommend(policies, SERIAL)
    with pytest.raises(ConfigError, match="margin"):
        recommend(measured(64, {"serial": 1.0}), SERIAL, margin=-0.1)
