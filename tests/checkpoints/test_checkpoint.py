"""Checkpoints: atomic writes, keep-last-K, loading, mismatch checks, RNG state."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest
import torch

from parllel.checkpoints import checkpoint as checkpoint_module
from parllel.checkpoints import files as files_module
from parllel.checkpoints.checkpoint import (
    capture_rng_state,
    check_config,
    check_state_dict,
    check_state_shapes,
    checkpoint_name,
    checkpoint_step,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
)
from parllel.checkpoints.files import atomic_write
from parllel.errors import (
    CheckpointError,
    CheckpointMismatchError,
)


def make_state(step: int) -> dict:
    model = torch.nn.Linear(3, 2)
    return {
        "model": model.state_dict(),
        "nested": {"array": np.arange(4.0) * step, "list": [1, "two", None]},
        "step": step,
    }


def test_save_and_load_nested_state(tmp_path):
    state = make_state(7)
    path = save_checkpoint(tmp_path, state, step=7)
    assert path == tmp_path / checkpoint_name(7) and checkpoint_step(path) == 7
    loaded = load_checkpoint(path)
    assert loaded["step"] == 7 and loaded["nested"]["list"] == [1, "two", None]
    np.testing.assert_array_equal(loaded["nested"]["array"], np.arange(4.0) * 7)
    torch.testing.assert_close(loaded["model"]["weight"], state["model"]["weight"])
    # a directory loads its latest checkpoint
    save_checkpoint(tmp_path, make_state(9), step=9)
    assert load_checkpoint(tmp_path)["step"] == 9


def test_keep_last_k_by_step(tmp_path):
    for step in (5, 100, 20, 1000, 300):
        save_checkpoint(tmp_path, {"s": step}, step=step, keep_last=3)
    assert [checkpoint_step(p) for p in list_checkpoints(tmp_path)] == [100, 300, 1000]
    assert latest_checkpoint(tmp_path).name == checkpoint_name(1000)
    for step in (2000, 3000):
        save_checkpoint(tmp_path, {"s": step}, step=step, keep_last=None)
    assert len(list_checkpoints(tmp_path)) == 5
    with pytest.raises(CheckpointError):
        save_checkpoint(tmp_path, {}, step=1, keep_last=0)


def test_crash_mid_write_keeps_previous_checkpoint(tmp_path, monkeypatch):
    save_checkpoint(tmp_path, {"value": 1}, step=100)

    def crashing_write(file, state):
        file.write(b"partial bytes of a checkpoint")
        raise RuntimeError("killed mid-write")

    monkeypatch.setattr(checkpoint_module, "write_state", crashing_write)
    with pytest.raises(RuntimeError, match="killed mid-write"):
        save_checkpoint(tmp_path, {"value": 2}, step=200, keep_last=1)
    monkeypatch.undo()

    assert [p.name for p in tmp_path.iterdir()] == [checkpoint_name(100)]
    assert load_checkpoint(latest_checkpoint(tmp_path)) == {"value": 1}


def test_crash_at_rename_leaves_no_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "state.bin"
    atomic_write(target, lambda file: file.write(b"old"))

    def failing_replace(source, destination):
        raise OSError("disk full")

    monkeypatch.setattr(files_module.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, lambda file: file.write(b"new"))
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ["state.bin"]
    assert target.read_bytes() == b"old"


def test_stale_temp_files_ignored_then_cleaned(tmp_path):
    save_checkpoint(tmp_path, {"v": 1}, step=1)
    stale = tmp_path / ".checkpoint_000000000002_abc.tmp"
    stale.write_bytes(b"left by a killed process")
    assert latest_checkpoint(tmp_path).name == checkpoint_name(1)
    save_checkpoint(tmp_path, {"v": 3}, step=3)
    assert not stale.exists()


def test_load_errors(tmp_path):
    with pytest.raises(CheckpointError):
        load_checkpoint(tmp_path / "nope.pt")
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_checkpoint(tmp_path)
    assert latest_checkpoint(tmp_path / "missing") is None
    (tmp_path / "foreign.pt").write_bytes(pickle.dumps({"weights": 1}))
    with pytest.raises(CheckpointError, match="not a parllel checkpoint"):
        load_checkpoint(tmp_path / "foreign.pt")
    (tmp_path / "garbage.pt").write_bytes(b"\x00\x01")
    with pytest.raises(CheckpointError, match="could not read"):
        load_checkpoint(tmp_path / "garbage.pt")
    with pytest.raises(CheckpointError):
        checkpoint_step(tmp_path / "foreign.pt")


def test_run_directory_layout_is_accepted(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    save_checkpoint(tmp_path, {"v": 1}, step=10)
    assert (tmp_path / "checkpoints" / checkpoint_name(10)).is_file()
    assert latest_checkpoint(tmp_path) == tmp_path / "checkpoints" / checkpoint_name(10)


def test_state_dict_mismatch_names_parameter_and_shapes():
    saved = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.Linear(64, 2))
    current = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.Linear(64, 2))
    check_state_dict(saved.state_dict(), saved)  # same model passes
    with pytest.raises(CheckpointMismatchError) as info:
        check_state_dict(saved.state_dict(), current, name="policy")
    message = str(info.value)
    assert "'0.weight'" in message
    assert (
        "(64, 4) in the checkpoint" in message
        and "(64, 8) in the current policy" in message
    )
    assert "'0.bias'" not in message and "'1.weight'" not in message

    bigger = torch.nn.Sequential(current, torch.nn.Linear(2, 1))
    with pytest.raises(
        CheckpointMismatchError, match="missing from the checkpoint: 1.weight"
    ):
        check_state_dict({f"0.{k}": v for k, v in current.state_dict().items()}, bigger)
    with pytest.raises(
        CheckpointMismatchError, match="not in the current model: extra"
    ):
        check_state_dict({**saved.state_dict(), "extra": torch.zeros(1)}, saved)


def test_counted_entries_may_differ_in_count_not_in_items():
    """A sparse table's rows (``counted``) may number differently, nothing else."""

    def state(rows, item=(3,), dtype=np.float32, fixed=4):
        return {
            "fixed": np.zeros(fixed),
            "table": {
                "index": np.zeros(rows, np.int64),
                "values": {"x": np.zeros((rows, *item), dtype)},
            },
        }

    check_state_shapes(state(7), state(0), name="replay", counted=["table"])
    with pytest.raises(CheckpointMismatchError, match=r"'table.index': shape \(7,\)"):
        check_state_shapes(state(7), state(0), name="replay")  # not declared
    with pytest.raises(CheckpointMismatchError, match=r"'fixed': shape \(5,\)"):
        check_state_shapes(
            state(7, fixed=5), state(0), name="replay", counted=["table"]
        )
    with pytest.raises(CheckpointMismatchError) as info:
        check_state_shapes(
            state(7, item=(2,)), state(0), name="replay", counted=["table"]
        )
    assert "'table.values.x': items of shape (2,) in the checkpoint, (3,)" in str(
        info.value
    )
    with pytest.raises(
        CheckpointMismatchError, match="dtype float64 in the checkpoint"
    ):
        check_state_shapes(
            state(7, dtype=np.float64), state(0), name="replay", counted=["table"]
        )
    damaged = state(7)
    damaged["table"]["index"] = np.zeros(6, np.int64)
    with pytest.raises(CheckpointMismatchError, match="count different numbers"):
        check_state_shapes(damaged, state(0), name="replay", counted=["table"])


def test_config_mismatch_names_keys():
    saved = {
        "env": {"id": "CartPole-v1", "n_envs": 8},
        "algo": {"lr": 3e-4},
        "total_steps": 100,
    }
    current = {
        "env": {"id": "CartPole-v1", "n_envs": 16},
        "algo": {"lr": 3e-4},
        "total_steps": 500,
    }
    check_config(saved, current, ignore=["total_steps", "env.n_envs"])
    check_config(saved, current, keys=["algo", "env.id"])
    with pytest.raises(CheckpointMismatchError) as info:
        check_config(saved, current, ignore=["total_steps"])
    message = str(info.value)
    assert (
        "env.n_envs: checkpoint 8, current 16" in message
        and "total_steps" not in message
    )
    with pytest.raises(
        CheckpointMismatchError, match="algo.clip: checkpoint <absent>, current 0.2"
    ):
        check_config(
            saved, {**current, "algo": {"lr": 3e-4, "clip": 0.2}}, keys=["algo"]
        )


def test_config_keys_with_what_they_fix_say_it():
    saved = {"envs": "gymnasium", "env": {"id": "Pong", "frameskip": 4}}
    current = {"envs": "envpool", "env": {"id": "Pong", "frameskip": 2}}
    keys = {"envs": "episodes: a lost life or a whole game", "env": "the env"}
    with pytest.raises(CheckpointMismatchError) as info:
        check_config(saved, current, keys=keys)
    message = str(info.value)
    assert (
        "envs: checkpoint 'gymnasium', current 'envpool' "
        "(episodes: a lost life or a whole game)" in message
    )
    assert "env.frameskip: checkpoint 4, current 2 (the env)" in message


def test_config_lists_and_empty_dicts_are_compared_whole():
    saved = {"model": {"sizes": [64, 64], "extra": {}}}
    check_config(saved, {"model": {"sizes": [64, 64], "extra": {}}})
    with pytest.raises(
        CheckpointMismatchError,
        match=r"model.sizes: checkpoint \[64, 64\], current \[64, 64, 64\]",
    ):
        check_config(saved, {"model": {"sizes": [64, 64, 64], "extra": {}}})
    with pytest.raises(
        CheckpointMismatchError, match="model.extra: checkpoint {}, current <absent>"
    ):
        check_config(saved, {"model": {"sizes": [64, 64]}})


def draws(generator):
    return (
        random.random(),
        np.random.rand(3).tolist(),
        torch.rand(3).tolist(),
        generator.normal(size=3).tolist(),
    )


def test_rng_state_round_trip_gives_identical_draws(tmp_path):
    generator = np.random.default_rng(5)
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    draws(generator)
    snapshot = capture_rng_state(generator)
    save_checkpoint(tmp_path, {"rng": snapshot}, step=1)
    expected = draws(generator)
    draws(generator)  # move everything on
    restore_rng_state(load_checkpoint(tmp_path)["rng"], generator)
    assert draws(generator) == expected

    with pytest.raises(CheckpointMismatchError, match="no generator"):
        restore_rng_state(capture_rng_state(), generator)
    with pytest.raises(CheckpointMismatchError, match="PCG64"):
        restore_rng_state(snapshot, np.random.Generator(np.random.MT19937(0)))


def test_generators_round_trip_by_name(tmp_path):
    actions = torch.Generator().manual_seed(7)
    torch.rand(5, generator=actions)
    snapshot = capture_rng_state(generators={"actions": actions})
    save_checkpoint(tmp_path, {"rng": snapshot}, step=1)
    expected = torch.rand(4, generator=actions)
    torch.rand(9, generator=actions)  # move it on
    restore_rng_state(load_checkpoint(tmp_path)["rng"], generators={"actions": actions})
    assert torch.equal(torch.rand(4, generator=actions), expected)

    # a snapshot without it is refused before anything is restored
    torch.manual_seed(3)
    global_state = torch.get_rng_state()
    with pytest.raises(CheckpointMismatchError, match=r"\['actions'\].*seed="):
        restore_rng_state(
            capture_rng_state() | {"backends": {"torch": {"cpu": global_state * 0}}},
            generators={"actions": actions},
        )
    assert torch.equal(torch.get_rng_state(), global_state)
