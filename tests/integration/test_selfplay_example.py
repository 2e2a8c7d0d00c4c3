"""examples/selfplay/train_tictactoe.py: a --quick run, its judged results, and a resume."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "selfplay" / "train_tictactoe.py"


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--console", "plain", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=200,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    return done


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_tictactoe_selfplay_quick_run_judges_and_resumes(tmp_path):
    pytest.importorskip("pettingzoo")
    pytest.importorskip("openskill")
    done = _run(tmp_path)
    assert "Illegal move" not in done.stdout + done.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    results = json.loads((run_dir / "results.json").read_text())
    for seat in (0, 1):
        for opponent in ("random", "minimax"):
            rates = [
                results[f"eval/{opponent}_seat{seat}_{o}"]
                for o in ("win", "draw", "loss")
            ]
            assert abs(sum(rates) - 1.0) < 1e-9
        assert results[f"eval/minimax_seat{seat}_win"] == 0.0  # minimax never loses
    with open(run_dir / "logs" / "progress.csv", newline="") as file:
        rows = list(csv.DictReader(file))
    assert float(rows[-1]["time/env_steps"]) == 2048
    assert float(rows[-1]["selfplay/games"]) > 0
    pool_size = float(rows[-1]["selfplay/pool_size"])

    _run(tmp_path, "--resume", str(run_dir), "--total-steps", "3072")
    with open(run_dir / "logs" / "progress.csv", newline="") as file:
        resumed = list(csv.DictReader(file))
    assert float(resumed[-1]["time/env_steps"]) == 3072
    assert float(resumed[-1]["selfplay/pool_size"]) >= pool_size  # the pool came back
