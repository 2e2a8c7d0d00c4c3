"""The Stable-Baselines3 side of ``train_mujoco.py``: PPO and SAC on a MuJoCo env.

Each run returns a :class:`Timed`: training wall time, env steps, seconds in
sampling (``collect_rollouts``) and in updates (``train``), and the returns
of the training episodes (from SB3's ``Monitor``: raw rewards).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Timed:
    """One training run: wall seconds, env steps, phase seconds (in all, and
    of each phase's first call: a JIT backend compiles there), episode returns."""

    seconds: float = 0.0
    steps: int = 0
    phases: dict[str, float] = field(default_factory=dict)
    firsts: dict[str, float] = field(default_factory=dict)
    returns: list[float] = field(default_factory=list)

    def add(self, phase: str, seconds: float) -> None:
        self.phases[phase] = self.phases.get(phase, 0.0) + seconds
        self.firsts.setdefault(phase, seconds)


def _time_method(obj: Any, name: str, timed: Timed, phase: str) -> None:
    """Make ``obj.name(...)`` add its wall time to ``timed``'s ``phase``."""
    method = getattr(obj, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            timed.add(phase, time.perf_counter() - start)

    setattr(obj, name, wrapper)


def make_vec(env_id: str, n_envs: int, seed: int, vec: str, episode_steps: Any) -> Any:
    """SB3's vector env: ``vec`` is ``dummy`` (one process) or ``subproc``."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    kwargs = {} if episode_steps is None else {"max_episode_steps": episode_steps}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is out of date.*")
        return make_vec_env(
            env_id,
            n_envs=n_envs,
            seed=seed,
            env_kwargs=kwargs,
            vec_env_cls=DummyVecEnv if vec == "dummy" else SubprocVecEnv,
        )


def vec_step_seconds(env_id: str, n_envs: int, steps: int, vec: str) -> float:
    """Seconds per ``step`` call of SB3's ``vec`` vector env (random actions)."""
    venv = make_vec(env_id, n_envs, 0, vec, None)
    try:
        venv.reset()
        actions = np.stack([venv.action_space.sample() for _ in range(n_envs)])
        venv.step(actions)  # warm-up
        start = time.perf_counter()
        for _ in range(steps):
            venv.step(actions)
        return (time.perf_counter() - start) / steps
    finally:
        venv.close()


def learn_timed(model: Any, total_steps: int, venv: Any) -> Timed:
    """``model.learn(total_steps)``, timed (its sampling and updates apart);
    ``venv`` is closed afterwards."""
    timed = Timed()
    try:
        _time_method(model, "collect_rollouts", timed, "sample")
        _time_method(model, "train", timed, "update")
        start = time.perf_counter()
        model.learn(total_steps)
        timed.seconds = time.perf_counter() - start
        timed.steps = int(model.num_timesteps)
        timed.returns = [float(info["r"]) for info in model.ep_info_buffer]
    finally:
        venv.close()
    return timed


def normalized_vec(hp: dict, seed: int, vec: str) -> Any:
    """The PPO runs' vector env: ``hp``'s envs under VecNormalize."""
    from stable_baselines3.common.vec_env import VecNormalize

    venv = make_vec(hp["env_id"], hp["n_envs"], seed, vec, hp["episode_steps"])
    return VecNormalize(
        venv, gamma=hp["gamma"], clip_obs=hp["clip"], clip_reward=hp["clip"]
    )


def ppo_options(hp: dict, seed: int) -> dict[str, Any]:
    """The PPO settings SB3's and SBX's side share (CleanRL's MuJoCo ones)."""
    lr = hp["learning_rate"]
    return dict(
        n_steps=hp["n_steps"],
        batch_size=hp["n_envs"] * hp["n_steps"] // hp["minibatches"],
        n_epochs=hp["epochs"],
        gamma=hp["gamma"],
        gae_lambda=hp["gae_lambda"],
        learning_rate=lambda remaining: lr * remaining,
        clip_range=hp["clip_range"],
        ent_coef=0.0,
        # CleanRL's 0.5 x (0.5 x MSE); SB3's value loss is the MSE (SBX: a
        # separate Adam, where it scales the clip only)
        vf_coef=0.25,
        max_grad_norm=0.5,
        seed=seed,
        verbose=0,
    )


def sac_options(hp: dict, seed: int) -> dict[str, Any]:
    """The SAC settings SB3's and SBX's side share: one update per step."""
    return dict(
        buffer_size=hp["replay_size"],
        learning_starts=hp["learning_starts"],
        batch_size=hp["batch_size"],
        tau=hp["tau"],
        gamma=hp["gamma"],
        train_freq=1,
        gradient_steps=1,
        ent_coef="auto_1.0",
        seed=seed,
        verbose=0,
    )


def run_ppo(hp: dict, seed: int, vec: str, fused_adam: bool) -> Timed:
    """SB3's PPO with ``hp`` (CleanRL's MuJoCo settings) under VecNormalize."""
    import torch
    from stable_baselines3 import PPO

    venv = normalized_vec(hp, seed, vec)
    model = PPO(
        "MlpPolicy",
        venv,
        clip_range_vf=hp["clip_range"],
        policy_kwargs=dict(
            net_arch=dict(pi=[64, 64], vf=[64, 64]),
            activation_fn=torch.nn.Tanh,
            log_std_init=0.0,
            optimizer_kwargs=dict(eps=1e-5, fused=fused_adam),
        ),
        device="cpu",
        **ppo_options(hp, seed),
    )
    return learn_timed(model, hp["total_steps"], venv)


def run_sac(hp: dict, seed: int, fused_adam: bool) -> Timed:
    """SB3's SAC with ``hp``: one env, one update per step, separate actor lr."""
    from stable_baselines3 import SAC

    policy_lr = hp["policy_lr"]

    class SeparateActorLR(SAC):
        """SB3's SAC sets one learning rate for all; the actor's is set apart."""

        def _update_learning_rate(self, optimizers: Any) -> None:
            super()._update_learning_rate(optimizers)
            for group in self.actor.optimizer.param_groups:
                group["lr"] = policy_lr

    venv = make_vec(hp["env_id"], 1, seed, "dummy", hp["episode_steps"])
    model = SeparateActorLR(
        "MlpPolicy",
        venv,
        learning_rate=hp["q_lr"],
        policy_kwargs=dict(
            net_arch=[256, 256], optimizer_kwargs=dict(fused=fused_adam)
        ),
        device="cpu",
        **sac_options(hp, seed),
    )
    return learn_timed(model, hp["total_steps"], venv)
