"""RunSettings: the piece every example embeds opens the run directory and
gives the runner its loggers, checkpoint directory and config."""

from __future__ import annotations

import dataclasses
import json

import pytest

from parllel.patterns import RunSettings
from parllel.runtime import RunDirectory, Seeds
from parllel.runtime.cli import parse_config

pytest.importorskip("tyro")


@dataclasses.dataclass
class Config:
    seed: int = 0
    """master seed"""
    total_steps: int = 64
    """env steps"""
    run: RunSettings = dataclasses.field(default_factory=RunSettings)
    """run directory, console and logging"""


def test_run_settings_open_a_run_and_give_the_runner_its_options(tmp_path):
    config, resume = parse_config(
        Config, argv=["--run-root", str(tmp_path), "--console", "plain"]
    )
    assert resume is None and config.run == RunSettings(str(tmp_path), "plain")
    seeds = Seeds.from_master(config.seed, n_envs=1)
    run = config.run.open_run("demo", config, seeds, resume)
    assert run.path.parent == tmp_path and run.path.name.startswith("demo")
    saved = json.loads(run.config_path.read_text())
    assert saved["run"] == {
        "run_root": str(tmp_path),
        "console": "plain",
        "wandb_project": None,
    }
    options = config.run.runner_options(run, config, config.total_steps, resume)
    try:
        assert options["checkpoint_dir"] == run.checkpoints_dir
        assert options["config"] == dataclasses.asdict(config)
        options["logger"].log(8, {"train/return_mean": 1.0})
    finally:
        options["logger"].close()
    assert (run.progress_csv).is_file()
    again = config.run.open_run("demo", config, seeds, str(run.path))
    assert again.path == run.path and isinstance(again, RunDirectory)
    resumed, _ = parse_config(Config, argv=["--resume", str(run.path)])
    assert resumed == config  # the nested settings come back from config.json
