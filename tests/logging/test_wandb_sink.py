"""WandbSink in offline mode: metrics, config and metadata read back from W&B's files."""

from __future__ import annotations

import json
import math
import sys

import pytest

from parllel.errors import ConfigError, MissingDependencyError
from parllel.logging import MultiLogger
from parllel.logging.wandb_sink import WandbSink
from parllel.runners import RunDirectory
from parllel.seeding import Seeds
from tests.helpers.wandb_records import offline_run_files, read_offline_run

wandb = pytest.importorskip("wandb")

SETTINGS = {"silent": True, "x_disable_stats": True}


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """W&B offline, with its own settings and caches under tmp_path."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb-default"))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb-cache"))
    monkeypatch.setenv("WANDB_DATA_DIR", str(tmp_path / "wandb-data"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    wandb.teardown()  # W&B's settings are cached per process: start afresh
    yield
    wandb.teardown()  # stop W&B's service process


def make_sink(run, **kwargs):
    kwargs = {"mode": "offline", **kwargs}  # never online, whatever W&B cached
    return WandbSink(
        "parllel-tests", run, settings=wandb.Settings(**SETTINGS), **kwargs
    )


def written_files(run) -> list:
    """The run's ``.wandb`` files, once W&B's service wrote everything.

    ``run.finish()`` returns before W&B's service has written the records
    to disk; shutting the service down waits for it.
    """
    wandb.teardown()
    return offline_run_files(run.logs_dir)


def history_of(run) -> list[dict]:
    rows = []
    for run_file in written_files(run):
        rows += read_offline_run(run_file)["history"]
    return rows


def test_metrics_config_and_metadata_are_written(tmp_path):
    config = {"lr": 0.001, "hidden_sizes": [64, 64], "env": {"id": "CartPole-v1"}}
    run = RunDirectory.create(
        tmp_path / "runs", "wb", config=config, seeds=Seeds.from_master(3, n_envs=2)
    )
    sink = make_sink(run)
    sink.log(256, {"train/return_mean": 21.5, "algo/loss": 0.25})
    sink.log(512, {"train/return_mean": 30.0, "eval/return_mean": 50})
    sink.close()
    sink.close()  # harmless twice

    (run_file,) = written_files(run)
    written = read_offline_run(run_file)
    assert written["id"] == sink.run_id
    rows = written["history"]
    assert [row["_step"] for row in rows] == [256, 512]
    assert rows[0]["train/return_mean"] == 21.5 and rows[0]["algo/loss"] == 0.25
    assert rows[1]["eval/return_mean"] == 50 and "algo/loss" not in rows[1]
    assert written["config"]["lr"] == 0.001
    assert written["config"]["hidden_sizes"] == [64, 64]
    assert written["config"]["env"] == {"id": "CartPole-v1"}
    metadata = written["config"]["parllel_metadata"]
    assert metadata["seeds"] == run.read_metadata()["seeds"]
    assert metadata["versions"]["python"]
    state = json.loads((run.logs_dir / "wandb.json").read_text())
    assert state == {
        "project": "parllel-tests",
        "id": sink.run_id,
        "last_step": 512,
    }
    with pytest.raises(ValueError, match="after close"):
        sink.log(600, {"x": 1.0})


def test_explicit_config_and_name(tmp_path):
    run = RunDirectory.create(tmp_path / "runs", "wb", config={"lr": 1})
    sink = make_sink(run.path, config={"gamma": 0.99}, name="custom")
    assert sink.run.name == "custom"
    sink.log(1, {"x": 1.0})
    sink.close()
    (run_file,) = written_files(run)
    config = read_offline_run(run_file)["config"]
    assert config["gamma"] == 0.99 and "lr" not in config


def test_resume_continues_the_stored_run_and_skips_steps_it_has(tmp_path):
    run = RunDirectory.create(tmp_path / "runs", "wb", config={"lr": 1})
    first = make_sink(run)
    for step in (100, 200, 300):
        first.log(step, {"train/return_mean": float(step)})
    first.close()  # interrupted after step 300; the checkpoint was at step 200

    logger = MultiLogger([make_sink(run, resume=True)])
    sink = logger.loggers[0]
    assert sink.run_id == first.run_id
    logger.rewind(200)  # what Runner.load does
    run.record_resume(200, config={"lr": 2})  # a flag changed when resuming
    logger.log(300, {"train/return_mean": -1.0})  # W&B already has step 300
    logger.log(400, {"train/return_mean": 400.0})
    logger.close()
    assert sink.skipped == 1

    rows = history_of(run)
    assert [row["_step"] for row in rows] == [100, 200, 300, 400]
    assert [row["train/return_mean"] for row in rows] == [100, 200, 300, 400]
    files = written_files(run)
    assert len(files) == 2  # one local directory per segment
    segments = [read_offline_run(f) for f in files]
    assert {segment["id"] for segment in segments} == {first.run_id}
    assert [segment["config"]["lr"] for segment in segments] == [1, 2]


def test_a_new_run_without_resume_gets_a_new_id(tmp_path):
    run = RunDirectory.create(tmp_path / "runs", "wb")
    first = make_sink(run)
    first.close()
    second = make_sink(run)
    second.log(5, {"x": math.pi})
    second.close()
    assert second.run_id != first.run_id
    assert json.loads((run.logs_dir / "wandb.json").read_text())["id"] == second.run_id


def test_bad_arguments_are_named(tmp_path):
    run = RunDirectory.create(tmp_path / "runs", "wb")
    with pytest.raises(ConfigError, match="mode"):
        make_sink(run, mode="sometimes")
    with pytest.raises(ConfigError, match="'dir'"):
        make_sink(run, dir=str(tmp_path))
    make_sink(run).close()
    with pytest.raises(ConfigError, match="project 'parllel-tests'"):
        WandbSink("another", run, resume=True)


def test_missing_wandb_names_the_extra(tmp_path):
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "wandb", None)  # import wandb fails
        with pytest.raises(
            MissingDependencyError, match=r'pip install -e "\.\[wandb\]"'
        ):
            WandbSink("p", tmp_path)


def test_build_run_logger_adds_the_sink_for_a_project(tmp_path):
    from parllel.runners import build_run_logger

    run = RunDirectory.create(tmp_path / "runs", "wb", config={"lr": 1})
    logger = build_run_logger(run, 100, wandb_project="parllel-tests")
    (sink,) = [s for s in logger.loggers if isinstance(s, WandbSink)]
    logger.log(50, {"train/return_mean": 5.0})
    logger.close()
    assert sink.closed
    (run_file,) = written_files(run)
    assert [row["_step"] for row in read_offline_run(run_file)["history"]] == [50]
    plain = build_run_logger(run, 100)
    assert not any(isinstance(s, WandbSink) for s in plain.loggers)
    plain.close()
