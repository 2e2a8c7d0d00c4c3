"""JAX's persistent compilation cache for parllel's JAX runs."""

from __future__ import annotations

import os
from pathlib import Path

import jax

__all__ = ["CACHE_ENV", "default_cache_dir", "enable_compilation_cache"]

CACHE_ENV = "PARLLEL_JAX_CACHE_DIR"
"""Environment variable naming the cache directory (``off`` disables it)."""


def default_cache_dir() -> Path | None:
    """``$PARLLEL_JAX_CACHE_DIR``, else ``$XDG_CACHE_HOME/parllel/jax`` (or
    ``~/.cache/parllel/jax``); None when the variable is ``off``."""
    named = os.environ.get(CACHE_ENV)
    if named is not None:
        return None if named.strip().lower() in ("off", "0", "") else Path(named)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "parllel" / "jax"


def enable_compilation_cache(directory: str | Path | None = None) -> Path | None:
    """Keep every compiled program on disk, so a later run with the same
    shapes loads it instead of compiling (a JAX PPO run's ~6 s of compiles
    become ~1 s on this CPU: docs/jax.md). Call it before the first jitted
    call; returns the directory, or None when ``PARLLEL_JAX_CACHE_DIR=off``.

    Example:
        >>> enable_compilation_cache()  # ~/.cache/parllel/jax
    """
    path = Path(directory) if directory is not None else default_cache_dir()
    if path is None:
        return None
    path.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    # parllel's small programs (a policy step, an init) each compile in well
    # under JAX's default 1 s threshold, yet together cost seconds per run
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return path
