"""The core imports no learning library; checkpoints go through the backends."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from parllel.checkpoints.checkpoint import load_checkpoint, save_checkpoint
from parllel.checkpoints.finite import nonfinite_paths, refuse_nonfinite_state
from parllel.errors import NonFiniteError

ROOT = Path(__file__).resolve().parents[2]
LIBRARIES = ("torch", "jax", "flax", "optax")


def run_python(code: str) -> str:
    """Run ``code`` in a fresh interpreter (at the repository root); its stdout."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_core_imports_no_learning_library():
    loaded = run_python(
        f"""
        import sys
        import parllel.runners, parllel.checkpoints, parllel.logging, parllel.builders
        import parllel.seeding, parllel.backends
        print(sorted(set({LIBRARIES!r}) & set(sys.modules)))
        """
    )
    assert loaded.strip() == "[]"


def test_numpy_checkpoint_round_trips_without_torch(tmp_path):
    output = run_python(
        f"""
        import sys
        import numpy as np
        from parllel.errors import NonFiniteError
        from parllel.seeding import Seeds, seed_everything
        from parllel.checkpoints import load_checkpoint, save_checkpoint
        from parllel.checkpoints.checkpoint import capture_rng_state
        from parllel.checkpoints.checkpoint import restore_rng_state
        from parllel.checkpoints.finite import refuse_nonfinite_state

        generator = seed_everything(Seeds.from_master(0, n_envs=1))
        state = {{
            "objects": {{"params": {{"w": np.arange(6.0).reshape(2, 3)}}, "n": 3}},
            "rng": capture_rng_state(generator),
        }}
        refuse_nonfinite_state(state["objects"], {str(tmp_path)!r}, 1)
        path = save_checkpoint({str(tmp_path)!r}, state, step=1)
        expected = generator.normal(size=3)
        loaded = load_checkpoint(path)
        np.testing.assert_array_equal(loaded["objects"]["params"]["w"], state["objects"]["params"]["w"])
        assert loaded["objects"]["n"] == 3
        restore_rng_state(loaded["rng"], generator)
        np.testing.assert_array_equal(generator.normal(size=3), expected)
        state["objects"]["params"]["w"][1, 2] = np.nan
        try:
            refuse_nonfinite_state(state["objects"], {str(tmp_path)!r}, 2)
        except NonFiniteError as error:
            print(error)
        print(sorted(set({LIBRARIES!r}) & set(sys.modules)))
        """
    )
    refused, loaded = output.strip().splitlines()
    assert "params.w" in refused and "checkpoint_000000000001.pt" in refused
    assert loaded == "[]"


def test_torch_checkpoint_round_trips(tmp_path):
    model = torch.nn.Linear(3, 2)
    state = {
        "model": model.state_dict(),
        "parameter": torch.nn.Parameter(torch.randn(4)),
        "half": torch.randn(2, 2).to(torch.bfloat16),
        "scalar": torch.tensor(7),
        "mask": torch.tensor([True, False]),
        "view": torch.arange(10.0)[::3],
        "array": np.ones(3, np.float32),
        "generator": torch.Generator().manual_seed(3).get_state(),
    }
    path = save_checkpoint(tmp_path, state, step=5)
    loaded = load_checkpoint(path)
    for key in ("model", "half", "scalar", "mask", "view", "generator"):
        torch.testing.assert_close(loaded[key], state[key], rtol=0, atol=0)
    assert loaded["half"].dtype == torch.bfloat16 and loaded["scalar"].shape == ()
    assert loaded["parameter"].requires_grad
    assert torch.equal(loaded["parameter"].detach(), state["parameter"].detach())
    np.testing.assert_array_equal(loaded["array"], state["array"])
    # another process reads the torch tensors back (importing torch to do so)
    output = run_python(
        f"""
        import sys
        from parllel.checkpoints import load_checkpoint
        assert "torch" not in sys.modules
        state = load_checkpoint({str(path)!r})
        print(type(state["model"]["weight"]).__name__, state["half"].dtype)
        """
    )
    assert output.split() == ["Tensor", "torch.bfloat16"]


def test_nonfinite_arrays_and_tensors_are_named(tmp_path):
    state = {
        "model": {"weight": torch.tensor([1.0, float("nan")]), "steps": torch.ones(2)},
        "normalizer": {"var": np.array([np.inf, 1.0]), "count": np.arange(3)},
        "buffer": np.array([0.0, 1.0], np.float32),
    }
    assert nonfinite_paths(state) == ["model.weight", "normalizer.var"]
    with pytest.raises(NonFiniteError, match="model.weight, normalizer.var"):
        refuse_nonfinite_state(state, tmp_path, 1)


def test_other_array_types_are_checked_without_a_backend():
    jnp = pytest.importorskip("jax.numpy")
    state = {"params": {"w": jnp.array([1.0, jnp.nan]), "steps": jnp.arange(3)}}
    assert nonfinite_paths(state) == ["params.w"]
