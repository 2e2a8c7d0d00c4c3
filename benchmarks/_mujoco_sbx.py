"""The SBX side of ``train_mujoco.py``: SBX's (sbx-rl, "SB3 in JAX") PPO and SAC.

The settings are SB3's side's (``_mujoco_sb3.py``), as far as SBX takes
them; :data:`SBX_PPO_DIFFERENCES` and :data:`SBX_SAC_DIFFERENCES` say where
it cannot (the benchmark prints them). JAX is imported inside the functions,
so the caller sets ``XLA_FLAGS`` (the learner's threads) first.
"""

from __future__ import annotations

from _mujoco_sb3 import (
    Timed,
    learn_timed,
    make_vec,
    normalized_vec,
    ppo_options,
    sac_options,
)

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

    venv = normalized_vec(hp, seed, vec)
    model = PPO(
        "MlpPolicy",
        venv,
        policy_kwargs=dict(
            net_arch=dict(pi=[64, 64], vf=[64, 64]),
            activation_fn=nn.tanh,
            log_std_init=0.0,
            ortho_init=True,
            optimizer_kwargs=dict(eps=1e-5),
        ),
        **ppo_options(hp, seed),
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
        policy_kwargs=dict(net_arch=[256, 256]),
        **sac_options(hp, seed),
    )
    return learn_timed(model, hp["total_steps"], venv)
