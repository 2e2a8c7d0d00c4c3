"""``examples/mujoco/train_ppo.py --preset cleanrl``: CleanRL's setup as the
defaults, explicit flags over them, and CleanRL's learning-rate annealing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tyro")

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "mujoco" / "train_ppo.py"


@pytest.fixture
def example(monkeypatch):
    spec = importlib.util.spec_from_file_location("example_mujoco_ppo_preset", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # annotations resolve here
    spec.loader.exec_module(module)
    return module


def test_preset_cleanrl_sets_cleanrl_and_flags_override_it(example):
    config, resume = example.parse(["--preset", "cleanrl"])
    assert resume is None and type(config) is example.Config
    assert (config.preset, config.n_envs, config.batch_T) == ("cleanrl", 1, 2048)
    assert config.truncation_as_termination and config.anneal_from_batch_start
    assert config.normalization == "gymnasium"
    config, _ = example.parse(["--preset", "cleanrl", "--n-envs", "4"])
    assert (config.n_envs, config.batch_T) == (4, 2048)
    default, _ = example.parse([])
    assert (default.preset, default.n_envs, default.batch_T) == ("default", 8, 256)
    assert not default.truncation_as_termination
    assert default.normalization == "shared"


@pytest.mark.parametrize("from_batch_start", [True, False])
def test_learning_rate_per_iteration_as_cleanrl(example, from_batch_start):
    config = example.Config(
        total_steps=4 * 2048, n_envs=1, batch_T=2048,
        anneal_from_batch_start=from_batch_start,
    )  # fmt: skip
    schedule = example.learning_rate_schedule(config)
    # the runner's progress at update i (1-based) of 4 is i / 4 (after the batch)
    rates = [schedule(i / 4) for i in range(1, 5)]
    # CleanRL: lr * (1 - (i - 1) / n); the default reaches 0 at the last update
    lost = 0 if from_batch_start else 1
    expected = [3e-4 * (1 - (i - 1 + lost) / 4) for i in range(1, 5)]
    assert rates == pytest.approx(expected)


def test_learning_rate_starts_at_the_rate_set_whatever_total_steps(example):
    # 5,000 steps of 2,048-step batches: the runner trains 3 batches (6,144
    # steps) and its progress after batch i is min(1, i * 2048 / 5000)
    config = example.Config(
        total_steps=5_000, n_envs=1, batch_T=2048, anneal_from_batch_start=True
    )
    schedule = example.learning_rate_schedule(config)
    rates = [schedule(min(1.0, i * 2048 / 5_000)) for i in range(1, 4)]
    assert rates == pytest.approx([3e-4, 2e-4, 1e-4])


@pytest.mark.parametrize("preset", ["cleanrl", "default"])
def test_every_run_of_the_script_estimates_advantages_by_the_preset_rule(
    example, preset
):
    from parllel.arrays import Array
    from parllel.tree import ArrayDict

    config, _ = example.parse(["--preset", preset])
    T, B = 4, 2
    tree = ArrayDict(
        {
            name: Array(feature_shape=(), dtype=np.float32, batch_shape=(T, B))
            for name in ("reward", "advantage", "return_")
        }
    )
    tree["terminated"] = Array(feature_shape=(), dtype=bool, batch_shape=(T, B))
    tree["truncated"] = Array(feature_shape=(), dtype=bool, batch_shape=(T, B))
    tree["agent_info"] = ArrayDict(
        {"value": Array(feature_shape=(), dtype=np.float32, batch_shape=(T, B))}
    )
    tree["bootstrap_value"] = Array(
        feature_shape=(), dtype=np.float32, batch_shape=(B,)
    )
    tree["final_value"] = Array(feature_shape=(), dtype=np.float32, batch_shape=(T, B))
    (gae,) = example.advantage_estimation(config, tree)
    assert gae.truncation_as_termination is (preset == "cleanrl")
