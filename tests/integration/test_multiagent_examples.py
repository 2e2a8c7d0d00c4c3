"""The multi-agent examples: --quick runs, their results, and resumes."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TICTACTOE = ROOT / "examples" / "selfplay" / "train_tictactoe.py"
SPREAD = ROOT / "examples" / "multiagent" / "train_ppo_spread.py"


def _run(
    cwd: Path, *args: str, script: Path = TICTACTOE
) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, str(script), "--quick", "--console", "plain", *args],
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
            exact = [
                results[f"eval/{opponent}_seat{seat}_{o}_exact"]
                for o in ("win", "draw", "loss")
            ]
            assert abs(sum(rates) - 1.0) < 1e-9 and abs(sum(exact) - 1.0) < 1e-9
        assert results[f"eval/minimax_seat{seat}_win"] == 0.0  # minimax never loses
        assert results[f"eval/minimax_seat{seat}_win_exact"] == 0.0
    assert "self-play, last games: win" in done.stdout
    assert (run_dir / "learning_curve.png").is_file()  # the rates, not the 0 return
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


def _progress(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "logs" / "progress.csv", newline="") as file:
        return list(csv.DictReader(file))


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_spread_quick_run_logs_team_and_agent_returns_and_resumes(tmp_path):
    pytest.importorskip("mpe2")
    done = _run(tmp_path, script=SPREAD)
    assert "eval return" in done.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    rows = _progress(run_dir)
    last = rows[-1]
    assert float(last["time/env_steps"]) == 512
    team, agent = (
        float(last["train/return_mean"]),
        float(last["train/agent_return_mean"]),
    )
    assert team < 0 and agent < 0  # simple_spread's rewards are distances (negative)
    assert abs(team - 3 * agent) < abs(team) * 0.5  # 3 agents share the team reward
    # the evaluation's episodes are MultiAgentTrajInfos: per-agent returns too
    eval_team, eval_agent = (
        float(last["eval/return_mean"]),
        float(last["eval/agent_return_mean"]),
    )
    assert eval_team < 0 and abs(eval_team - 3 * eval_agent) < abs(eval_team) * 0.5
    assert (run_dir / "learning_curve.png").is_file()
    assert sorted((run_dir / "checkpoints").glob("checkpoint_*.pt"))
    _run(tmp_path, "--resume", str(run_dir), "--total-steps", "768", script=SPREAD)
    assert float(_progress(run_dir)[-1]["time/env_steps"]) == 768
