"""RunSettings: the piece every example embeds seeds and opens the run, gives
the runner its loggers, checkpoint directory, config and cadence, and ends
the run with the report."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from parllel.runners import RunDirectory, RunSettings
from parllel.runners.cli import parse_config
from parllel.runners.run_settings import TrainingRun
from parllel.seeding import Seeds

pytest.importorskip("tyro")


@dataclasses.dataclass
class Config:
    seed: int = 0
    """master seed"""
    total_steps: int = 64
    """env steps"""
    run: RunSettings = RunSettings.field(eval_interval_steps=16, eval_episodes=3)
    """run directory, console, logging, evaluation and checkpoints"""


QUICK = {"total_steps": 32, "eval_interval_steps": 8, "checkpoint_interval_steps": 8}


def test_run_settings_start_a_run_and_give_the_runner_its_options(tmp_path):
    config, resume = parse_config(
        Config, argv=["--run-root", str(tmp_path), "--console", "plain"]
    )
    assert resume is None
    assert config.run == RunSettings(
        str(tmp_path), "plain", eval_interval_steps=16, eval_episodes=3
    )
    seeds = Seeds.from_master(config.seed, n_envs=1)
    random.seed(12345)
    run = config.run.start("demo", config, seeds, resume)
    assert isinstance(run, TrainingRun) and isinstance(run.directory, RunDirectory)
    seeded = random.random()
    config.run.start("again", config, seeds, resume)  # seeds python the same way
    assert random.random() == seeded
    assert run.path.parent == tmp_path and run.path.name.startswith("demo")
    saved = json.loads(run.directory.config_path.read_text())
    assert saved["run"] == dataclasses.asdict(config.run)
    options = run.runner_options(config.total_steps)
    try:
        assert options["checkpoint_dir"] == run.directory.checkpoints_dir
        assert options["config"] == dataclasses.asdict(config)
        assert options["log_interval_steps"] == 16  # "eval": at every evaluation
        assert options["checkpoint_interval_steps"] == 50_000
        assert "eval_sampler" not in options and "eval_interval_steps" not in options
        options["logger"].log(8, {"train/return_mean": 1.0})
    finally:
        options["logger"].close()
    assert run.directory.progress_csv.is_file()
    again = config.run.start("demo", config, seeds, str(run.path))
    assert again.path == run.path and again.resume == str(run.path)
    resumed, _ = parse_config(Config, argv=["--resume", str(run.path)])
    assert resumed == config  # the nested settings come back from config.json


def test_runner_options_pass_the_eval_sampler_and_their_own_log_interval(tmp_path):
    settings = RunSettings(str(tmp_path), "plain", log_interval_steps=4)
    config = Config(run=settings)
    run = settings.start("demo", config, Seeds.from_master(0, n_envs=1), None)
    eval_sampler = object()
    options = run.runner_options(config.total_steps, eval_sampler)
    options["logger"].close()
    assert options["eval_sampler"] is eval_sampler
    assert options["eval_interval_steps"] == 10_000
    assert options["log_interval_steps"] == 4


@pytest.mark.parametrize(
    "flag, passed",
    [(None, 16), ("eval", 16), ("None", None), ("5", 5)],
    ids=["default", "eval", "None", "steps"],
)
def test_log_interval_flag_means_what_it_means_on_the_runner(tmp_path, flag, passed):
    """``--log-interval-steps None`` is every iteration, as ``Runner``'s None;
    the scripts' default, ``eval``, is the evaluation interval."""
    argv = ["--run-root", str(tmp_path), "--console", "plain"]
    if flag is not None:
        argv += ["--log-interval-steps", flag]
    config, _ = parse_config(Config, argv=argv)
    run = config.run.start("demo", config, Seeds.from_master(0, n_envs=1), None)
    options = run.runner_options(config.total_steps)
    options["logger"].close()
    assert options["log_interval_steps"] == passed


def test_quick_presets_reach_the_nested_settings():
    config, _ = parse_config(Config, quick=QUICK, argv=["--quick"])
    assert config.total_steps == 32
    assert config.run.eval_interval_steps == 8
    assert config.run.checkpoint_interval_steps == 8
    assert config.run.eval_episodes == 3  # the script's default, kept
    config, _ = parse_config(
        Config, quick=QUICK, argv=["--quick", "--eval-interval-steps", "4"]
    )
    assert config.run.eval_interval_steps == 4
