"""Atari PPO learning check: ``examples/atari/train_ppo.py`` against SB3's PPO.

Both sides train with CleanRL's ``ppo_atari`` settings for the same env-step
budget: 8 envs x 128 steps (1,024 samples per update), 4 epochs of 4
minibatches, Adam learning rate 2.5e-4 decaying linearly to 0, gamma 0.99,
GAE lambda 0.95, clip range 0.1, entropy 0.01, value term 0.5, gradient norm
0.5, the Nature CNN with a 512-unit layer. The envs are the standard stack on
both sides: ALE v5 with ``frameskip=1`` and no sticky actions, no-op reset up
to 30, frame skip 4 with max-pooling, FIRE reset, 84x84 grayscale, 4 stacked
frames, an episode per lost life for training, rewards clipped to [-1, 1]
(parllel: :func:`parllel.envs.atari.make_atari_env`; SB3: its
``make_atari_env`` and ``VecFrameStack(4)``). Both step their envs in the
training process (``--parallel serial`` / ``DummyVecEnv``), torch on one
thread, each run in its own process, ``--jobs`` at a time (seeds
interleaved, so both libraries see the same load).

Per run: the mean raw game return (whole games, not lives) of the last 100
training games, the wall time of the run (parllel's includes the runner's
one evaluation at the end, 4 games cut at 4,000 frames: a few seconds) and
the peak resident memory of its largest process. Per library the median over seeds; the ratios parllel /
SB3 with their 95% bootstrap intervals (2 seeds decide little: the verdict
says so when the interval contains 1). Last line: one JSON object with
``return_ratio``, ``wall_ratio``, ``peak_rss_ratio`` (each with ``_ci``), the
per-seed figures and ``steps``.

Usage: python benchmarks/atari_learning.py [--quick] [--env-id ID]
       [--steps N] [--seeds N] [--jobs N]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_result  # noqa: E402
from _stats import median_ratio_interval, verdict  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "atari" / "train_ppo.py"
RETURN = "train/return_mean"
GAMES = 100  # training games in the final return


def measured(command: list[str]) -> tuple[float, int, str]:
    """Run ``command`` in a child that reports its descendants' peak RSS.

    Returns (wall seconds, peak RSS of the largest process in bytes, stdout).
    """
    wrapper = (
        "import resource, subprocess, sys; "
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
        "sys.stdout.write(done.stdout); sys.stderr.write(done.stderr[-3000:]); "
        "print('PEAK_RSS_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
        "sys.exit(done.returncode)"
    )
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", wrapper, *command], capture_output=True, text=True
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{command[:4]} failed:\n{done.stderr[-3000:]}")
    lines = done.stdout.splitlines()
    peak = [int(line.split()[1]) for line in lines if line.startswith("PEAK_RSS_KB")]
    return seconds, peak[-1] * 1024, done.stdout


def run_parllel(env_id: str, seed: int, steps: int, root: Path) -> dict[str, Any]:
    """One run of the example (serial cages, no evaluation) into ``root``."""
    run_root = root / f"parllel-{seed}"
    command = [sys.executable, str(EXAMPLE), "--env-id", env_id, "--seed", str(seed)]
    command += ["--total-steps", str(steps), "--parallel", "serial"]
    # the runner evaluates once at the end: 4 games cut at 4,000 frames
    command += ["--eval-interval-steps", str(100 * steps), "--eval-max-frames", "4000"]
    command += ["--console", "plain", "--run-root", str(run_root)]
    seconds, peak, _ = measured(command)
    (progress,) = run_root.glob("*/logs/progress.csv")
    with progress.open() as file:
        rows = [r for r in csv.DictReader(file) if r.get(RETURN)]
    return {
        "final_return": float(rows[-1][RETURN]) if rows else float("nan"),
        "wall_s": round(seconds, 1),
        "peak_rss_mb": round(peak / 2**20, 1),
    }


def run_sb3(env_id: str, seed: int, steps: int) -> dict[str, Any]:
    """One SB3 run, in its own process (``--sb3-run``)."""
    command = [sys.executable, __file__, "--sb3-run", env_id, str(seed), str(steps)]
    seconds, peak, stdout = measured(command)
    (line,) = [line for line in stdout.splitlines() if line.startswith("{")]
    final = json.loads(line)["final_return"]
    return {
        "final_return": final,
        "wall_s": round(seconds, 1),
        "peak_rss_mb": round(peak / 2**20, 1),
    }


def sb3_train(env_id: str, seed: int, steps: int) -> None:
    """SB3's PPO with CleanRL's ppo_atari settings; prints the final return."""
    import ale_py
    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    gym.register_envs(ale_py)
    torch.set_num_threads(1)
    games: deque[float] = deque(maxlen=GAMES)

    class Games(BaseCallback):
        """Whole-game returns from the Monitor below the episodic-life wrapper."""

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    games.append(float(info["episode"]["r"]))
            return True

    env = make_atari_env(
        env_id,
        n_envs=8,
        seed=seed,
        env_kwargs={"frameskip": 1, "repeat_action_probability": 0.0},
    )
    env = VecFrameStack(env, n_stack=4)
    model = PPO(
        "CnnPolicy",
        env,
        learning_rate=lambda progress: 2.5e-4 * progress,
        n_steps=128,
        batch_size=256,
        n_epochs=4,
        gamma=0.99,
        gae_lambda=0.95,
        clip_range=0.1,
        ent_coef=0.01,
        vf_coef=0.5,
        max_grad_norm=0.5,
        seed=seed,
        device="cpu",
        verbose=0,
    )
    model.learn(steps, callback=Games())
    env.close()
    final = statistics.fmean(games) if games else float("nan")
    print(json.dumps({"final_return": final, "games": len(games)}))


def summary(runs: dict[str, list[dict[str, Any]]], key: str) -> dict[str, Any]:
    """Medians per side and the ratio parllel / SB3 with its interval."""
    ours = [r[key] for r in runs["parllel"]]
    theirs = [r[key] for r in runs["sb3"]]
    if not all(math.isfinite(value) for value in ours + theirs):
        # a run too short to finish a game (--quick) has no return
        return {"ours": None, "sb3": None, "ratio": None, "ci": None,
                "verdict": "no figure: a run finished no game"}  # fmt: skip
    ratio, low, high = median_ratio_interval(ours, theirs)
    said = verdict(low, high) if len(ours) > 1 else "one seed decides nothing"
    return {
        "ours": statistics.median(ours),
        "sb3": statistics.median(theirs),
        "ratio": round(ratio, 3),
        "ci": [round(low, 3), round(high, 3)],
        "verdict": said,
    }


def main() -> None:
    """Run both libraries over the seeds and print the comparison."""
    if len(sys.argv) == 5 and sys.argv[1] == "--sb3-run":
        sb3_train(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny run (a minute)")
    parser.add_argument("--env-id", default="ALE/Breakout-v5")
    parser.add_argument("--steps", type=int, default=150_528)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    if args.quick:
        args.steps, args.seeds = 2048, 1
    jobs = [(lib, seed) for seed in range(args.seeds) for lib in ("parllel", "sb3")]
    runs: dict[str, list[dict[str, Any]]] = {"parllel": [], "sb3": []}
    with tempfile.TemporaryDirectory() as tmp:

        def one(job: tuple[str, int]) -> tuple[str, int, dict[str, Any]]:
            lib, seed = job
            if lib == "parllel":
                result = run_parllel(args.env_id, seed, args.steps, Path(tmp))
            else:
                result = run_sb3(args.env_id, seed, args.steps)
            print(f"{lib} seed {seed}: {result}", flush=True)
            return lib, seed, result

        with ThreadPoolExecutor(args.jobs) as pool:
            for lib, _, result in sorted(pool.map(one, jobs), key=lambda r: r[1]):
                runs[lib].append(result)
    result: dict[str, Any] = {"env_id": args.env_id, "steps": args.steps}
    result["seeds"] = args.seeds
    for key, name in (
        ("final_return", "return"),
        ("wall_s", "wall"),
        ("peak_rss_mb", "peak_rss"),
    ):
        figures = summary(runs, key)
        print(
            f"{name}: parllel {figures['ours']} vs SB3 {figures['sb3']}: ratio "
            f"{figures['ratio']} {figures['ci']}: {figures['verdict']}"
        )
        result[f"{name}_ratio"] = figures["ratio"]
        result[f"{name}_ratio_ci"] = figures["ci"]
        result[f"parllel_{key}"] = [r[key] for r in runs["parllel"]]
        result[f"sb3_{key}"] = [r[key] for r in runs["sb3"]]
    print_result(result)


if __name__ == "__main__":
    main()
