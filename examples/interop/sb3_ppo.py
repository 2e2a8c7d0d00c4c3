"""Stable-Baselines3 PPO on CartPole-v1, over parllel's SB3 vector env.

SB3 trains as usual; the only parllel line creates the training envs:
``make_sb3_vec_env`` returns an SB3 ``VecEnv`` with ``DummyVecEnv``'s
semantics, its envs stepped in worker processes or in this process. The
hyperparameters are the RL Zoo's for CartPole-v1. At the end, SB3's
``evaluate_policy`` runs deterministic episodes on a separate env.

    python examples/interop/sb3_ppo.py           # solves CartPole-v1
    python examples/interop/sb3_ppo.py --quick   # a few updates, seconds
    python examples/interop/sb3_ppo.py --help    # every Config field is a flag

Needs Stable-Baselines3 (``pip install -e ".[sb3]"``). Last line: one JSON
object: ``eval_mean_return`` and ``eval_std_return`` (over
``eval_episodes``), ``solved`` (eval mean >= 475), ``train_mean_return`` (the
last training episodes SB3 kept, up to 100), ``env_steps``, ``seconds``
(training only) and ``eval_seconds``.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time

import gymnasium as gym
import numpy as np
import torch
import tyro

SOLVED_RETURN = 475.0


@dataclasses.dataclass
class Config:
    seed: int = 0
    """seed of SB3 (python, numpy, torch) and of the training envs"""
    n_envs: int = 8
    """environments stepped side by side"""
    batch_T: int = 32
    """steps per env per rollout (SB3's n_steps; 8 x 32 = 256 per update)"""
    total_steps: int = 102_400
    """env steps to train for (400 updates)"""
    batch_size: int = 256
    """minibatch size"""
    epochs: int = 20
    """passes over each rollout"""
    gamma: float = 0.98
    """discount factor"""
    gae_lambda: float = 0.8
    """GAE lambda"""
    learning_rate: float = 1e-3
    """initial learning rate (decays linearly to 0)"""
    clip_range: float = 0.2
    """initial PPO clip range (decays linearly to 0)"""
    entropy_coef: float = 0.0
    """weight of the entropy bonus"""
    eval_episodes: int = 10
    """deterministic evaluation episodes at the end"""
    verbose: int = 0
    """SB3's verbosity (1: a table after every rollout)"""


QUICK = dict(total_steps=1024, epochs=2, eval_episodes=2)
"""the --quick preset: 4 updates of 2 epochs, 2 evaluation episodes"""


def parse_args(argv: list[str] | None = None) -> Config:
    """The config from the command line; ``--quick`` starts from :data:`QUICK`."""
    argv = sys.argv[1:] if argv is None else list(argv)
    quick = "--quick" in argv
    default = Config(**QUICK) if quick else Config()
    args = [arg for arg in argv if arg != "--quick"]
    description = f"{__doc__}\n--quick: a tiny run ({QUICK})"
    return tyro.cli(Config, args=args, default=default, description=description)


def linear(initial: float):
    """SB3 schedule: ``initial`` times the remaining progress (1 -> 0)."""
    return lambda progress_remaining: progress_remaining * initial


def main(config: Config) -> dict:
    # SB3 is imported here so that --help works without it
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecMonitor

    from parllel.interop import make_sb3_vec_env

    torch.set_num_threads(1)

    # the training envs: the one parllel line (VecMonitor records episodes)
    envs = make_sb3_vec_env(
        lambda: gym.make("CartPole-v1"), config.n_envs, seed=config.seed
    )
    envs = VecMonitor(envs)
    model = PPO(
        "MlpPolicy",
        envs,
        n_steps=config.batch_T,
        batch_size=config.batch_size,
        n_epochs=config.epochs,
        gamma=config.gamma,
        gae_lambda=config.gae_lambda,
        learning_rate=linear(config.learning_rate),
        clip_range=linear(config.clip_range),
        ent_coef=config.entropy_coef,
        seed=config.seed,
        device="cpu",
        verbose=config.verbose,
    )

    start = time.perf_counter()
    model.learn(config.total_steps)
    seconds = time.perf_counter() - start
    envs.close()

    # evaluate on a separate env (SB3's own, with a Monitor)
    eval_env = make_vec_env("CartPole-v1", n_envs=1, seed=config.seed + 1000)
    start = time.perf_counter()
    mean_return, std_return = evaluate_policy(
        model, eval_env, n_eval_episodes=config.eval_episodes, deterministic=True
    )
    eval_seconds = time.perf_counter() - start
    eval_env.close()

    train_returns = [info["r"] for info in model.ep_info_buffer]
    summary = {
        "eval_mean_return": float(mean_return),
        "eval_std_return": float(std_return),
        "solved": bool(mean_return >= SOLVED_RETURN),
        "train_mean_return": float(np.mean(train_returns)) if train_returns else None,
        "env_steps": int(model.num_timesteps),
        "seconds": round(seconds, 2),
        "eval_seconds": round(eval_seconds, 2),
    }
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main(parse_args())
