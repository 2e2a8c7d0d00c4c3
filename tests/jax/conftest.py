"""JAX tests run on the CPU (the device machine's accelerator is for benchmarks).

``shared_compilations`` (module scope) keeps compiled programs in a
persistent cache for the module: tests that build the same jitted update
(two PPOs of one configuration, several handlers of one agent) compile it once.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")

jax = pytest.importorskip("jax")
pytest.importorskip("flax")
pytest.importorskip("optax")


@pytest.fixture(scope="module")
def shared_compilations(tmp_path_factory):
    """Compile each distinct program once per module (a persistent cache)."""
    from jax._src import compilation_cache

    options = {
        "jax_compilation_cache_dir": str(tmp_path_factory.mktemp("xla_cache")),
        "jax_persistent_cache_min_compile_time_secs": 0.0,
        "jax_persistent_cache_min_entry_size_bytes": 0,
    }
    before = {name: getattr(jax.config, name) for name in options}
    for name, value in options.items():
        jax.config.update(name, value)
    compilation_cache.reset_cache()  # read the settings again
    yield
    for name, value in before.items():
        jax.config.update(name, value)
    compilation_cache.reset_cache()
