"""Without jax installed, parllel.jax names the extra that installs it."""

from __future__ import annotations

import subprocess
import sys

BLOCKED = """
import sys
sys.modules["{name}"] = None  # as if not installed
try:
    import parllel.jax
except ImportError as error:
    print(type(error).__name__, error)
"""


def test_parllel_jax_without_jax_names_the_extra() -> None:
    for name in ("jax", "optax"):
        result = subprocess.run(
            [sys.executable, "-c", BLOCKED.format(name=name)],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        assert result.stdout.startswith("MissingDependencyError"), result.stdout
        assert name in result.stdout
        assert 'pip install -e ".[jax]"' in result.stdout
