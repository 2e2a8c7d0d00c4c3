"""Run directories: layout, config/metadata contents, open for resume."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import parllel
from parllel.checkpoints.checkpoint import save_checkpoint
from parllel.errors import ConfigError, RunDirectoryError
from parllel.runners.run_directory import RunDirectory, to_jsonable
from parllel.seeding import Seeds


class Mode(enum.Enum):
    FAST = "fast"


@dataclasses.dataclass
class EnvConfig:
    id: str = "CartPole-v1"
    n_envs: int = 8


@dataclasses.dataclass
class Config:
    env: EnvConfig = dataclasses.field(default_factory=EnvConfig)
    lr: float = 3e-4
    hidden: tuple[int, ...] = (64, 64)
    gamma: np.float32 = dataclasses.field(default_factory=lambda: np.float32(0.5))
    mode: Mode = Mode.FAST
    out: Path = Path("/tmp/out")
    activation: type = torch.nn.Tanh
    odd: object = dataclasses.field(default_factory=lambda: object())


STAMP = datetime.datetime(2025, 1, 2, 3, 4, 5)


def test_create_layout_and_files(tmp_path):
    seeds = Seeds.from_master(42, n_envs=2)
    run = RunDirectory.create(
        tmp_path / "runs",
        "ppo",
        config=Config(),
        seeds=seeds,
        metadata={"note": "smoke"},
        timestamp=STAMP,
    )
    assert run.path == tmp_path / "runs" / "ppo-20250102-030405"
    assert run.name == "ppo-20250102-030405"
    assert sorted(p.name for p in run.path.iterdir()) == [
        "checkpoints",
        "config.json",
        "logs",
        "metadata.json",
    ]
    config = json.loads(run.config_path.read_text())
    assert config["env"] == {"id": "CartPole-v1", "n_envs": 8}
    assert config["hidden"] == [64, 64] and config["gamma"] == 0.5
    assert config["mode"] == "fast" and config["out"] == "/tmp/out"
    assert config["activation"] == "torch.nn.modules.activation.Tanh"
    assert config["odd"].startswith("<object object")
    assert run.read_config() == config

    metadata = run.read_metadata()
    assert metadata["note"] == "smoke"
    assert metadata["seeds"]["master"] == 42 and run.seeds() == seeds
    assert metadata["versions"]["numpy"] == np.__version__
    assert (
        metadata["versions"]["torch"].split("+")[0] == torch.__version__.split("+")[0]
    )
    assert metadata["versions"]["python"] == ".".join(map(str, sys.version_info[:3]))
    assert {"gymnasium", "parllel"} <= set(metadata["versions"])
    # parllel's version, read from its distribution (parllel-rl)
    assert metadata["versions"]["parllel"] == parllel.__version__
    assert metadata["command"][0] == sys.executable and metadata["hostname"]
    assert "git" in metadata and "start_time" in metadata
    datetime.datetime.fromisoformat(metadata["start_time"])
    assert run.progress_csv == run.path / "logs" / "progress.csv"
    assert run.tensorboard_dir == run.path / "logs" / "tensorboard"
    assert run.learning_curve_path == run.path / "learning_curve.png"


def test_same_second_gets_a_suffix(tmp_path):
    first = RunDirectory.create(tmp_path, "a", timestamp=STAMP)
    second = RunDirectory.create(tmp_path, "a", timestamp=STAMP)
    assert second.path.name == first.path.name + "-1"
    assert first.read_config() == {}


@pytest.mark.parametrize("name", ["", "a/b", "..", "."])
def test_bad_names(tmp_path, name):
    with pytest.raises(ConfigError):
        RunDirectory.create(tmp_path, name)


def test_open_for_resume(tmp_path):
    run = RunDirectory.create(tmp_path, "run", config={"lr": 1e-3})
    assert run.latest_checkpoint() is None
    save_checkpoint(run.checkpoints_dir, {"step": 10}, step=10)
    save_checkpoint(run.path, {"step": 20}, step=20)
    reopened = RunDirectory.open(str(run.path))
    assert reopened == run
    assert reopened.latest_checkpoint().name == "checkpoint_000000000020.pt"
    reopened.record_resume(20, reopened.latest_checkpoint())
    reopened.update_metadata(finished=True)
    metadata = reopened.read_metadata()
    assert metadata["resumes"][0]["step"] == 20 and metadata["finished"] is True
    assert metadata["resumes"][0]["checkpoint"].endswith("checkpoint_000000000020.pt")


def test_open_refuses_non_run_directories(tmp_path):
    with pytest.raises(RunDirectoryError, match="missing does not exist"):
        RunDirectory.open(tmp_path / "missing")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(RunDirectoryError, match="metadata.json"):
        RunDirectory.open(tmp_path)


def test_to_jsonable_handles_arrays_and_cycles():
    assert to_jsonable(np.arange(3)) == [0, 1, 2]
    assert to_jsonable(torch.tensor([1.5])) == [1.5]
    assert to_jsonable({1: {2, 1}, "d": np.dtype("float32"), "t": torch.float32}) == {
        "1": [1, 2],
        "d": "float32",
        "t": "torch.float32",
    }
    assert isinstance(to_jsonable(np.zeros(10_000)), str)
    cyclic: dict = {}
    cyclic["self"] = cyclic
    json.dumps(to_jsonable(cyclic))


def test_record_resume_updates_config_json_and_lists_the_changes(tmp_path):
    run = RunDirectory.create(tmp_path, "run", config={"seed": 1, "total_steps": 512})
    run.record_resume(512, None, config={"seed": 1, "total_steps": 768})
    assert run.read_config() == {"seed": 1, "total_steps": 768}
    (record,) = run.read_metadata()["resumes"]
    assert record["config_changes"] == {"total_steps": [512, 768]}
