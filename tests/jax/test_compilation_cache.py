"""enable_compilation_cache: compiled programs kept on disk and loaded again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("jax")

from parllel.jax.compilation_cache import (  # noqa: E402
    CACHE_ENV,
    default_cache_dir,
    enable_compilation_cache,
)

# a fresh process: the cache directory is read when JAX first compiles
SCRIPT = """
import sys, time
import jax, jax.numpy as jnp
from jax._src import monitoring
from parllel.jax.compilation_cache import enable_compilation_cache
hits = []
monitoring.register_event_listener(
    lambda event, **kw: hits.append(event) if "cache_hits" in event else None
)
enable_compilation_cache(sys.argv[1])
f = jax.jit(lambda x: jnp.tanh(x @ x.T).sum())
print(float(f(jnp.ones((8, 8)))))
print("hits", len(hits))
"""


def _run(directory: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(directory)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return done.stdout.split()


def test_second_process_loads_what_the_first_compiled(tmp_path: Path) -> None:
    first = _run(tmp_path)
    assert any(tmp_path.iterdir()), "the first process wrote no cache entry"
    second = _run(tmp_path)
    assert first[0] == second[0]  # the same result
    assert first[-1] == "0" and int(second[-1]) >= 1, (first, second)


def test_default_directory_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "named"))
    assert default_cache_dir() == tmp_path / "named"
    monkeypatch.setenv(CACHE_ENV, "off")
    assert default_cache_dir() is None
    assert enable_compilation_cache() is None
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "parllel" / "jax"
