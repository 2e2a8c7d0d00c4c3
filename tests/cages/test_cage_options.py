"""CageOptions and ProcessLayout: one declaration each, checked when built."""

from __future__ import annotations

from dataclasses import replace

import pytest

from parllel import fields
from parllel.cages import (
    CageOptions,
    LoadBalancer,
    ProcessCage,
    ProcessLayout,
    SerialCage,
    build_cage,
)
from parllel.errors import ConfigError, UnknownOptionError
from tests.helpers.envs import CountingEnv


def test_bad_options_are_refused_when_built():
    with pytest.raises(ConfigError, match="reset_mode must be one of"):
        CageOptions(reset_mode="sometimes")
    with pytest.raises(ConfigError, match="traj_info_kwargs must be a dict"):
        CageOptions(traj_info_kwargs=[("discount", 0.99)])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="options must be a CageOptions"):
        SerialCage(CountingEnv, 2, options={"seed": 0})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("layout", "match"),
    [
        (dict(main_process_envs=-1), "main_process_envs must be >= 0"),
        (dict(n_workers=0), "n_workers must be >= 1"),
        (dict(envs_per_worker=0), "envs_per_worker must be >= 1"),
        (dict(rebalance="yes"), "rebalance must be True/False"),
    ],
)
def test_bad_layouts_are_refused_when_built(layout, match):
    with pytest.raises(ConfigError, match=match):
        ProcessLayout(**layout)


def test_a_layout_splits_the_envs_and_gives_each_cage_its_own_balancer():
    layout = ProcessLayout(main_process_envs=2, envs_per_worker=3, rebalance=True)
    assert layout.worker_slices(8) == [(2, 5), (5, 8)]
    assert ProcessLayout(n_workers=2).worker_slices(5) == [(0, 2), (2, 5)]
    first, second = layout.balancer(), layout.balancer()
    assert isinstance(first, LoadBalancer) and first is not second
    assert ProcessLayout().balancer() is None
    with pytest.raises(ConfigError, match="leaves no env for the workers"):
        ProcessLayout(main_process_envs=4).worker_slices(4)


def test_serial_and_process_cages_take_the_same_options():
    options = CageOptions(seed=3, env_offset=5, reset_mode="wait", keep_infos=True)
    with SerialCage(CountingEnv, 2, options=options) as serial:
        with ProcessCage(
            CountingEnv,
            2,
            layout=ProcessLayout(main_process_envs=1, n_workers=1),
            options=options,
            start_method="fork",
        ) as process:
            for cage in (serial, process):
                assert cage.options is options
                assert cage.env_offset == 5 and cage.reset_mode == "wait"
                assert list(cage.env_seeds) == list(serial.env_seeds)
            assert (
                serial.example[fields.OBSERVATION]
                == process.example[fields.OBSERVATION]
            ).all()
    assert replace(options, env_offset=7).env_offset == 7  # frozen: copied


def test_an_option_given_as_a_keyword_says_where_it_goes():
    with pytest.raises(UnknownOptionError, match="'seed'.*options=CageOptions"):
        build_cage(CountingEnv, 2, parallel="serial", seed=0)
    with pytest.raises(UnknownOptionError, match="'n_workers'.*layout=ProcessLayout"):
        build_cage(CountingEnv, 2, parallel="serial", n_workers=1)
