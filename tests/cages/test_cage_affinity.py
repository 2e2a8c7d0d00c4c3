"""Worker CPU pinning and the alternating-sampler cage helper."""

from __future__ import annotations

import os

import numpy as np
import pytest

from parllel.agents import NumpyHandler, RandomAgent
from parllel.builders import build_alternating_cages
from parllel.cages import CageOptions, ProcessCage, ProcessLayout, SerialCage
from parllel.errors import ConfigError
from parllel.samplers import AlternatingSampler, sample_tree_from_examples
from tests.helpers.cage_helpers import run
from tests.helpers.envs import CountingEnv

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity"), reason="needs sched_setaffinity"
)
CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def test_workers_run_on_the_given_cpus_with_unchanged_results():
    with SerialCage(CountingEnv, 4, options=CageOptions(seed=2)) as cage:
        reference = run(cage, 6)
    with ProcessCage(
        CountingEnv,
        4,
        options=CageOptions(seed=2),
        layout=ProcessLayout(n_workers=2),
        worker_cpus=CPUS[-1:],
        start_method="fork",
    ) as cage:
        for pid in cage.worker_pids:
            assert os.sched_getaffinity(pid) == set(CPUS[-1:])
        result = run(cage, 6)
    for key in reference[0]:
        np.testing.assert_array_equal(result[0][key], reference[0][key], err_msg=key)


def test_bad_worker_cpus_are_refused():
    with pytest.raises(ConfigError, match="worker_cpus"):
        ProcessCage(CountingEnv, 2, worker_cpus=[max(CPUS) + 64])
    with pytest.raises(ConfigError, match="worker_cpus"):
        ProcessCage(CountingEnv, 2, worker_cpus=[])


def _collect(cages, seed=0):
    handler = NumpyHandler(RandomAgent(cages[0].spaces.action, seed=seed), 6)
    example = handler.example_outputs(cages[0].example["observation"])
    with sample_tree_from_examples(cages[0].example, example, 5, 6) as tree:
        sampler = AlternatingSampler(cages, handler, tree)
        batch, _ = sampler.collect_batch()
        return {path: np.array(leaf.to_ndarray()) for path, leaf in batch.items_flat()}


@pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs")
def test_alternating_cages_share_a_core_and_sample_like_serial_halves():
    affinity = os.sched_getaffinity(0)
    try:
        cages = build_alternating_cages(
            CountingEnv, 6, options=CageOptions(seed=4), share_core=True, pin_main_process=True,
            start_method="fork",
        )  # fmt: skip
        try:
            assert [c.env_offset for c in cages] == [0, 3]
            assert os.sched_getaffinity(0) == set(CPUS[:-1])
            for cage in cages:
                assert [os.sched_getaffinity(p) for p in cage.worker_pids] == [
                    set(CPUS[-1:])
                ]
                assert cage.worker_spin_seconds == 0.002
            result = _collect(cages)
        finally:
            for cage in cages:
                cage.close()
    finally:
        os.sched_setaffinity(0, affinity)
    serial = [
        SerialCage(CountingEnv, 3, options=CageOptions(seed=4)),
        SerialCage(CountingEnv, 3, options=CageOptions(seed=4, env_offset=3)),
    ]
    try:
        reference = _collect(serial)
    finally:
        for cage in serial:
            cage.close()
    for key in reference:
        np.testing.assert_array_equal(result[key], reference[key], err_msg=str(key))


def test_alternating_cages_need_two_envs():
    with pytest.raises(ConfigError, match="n_envs >= 2"):
        build_alternating_cages(CountingEnv, 1)
