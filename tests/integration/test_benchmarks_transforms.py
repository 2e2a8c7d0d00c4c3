"""The transforms benchmark runs in quick mode and prints its JSON summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO_ROOT, "benchmarks", "transforms_bench.py")


@pytest.mark.slow  # ~9 s (numba compiles, torchrl); tests/transforms test the GAE
@pytest.mark.timeout(120)
def test_quick_benchmark_prints_expected_json():
    out = subprocess.run(
        [sys.executable, SCRIPT, "--quick"],
        capture_output=True,
        text=True,
        check=True,
        timeout=110,
    )
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    expected = {
        f"gae_{t}x{b}_{impl}_us"
        for t, b in ((128, 8), (2048, 16), (1024, 64))
        for impl in ("numba", "numpy_loop", "python_loop", "torchrl")
    } | {"gae_2048x16_numpy_loop_vs_numba", "gae_2048x16_vs_memcpy", "jit_compile_s"}
    expected |= {
        f"vtrace_{t}x{b}_numba_us" for t, b in ((128, 8), (2048, 16), (1024, 64))
    }
    expected |= {"vtrace_2048x16_vs_gae"}
    assert expected <= set(summary)
    for key, value in summary.items():
        if value is None:
            assert "torchrl" in key  # only torchrl may be absent
        else:
            assert isinstance(value, (int, float)) and value > 0
