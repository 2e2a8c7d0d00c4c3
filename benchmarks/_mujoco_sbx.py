"""The SBX side of ``train_mujoco.py``: SBX's (sbx-rl, "SB3 in JAX") PPO and SAC.

The settings are SB3's side's (``_mujoco_sb3.py``), as far as SBX takes
them; :data:`SBX_PPO_DIFFERENCES` and :data:`SBX_SAC_DIFFERENCES` say where
it cannot (the benchmark prints them). JAX is imported inside the functions,
so the caller sets ``XLA_FLAGS`` (the learner's threads) first.
"""

from __future__ import annotations

from _mujoco_sb3 import Timed, learn_timed, make_vec

SBX_PPO_DIFFERENCES = (
    "SBX PPO: no value clipping (clip_range_vf is accepted and ignored); "
    "orthogonal init of the action head only (gain 0.01; hidden layers and "
    "the value head keep flax's default); actor and critic are separate "
    "Adams, each clipped at grad norm 0.5 (SB3: one global norm); advantages "
    "standardized with the population std"
)
"""where SBX's PPO cannot take SB3's side's settings"""

SBX_SAC_DIFFERENCES = (
    "SBX SAC: the temperature's learning rate is the actor's (3e-4; SB3's "
    "side 1e-3); flax's default initialization"
)
"""where SBX's SAC cannot take SB3's side's settings"""


def run_sbx_ppo(hp: dict, seed: int, vec: str) -> Timed:
    """SBX's PPO with ``hp`` (CleanRL's MuJoCo settings) under VecNormalize."""
    import flax.linen as nn
    from sbx import PPO
    from stable_baselines3.common.vec_env import VecNormalize

    venv = make_vec(hp["env_id"], hp["n_envs"], seed, vec, hp["episode_steps"])
    venv = VecNormalize(
        venv, gamma=hp["gamma"], clip_obs=hp["clip"], clip_reward=hp["clip"]
    )
    lr = hp["learning_rate"]
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=hp["n_steps"],
        batch_size=hp["n_envs"] * hp["n_steps"] // hp["minibatches"],
        n_epochs=hp["epochs"],
        gamma=hp["gamma"],
        gae_lambda=hp["gae_lambda"],
        learning_rate=lambda remaining: lr * remaining,
        clip_range=hp["clip_range"],
        ent_coef=0.0,
        vf_coef=0.25,  # as SB3's side (a separate Adam: it scales the clip only)
        max_grad_norm=0.5,
        policy_kwargs=dict(
            net_arch=dict(pi=[64, 64], vf=[64, 64]),
            activation_fn=nn.tanh,
            log_std_init=0.0,
            ortho_init=True,
            optimizer_kwargs=dict(eps=1e-5),
        ),
        seed=seed,
        verbose=0,
    )
    return learn_timed(model, hp["total_steps"], venv)


def run_sbx_sac(hp: dict, seed: int) -> Timed:
    """SBX's SAC with ``hp``: one env, one update per step, separate actor lr."""
    from sbx import SAC

    venv = make_vec(hp["env_id"], 1, seed, "dummy", hp["episode_steps"])
    model = SAC(
        "MlpPolicy",
        venv,
        learning_rate=hp["policy_lr"],
        qf_learning_rate=hp["q_lr"],
        buffer_size=hp["replay_size"],
        learning_starts=hp["learning_starts"],
        batch_size=hp["batch_size"],
        tau=hp["tau"],
        gamma=hp["gamma"],
        train_freq=1,
        gradient_steps=1,
        ent_coef="auto_1.0",
        policy_kwargs=dict(net_arch=[256, 256]),
        seed=seed,
        verbose=0,
    )
    return learn_timed(model, hp["total_steps"], venv)
