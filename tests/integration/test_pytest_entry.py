"""Bare ``pytest`` (not only ``python -m pytest``) imports the ``tests.*`` helpers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("cwd", [ROOT, ROOT / "tests"])
def test_bare_pytest_collects_tests_that_import_helpers(cwd: Path) -> None:
    """``pytest FILE`` from the root or from tests/ collects a helper-importing file."""
    exe = shutil.which("pytest", path=str(Path(sys.executable).parent)) or shutil.which(
        "pytest"
    )
    if exe is None:
        pytest.skip("no pytest executable on PATH")
    target = ROOT / "tests" / "replays" / "test_replays_nstep.py"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [exe, str(target), "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "error" not in result.stdout.lower().splitlines()[-1]
