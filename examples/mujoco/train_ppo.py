"""Train PPO on a MuJoCo env with CleanRL's MuJoCo PPO settings as defaults.

    python examples/mujoco/train_ppo.py                         # HalfCheetah-v4, 1M steps
    python examples/mujoco/train_ppo.py --env-id Hopper-v4 --seed 1
    python examples/mujoco/train_ppo.py --quick                 # a tiny smoke run
    python examples/mujoco/train_ppo.py --parallel process      # envs in worker processes
    python examples/mujoco/train_ppo.py --backend jax           # the JAX PPO (the jax extra)
    python examples/mujoco/train_ppo.py --backend jax --seeds 8 --parallel auto  # 8 seeds, one program
    python examples/mujoco/train_ppo.py --resume runs/mujoco-ppo-HalfCheetah-v4-...
    python examples/mujoco/train_ppo.py --preset cleanrl        # CleanRL-exact mode
    python examples/mujoco/train_ppo.py --help                  # every Config field is a flag

Defaults are CleanRL's ``ppo_continuous_action.py``: 2048 samples per batch
(8 envs x 256 steps here; CleanRL steps 1 env x 2048), 10 epochs of 32
minibatches (64 samples each), Adam (eps 1e-5) with learning rate 3e-4
annealed linearly to 0, gamma 0.99, GAE lambda 0.95, clip range 0.2 for the
ratio and for the value change (CleanRL's ``clip_vloss``), no entropy bonus,
value term 0.5 x the clipped value loss (parllel's value loss is already
0.5 x MSE, so ``value_loss_coef=0.5`` is CleanRL's ``vf_coef=0.5``), gradient
norm clipped at 0.5, advantages standardized per minibatch, observations
normalized by running statistics and clipped at +-10, rewards scaled by the
running std of the discounted return and clipped at +-10, actions clipped
into the action space before the env sees them (as CleanRL's ``ClipAction``,
but the space keeps its bounds; the policy's log-probabilities are of the
unclipped actions), separate 64x64 tanh policy and value networks with
orthogonal initialization, a state-independent log-std starting at 0,
999,424 env steps (488 batches, CleanRL's 488 iterations of its 1M-step run).
The exported policy acts as in training with ``load_policy(run,
clip_actions=True)``; ``python -m parllel.enjoy RUN`` plays this file's
``make_env`` (actions clipped).

``--preset cleanrl`` is CleanRL's exact setup (its defaults; explicit flags
still override them): 1 env x 2048 steps, truncation treated as termination
(``--truncation-as-termination``), gymnasium 0.28's per-env normalizer
rules (``--normalization gymnasium``: statistics per env, final observations
counted, a prior count of 1e-4, the reward normalizer's running return
restarted only at terminations) and the learning rate of each update taken
before its batch (``--anneal-from-batch-start``). docs/training.md lists
what each switch removes.

The default env is HalfCheetah-v4, the version of CleanRL's published table
(v4 runs with the installed mujoco; with a mujoco that no longer loads v4,
pass ``--env-id HalfCheetah-v5``). Any gymnasium MuJoCo env id works.
The column ``train/return_mean`` of ``logs/progress.csv`` is the mean return
of the last 100 training episodes (raw env rewards, before normalization),
the figure CleanRL reports. Writes a run directory under ``runs/``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import sys
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
import numpy as np
import torch

from parllel.builders import (
    add_advantage_estimation,
    add_obs_normalization,
    add_reward_normalization,
    build_eval_sampler,
    build_sample_tree,
)
from parllel.cages import Cage, CageOptions, build_cage
from parllel.envs.mujoco import make_mujoco_env
from parllel.errors import ConfigError
from parllel.runners import OnPolicyRunner, RunSettings
from parllel.runners.cli import parse_config, run_main
from parllel.samplers import FeedForwardSampler
from parllel.schedules import linear_schedule
from parllel.seeding import Seeds
from parllel.torch import PolicyExport, TorchHandler
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.algos import PPO, ActorCriticEvaluator
from parllel.torch.models import build_actor_critic
from parllel.transforms import Compose, PerRunObservations, PerRunTransform


@dataclasses.dataclass
class Config:
    preset: Literal["default", "cleanrl"] = "default"
    """the defaults: parllel's, or CleanRL's exact setup (CleanRLConfig)"""
    env_id: str = "HalfCheetah-v4"
    """gymnasium MuJoCo env id (v4 as CleanRL's table; v5 works too)"""
    seed: int = 0
    """master seed (python, numpy, torch and every env)"""
    n_envs: int = 8
    """environments stepped side by side"""
    batch_T: int = 256
    """env steps per env per batch (n_envs x batch_T = 2048 samples per update)"""
    total_steps: int = 999_424
    """env steps to train for (488 batches: CleanRL's 1M-step run)"""
    gamma: float = 0.99
    """discount factor"""
    gae_lambda: float = 0.95
    """GAE lambda"""
    learning_rate: float = 3e-4
    """initial Adam learning rate (decays linearly to 0)"""
    adam_eps: float = 1e-5
    """Adam epsilon (CleanRL's and SB3's PPO)"""
    clip_range: float = 0.2
    """PPO ratio clip range"""
    value_clip_range: float | None = 0.2
    """clip of the value change from the batch's values (None: no value clipping)"""
    value_loss_coef: float = 0.5
    """weight of the value loss (parllel's is 0.5 x MSE: 0.5 is CleanRL's vf_coef)"""
    entropy_coef: float = 0.0
    """weight of the entropy bonus"""
    max_grad_norm: float = 0.5
    """clip of the global gradient norm"""
    epochs: int = 10
    """passes over each batch"""
    minibatches: int = 32
    """minibatches per epoch (64 samples each at the default batch of 2,048)"""
    obs_clip: float = 10.0
    """normalized observations are clipped to +-obs_clip"""
    reward_clip: float = 10.0
    """normalized rewards are clipped to +-reward_clip"""
    truncation_as_termination: bool = False
    """GAE treats time-limit truncations as terminations (CleanRL) instead of
    bootstrapping them from the final observation's value"""
    normalization: Literal["shared", "gymnasium"] = "shared"
    """shared: one observation and one reward statistic over all envs, final
    observations not counted, running returns reset at every episode end;
    gymnasium: per env as gymnasium 0.28's NormalizeObservation/NormalizeReward
    wrappers (CleanRL): final observations counted, prior count 1e-4, running
    return restarted only at terminations"""
    anneal_from_batch_start: bool = False
    """the learning rate of each update is the schedule's value before its
    batch (CleanRL: first update at the full rate, last at rate / iterations);
    otherwise after it (the last update at 0)"""
    max_episode_steps: int | None = None
    """end episodes (truncate) after this many steps (None: the env's own limit)"""
    init_log_std: float = 0.0
    """initial log standard deviation of the Gaussian policy"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layer widths of the policy and value networks"""
    parallel: Literal["process", "serial", "auto"] = "serial"
    """where envs step: worker processes, this process, or measured"""
    backend: Literal["torch", "jax"] = "torch"
    """learning library: torch, or JAX (flax networks, one compiled PPO update)"""
    seeds: int = 1
    """--backend jax: train seeds seed, seed+1, ... as one program (one run directory each)"""
    run: RunSettings = RunSettings.field(
        eval_interval_steps=100_000,
        eval_episodes=5,
        log_interval_steps=10_240,
        checkpoint_interval_steps=200_000,
    )
    """run directory, console, logging, evaluation and checkpoints"""


QUICK = dict(
    batch_T=32,
    minibatches=4,
    total_steps=512,
    log_interval_steps=256,
    eval_interval_steps=256,
    eval_episodes=2,
    epochs=2,
    max_episode_steps=64,  # episodes end within the run (and evaluations stay short)
)
"""the --quick preset: a tiny smoke run"""


@dataclasses.dataclass
class CleanRLConfig(Config):
    """``--preset cleanrl``: CleanRL's ``ppo_continuous_action.py`` exactly."""

    preset: Literal["default", "cleanrl"] = "cleanrl"
    """the defaults: parllel's, or CleanRL's exact setup"""
    n_envs: int = 1
    """environments stepped side by side (CleanRL: 1)"""
    batch_T: int = 2048
    """env steps per env per batch (CleanRL: 2048)"""
    truncation_as_termination: bool = True
    """GAE treats time-limit truncations as terminations (CleanRL)"""
    normalization: Literal["shared", "gymnasium"] = "gymnasium"
    """gymnasium 0.28's per-env normalizer rules (CleanRL)"""
    anneal_from_batch_start: bool = True
    """each update's learning rate from before its batch (CleanRL)"""


GYMNASIUM_PRIOR_COUNT = 1e-4
"""the count gymnasium's RunningMeanStd starts at (mean 0, variance 1)"""


class ClipActionInBounds(gym.ActionWrapper):
    """Clips actions into the action space, which keeps its bounds.

    gymnasium's ``ClipAction`` clips too but makes the space ``Box(-inf,
    inf)``, so the exported policy would not know the bounds
    (``load_policy(run, clip_actions=True)`` needs them).
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        if not isinstance(env.action_space, gym.spaces.Box):
            raise ConfigError(
                f"{env.spec.id if env.spec else env} has the action space "
                f"{env.action_space}: this script trains a Gaussian policy on "
                "continuous (Box) actions (MuJoCo's, say); for discrete actions "
                "use examples/cartpole/train_ppo.py"
            )
        self.low, self.high = env.action_space.low, env.action_space.high

    def action(self, action: np.ndarray) -> np.ndarray:
        return np.clip(action, self.low, self.high)


def run_name(config: Config) -> str:
    """The run directory's name: ``mujoco-ppo-<env id>`` (its ``/`` as ``-``),
    e.g. ``mujoco-ppo-Hopper-v4-<timestamp>``."""
    return f"mujoco-ppo-{config.env_id.replace('/', '-')}"


def make_env(
    env_id: str = "HalfCheetah-v4",
    max_episode_steps: int | None = None,
    render_mode: str | None = None,
) -> gym.Env:
    """The MuJoCo env with its actions clipped into the action space (as CleanRL)."""
    # without MuJoCo's settotalmass and v4's "out of date" notices, once per env
    env = make_mujoco_env(
        env_id, max_episode_steps=max_episode_steps, render_mode=render_mode
    )
    return ClipActionInBounds(env)


def build_normalizers(config: Config, sample_tree: Any) -> tuple[Any, list, list]:
    """The observation normalizer the sampler uses, the observation
    normalizers to checkpoint (one, or one per env), and the reward
    transforms. ``--normalization gymnasium`` keeps every env's statistics
    apart, as a gymnasium wrapper inside each env does."""
    if config.normalization == "shared":
        observations = add_obs_normalization(sample_tree, clip=config.obs_clip)
        rewards = add_reward_normalization(
            sample_tree, config.gamma, clip=config.reward_clip
        )
        return observations, [observations], rewards
    per_env = [
        add_obs_normalization(
            sample_tree,
            clip=config.obs_clip,
            count_final_observations=True,
            prior_count=GYMNASIUM_PRIOR_COUNT,
        )
        for _ in range(config.n_envs)
    ]

    def env_rewards(tree: Any) -> Compose:
        return Compose(
            add_reward_normalization(
                tree,
                config.gamma,
                clip=config.reward_clip,
                reset="termination",
                prior_count=GYMNASIUM_PRIOR_COUNT,
            )
        )

    if config.n_envs == 1:
        return per_env[0], per_env, [env_rewards(sample_tree)]
    per_env_rewards = PerRunTransform(
        sample_tree,
        env_rewards,
        config.n_envs,
        fields=("reward", "terminated", "truncated"),
        writes=("reward",),
    )
    return PerRunObservations(per_env, 1), per_env, [per_env_rewards]


def advantage_estimation(config: Config, sample_tree: Any) -> list:
    """GAE on the (scaled) rewards, a truncation bootstrapped or, with
    ``truncation_as_termination`` (CleanRL's rule), an episode end: the one
    estimate of every run of the script, one seed or many."""
    return add_advantage_estimation(
        sample_tree,
        config.gamma,
        config.gae_lambda,
        truncation_as_termination=config.truncation_as_termination,
    )


def build_sampling(
    config: Config, cage: Cage, handler: Any
) -> tuple[FeedForwardSampler, Any, list]:
    """The batch buffer [T, B] and its transforms: observations normalized
    (and clipped) as they arrive; after each batch reward scaling and
    clipping, then GAE on the scaled rewards (advantages are standardized
    per minibatch by PPO). Returns the sampler, the transform and the
    observation normalizers to checkpoint (the first one also serves
    evaluation and the exported policy)."""
    sample_tree = build_sample_tree(cage, handler, config.batch_T)
    observation_normalizer, normalizers, rewards = build_normalizers(
        config, sample_tree
    )
    transform = Compose(rewards + advantage_estimation(config, sample_tree))
    sampler = FeedForwardSampler(
        cage,
        handler,
        sample_tree,
        transform=transform,
        observation_normalizer=observation_normalizer,
    )
    return sampler, transform, normalizers


def normalizer_objects(normalizers: list) -> dict[str, Any]:
    """Checkpoint entries of the observation normalizers (one per env with
    ``--normalization gymnasium`` and several envs)."""
    if len(normalizers) == 1:
        return {"observation_normalizer": normalizers[0]}
    return {f"observation_normalizer_{i}": n for i, n in enumerate(normalizers)}


def learning_rate_schedule(config: Config) -> Any:
    """Linear decay to 0 over the run; with ``anneal_from_batch_start`` each
    update gets the value before its batch: CleanRL's ``lr (1 - (i - 1) / n)``
    at batch ``i`` of the ``n`` the run trains (``total_steps`` rounded up to
    whole batches, as the runner does), whatever ``total_steps`` is."""
    if not config.anneal_from_batch_start:
        return linear_schedule(config.learning_rate, 0.0)
    learning_rate, total = config.learning_rate, config.total_steps
    batch = config.n_envs * config.batch_T
    iterations = max(math.ceil(total / batch), 1)

    def schedule(progress: float) -> float:
        # the runner's progress after batch i is min(1, i * batch / total)
        i = min(max(math.ceil(progress * total / batch - 1e-6), 1), iterations)
        return learning_rate * (1 - (i - 1) / iterations)

    return schedule


def build_jax_ppo(config: Config, agent: Any, seeds: Seeds) -> Any:
    """The JAX PPO with CleanRL's settings: 10 epochs x 32 minibatches in one
    compiled call."""
    from parllel.jax.algos import PPO as JaxPPO
    from parllel.jax.algos import adam as jax_adam

    return JaxPPO(
        agent,
        jax_adam(config.learning_rate, eps=config.adam_eps),
        learning_rate=learning_rate_schedule(config),
        clip_range=config.clip_range,
        value_clip_range=config.value_clip_range,
        value_loss_coef=config.value_loss_coef,
        entropy_coef=config.entropy_coef,
        max_grad_norm=config.max_grad_norm,
        epochs=config.epochs,
        minibatches=config.minibatches,
        normalize_advantage=True,
        batch_shape=(config.batch_T, config.n_envs),
        seed=seeds.torch,  # the minibatch order
    )


def train_jax(
    config: Config,
    seeds: Seeds,
    run: Any,
    cage: Cage,
    env_factory: Any,
    network_options: dict,
) -> dict:
    """``--backend jax``: the same run with a flax agent, JaxHandler and the
    JAX PPO, whose whole update (10 epochs x 32 minibatches) is one compiled
    call. The jax extra is imported only here."""
    from parllel.jax import JaxHandler
    from parllel.jax.agents import build_actor_critic_agent

    agent = build_actor_critic_agent(
        cage.spaces.observation, cage.spaces.action, seed=seeds.torch, **network_options
    )
    handler = JaxHandler(agent, n_envs=cage.n_envs, seed=seeds.actions)
    sampler, transform, normalizers = build_sampling(config, cage, handler)
    n_eval = config.run.eval_episodes
    eval_sampler, eval_cage = build_eval_sampler(
        env_factory,
        JaxHandler(agent, n_envs=n_eval),
        n_eval,
        n_eval,
        seed=seeds.eval_envs,
        observation_normalizer=normalizers[0],
    )
    ppo = build_jax_ppo(config, agent, seeds)
    runner = OnPolicyRunner(
        sampler,
        ppo,
        config.total_steps,
        checkpoint_objects={
            "model": agent,  # its params
            "ppo": ppo,
            "transform": transform,
            **normalizer_objects(normalizers),
        },
        config_keys=["env_id", "n_envs", "batch_T", "hidden_sizes", "backend"],
        **run.runner_options(config.total_steps, eval_sampler),
    )
    from parllel.jax.export import PolicyExport as JaxPolicyExport

    return run.train(
        runner,
        close=(cage, eval_cage, sampler.sample_tree),
        policy=JaxPolicyExport(  # writes policy.npz (plays in numpy), as below
            agent,
            normalizers[0],
            env_id=config.env_id,
            env_factory=f"{Path(__file__).resolve()}:make_env",
            observation_space=cage.spaces.observation,
            action_space=cage.spaces.action,
        ),
    )


def train_seeds(
    config: Config, resume: str | None, env_factory: Any, network_options: dict
) -> list[dict]:
    """``--seeds K``: K runs (master seeds ``seed .. seed + K - 1``) in one
    program: one cage of K x n_envs envs, each seeded from its run's seeds,
    observation and reward statistics per run, one vmapped policy step and
    one vmapped PPO update; each run writes an ordinary run directory inside
    the group directory (docs/seeds.md)."""
    from parllel.jax.agents import build_actor_critic_agent
    from parllel.jax.algos import SeededPPO
    from parllel.jax.export import PolicyExport as JaxPolicyExport
    from parllel.jax.seeds import RunView, SeededHandler, SeedStack
    from parllel.runners.seed_runs import start_seed_runs
    from parllel.runners.seeds import SeedsRunner
    from parllel.transforms import PerRunObservations, PerRunTransform

    K, B, n_eval = config.seeds, config.n_envs, config.run.eval_episodes
    runs = start_seed_runs(
        config.run, run_name(config), config, seeds=K, master=config.seed,
        n_envs=B, n_eval_envs=n_eval, resume=resume,
    )  # fmt: skip
    # every run's envs in one cage: run k owns columns k * B .. (k + 1) * B
    cage = build_cage(
        env_factory,
        K * B,
        parallel=config.parallel,
        options=CageOptions(seed=runs.env_seeds),
    )
    stack = SeedStack(  # each run's agent from its own seeds, params stacked [K, ...]
        [
            build_actor_critic_agent(
                cage.spaces.observation,
                cage.spaces.action,
                seed=s.torch,
                **network_options,
            )  # fmt: skip
            for s in runs.seeds
        ]
    )
    handler = SeededHandler(stack, B, seeds=[s.actions for s in runs.seeds])
    sample_tree = build_sample_tree(cage, handler, config.batch_T)  # [T, K * B]
    # observation and reward statistics per run: a run never sees another's
    observation_normalizer = PerRunObservations(
        [add_obs_normalization(sample_tree, clip=config.obs_clip) for _ in range(K)],
        B,
    )
    rewards = PerRunTransform(
        sample_tree,
        lambda tree: Compose(
            add_reward_normalization(tree, config.gamma, clip=config.reward_clip)
        ),
        K,
        fields=("reward", "terminated", "truncated"),
        writes=("reward",),
    )
    transform = Compose([rewards, *advantage_estimation(config, sample_tree)])
    sampler = FeedForwardSampler(
        cage,
        handler,
        sample_tree,
        transform=transform,
        observation_normalizer=observation_normalizer,
    )
    # every run's deterministic episodes (one per eval env) with its statistics
    eval_sampler, eval_cage = build_eval_sampler(
        env_factory,
        SeededHandler(stack, n_eval, seeds=[s.actions for s in runs.seeds]),
        K * n_eval,
        K * n_eval,
        seed=runs.eval_env_seeds,
        observation_normalizer=PerRunObservations(observation_normalizer.runs, n_eval),
    )
    seeded = SeededPPO(  # every run's update in one compiled call
        [build_jax_ppo(config, a, s) for a, s in zip(stack.agents, runs.seeds)],
        stack,
        envs_per_run=B,
        seeds=[s.master for s in runs.seeds],
    )
    runner = SeedsRunner(
        sampler,
        seeded,
        config.total_steps,
        runs.seed_runs(
            lambda k: {
                "model": RunView(stack, k),
                "ppo": seeded.run_state(k),
                "reward_normalizer": rewards.runs[k],
                "observation_normalizer": observation_normalizer.runs[k],
            },
            handler.action_key,
        ),
        config_keys=["env_id", "n_envs", "batch_T", "hidden_sizes", "backend", "seeds"],
        **runs.runner_options(config.total_steps, eval_sampler, n_eval),
    )
    return runs.train(
        runner,
        close=(cage, eval_cage, sample_tree),
        policy=lambda objects: JaxPolicyExport(  # each run's policy.npz
            objects["model"],
            objects["observation_normalizer"],  # the run's statistics
            env_id=config.env_id,
            env_factory=f"{Path(__file__).resolve()}:make_env",
            observation_space=cage.spaces.observation,
            action_space=cage.spaces.action,
        ),
    )


def main(config: Config, resume: str | None = None) -> dict | list[dict]:
    if config.backend == "jax":  # before JAX's first computation (docs/jax.md)
        from parllel.jax.training_setup import prepare_jax_for_training

        prepare_jax_for_training(runs=config.seeds)
    torch.set_num_threads(1)
    # environments and a Gaussian actor-critic: separate 64x64 tanh trunks,
    # orthogonal initialization, a state-independent log-std
    env_factory = functools.partial(make_env, config.env_id, config.max_episode_steps)
    network_options = dict(
        hidden_sizes=config.hidden_sizes,
        shared_trunk=False,
        init_log_std=config.init_log_std,
        orthogonal_init=True,
    )
    if config.seeds > 1:
        if config.backend != "jax":
            raise ConfigError("--seeds K runs with --backend jax: add --backend jax")
        if config.normalization != "shared":
            raise ConfigError(
                "--seeds K keeps statistics per run, not per env: add "
                "--normalization shared (one statistic per run over its envs), or "
                "run --normalization gymnasium (--preset cleanrl) one seed at a time"
            )
        return train_seeds(config, resume, env_factory, network_options)
    n_eval = config.run.eval_episodes
    seeds = Seeds.from_master(config.seed, n_envs=config.n_envs, n_eval_envs=n_eval)
    run = config.run.start(run_name(config), config, seeds, resume)
    cage = build_cage(
        env_factory,
        config.n_envs,
        parallel=config.parallel,
        options=CageOptions(seed=seeds.envs),
    )
    if config.backend == "jax":
        return train_jax(config, seeds, run, cage, env_factory, network_options)
    model, distribution = build_actor_critic(
        cage.spaces.observation, cage.spaces.action, **network_options
    )
    agent = ActorCriticAgent(model, distribution)
    handler = TorchHandler(agent, n_envs=cage.n_envs, seed=seeds.actions)

    sampler, transform, normalizers = build_sampling(config, cage, handler)
    eval_sampler, eval_cage = build_eval_sampler(
        env_factory,
        TorchHandler(agent, n_envs=n_eval),
        n_eval,
        n_eval,
        seed=seeds.eval_envs,
        observation_normalizer=normalizers[0],  # frozen while evaluating
    )

    # the algorithm
    optimizer = torch.optim.Adam(
        model.parameters(), lr=config.learning_rate, eps=config.adam_eps, fused=True
    )
    ppo = PPO(
        ActorCriticEvaluator(model, distribution),
        optimizer,
        learning_rate=learning_rate_schedule(config),
        clip_range=config.clip_range,
        value_clip_range=config.value_clip_range,
        value_loss_coef=config.value_loss_coef,
        entropy_coef=config.entropy_coef,
        max_grad_norm=config.max_grad_norm,
        epochs=config.epochs,
        minibatches=config.minibatches,
        normalize_advantage=True,
        batch_shape=(config.batch_T, config.n_envs),
    )

    runner = OnPolicyRunner(
        sampler,
        ppo,
        config.total_steps,
        checkpoint_objects={
            "model": model,
            "ppo": ppo,
            "transform": transform,  # reward statistics
            **normalizer_objects(normalizers),
        },
        config_keys=["env_id", "n_envs", "batch_T", "hidden_sizes"],
        **run.runner_options(config.total_steps, eval_sampler),
    )
    return run.train(
        runner,
        close=(cage, eval_cage, sampler.sample_tree),
        # python -m parllel.enjoy RUN plays make_env(env_id=...): clipped actions
        policy=PolicyExport(
            agent,
            normalizers[0],
            env_id=config.env_id,
            env_factory=f"{Path(__file__).resolve()}:make_env",
        ),
    )


def parse(argv: list[str] | None = None) -> tuple[Config, str | None]:
    """The config from the command line: ``--preset cleanrl`` makes CLEANRL's
    values the defaults the other flags override."""
    argv = list(sys.argv[1:] if argv is None else argv)
    early = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    early.add_argument("--preset", choices=("default", "cleanrl"), default="default")
    preset = early.parse_known_args(argv)[0].preset
    config_type = CleanRLConfig if preset == "cleanrl" else Config
    config, resume = parse_config(
        config_type, quick=QUICK, description=__doc__, argv=argv
    )
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(Config)}
    return Config(**values), resume


if __name__ == "__main__":
    run_main(main, parse())
