"""JAX tests run on the CPU (the device machine's accelerator is for benchmarks)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")

pytest.importorskip("jax")
pytest.importorskip("flax")
pytest.importorskip("optax")
