"""The parllel JAX side of ``train_mujoco.py``: PPO and SAC with ``parllel.jax``.

The same runs as the torch ones in ``_mujoco_ours.py`` (the same sample
tree, transforms, replay and runners), with a flax agent, ``JaxHandler`` and
the JAX algorithms: PPO's whole update (every epoch and minibatch) and each
SAC gradient step are one compiled call. JAX is imported inside the
functions, so the caller sets ``XLA_FLAGS`` (the learner's threads) first.
"""

from __future__ import annotations

from _mujoco_ours import (
    PPO_NETWORK,
    Record,
    box_action,
    env_spaces,
    ppo_cage,
    ppo_sampler,
    run_sac_runner,
    sac_replay,
    timed_run,
)
from _mujoco_sb3 import Timed

from parllel.runners import OnPolicyRunner
from parllel.schedules import linear_schedule
from parllel.seeding import Seeds, seed_everything


def run_jax_ppo(hp: dict, seed: int, parallel: str) -> Timed:
    """One JAX PPO run with CleanRL's settings, as ``examples/mujoco/train_ppo.py
    --backend jax`` (sampling and learning take turns)."""
    from parllel.jax import JaxHandler
    from parllel.jax.agents import build_actor_critic_agent
    from parllel.jax.algos import PPO, adam

    seeds = Seeds.from_master(seed, n_envs=hp["n_envs"])
    seed_everything(seeds)
    spaces = env_spaces(hp["env_id"])
    agent = build_actor_critic_agent(
        spaces.observation, spaces.action, seed=seeds.torch, **PPO_NETWORK
    )
    cage = ppo_cage(hp, seed, parallel)
    handler = JaxHandler(agent, n_envs=cage.n_envs, seed=seeds.actions)
    sampler = ppo_sampler(cage, handler, hp)
    ppo = PPO(
        agent,
        adam(hp["learning_rate"], eps=1e-5),
        learning_rate=linear_schedule(hp["learning_rate"], 0.0),
        clip_range=hp["clip_range"],
        value_clip_range=hp["clip_range"],
        value_loss_coef=0.5,  # x parllel's 0.5 x MSE
        max_grad_norm=0.5,
        epochs=hp["epochs"],
        minibatches=hp["minibatches"],
        normalize_advantage=True,
        batch_shape=(hp["n_steps"], hp["n_envs"]),
        seed=seeds.torch,  # the minibatch order
    )
    timed = Timed()
    runner = OnPolicyRunner(sampler, ppo, hp["total_steps"], callbacks=[Record(timed)])
    try:
        return timed_run(runner, timed)
    finally:
        cage.close()
        sampler.sample_tree.close()


def run_jax_sac(hp: dict, seed: int) -> Timed:
    """One JAX SAC run with the torch run's settings (one update per env step,
    the actor's learning rate apart, alpha learned from 1, log-std in [-20, 2])."""
    from parllel.jax import JaxHandler
    from parllel.jax.agents import build_sac_agent
    from parllel.jax.algos import SAC, EntropyCoefficient, build_sac_optimizers

    seeds = Seeds.from_master(seed, n_envs=1)
    seed_everything(seeds)
    spaces = env_spaces(hp["env_id"], clip_actions=False)
    agent = build_sac_agent(spaces.observation, box_action(spaces), seed=seeds.torch)
    sampler, replay, _ = sac_replay(
        hp, seeds, lambda cage: JaxHandler(agent, n_envs=1, seed=seeds.actions)
    )
    optimizers = build_sac_optimizers(hp["q_lr"], actor_learning_rate=hp["policy_lr"])
    sac = SAC(
        agent, optimizers, EntropyCoefficient(1.0), seed=seeds.torch,
        tau=hp["tau"], replay_ratio=1.0,
    )  # fmt: skip
    return run_sac_runner(hp, agent, sampler, replay, sac)
