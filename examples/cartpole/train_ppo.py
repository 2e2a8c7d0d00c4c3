"""Train PPO on CartPole-v1 with envs stepped in worker processes.

    python examples/cartpole/train_ppo.py                     # solves CartPole in ~1 min
    python examples/cartpole/train_ppo.py --quick             # a tiny smoke run
    python examples/cartpole/train_ppo.py --parallel serial   # same batches, no processes
    python examples/cartpole/train_ppo.py --sampler alternating  # inference overlaps stepping
    python examples/cartpole/train_ppo.py --rebalance         # envs follow the faster core
    python examples/cartpole/train_ppo.py --async             # sample while PPO trains
    python examples/cartpole/train_ppo.py --async --max-lag 2 # up to 2 policy versions behind
    python examples/cartpole/train_ppo.py --async --vtrace    # V-trace corrects for the lag
    python examples/cartpole/train_ppo.py --backend jax       # the JAX PPO (the jax extra)
    python examples/cartpole/train_ppo.py --backend jax --seeds 8  # 8 seeds, one program
    python examples/cartpole/train_ppo.py --resume runs/cartpole-ppo-...
    python examples/cartpole/train_ppo.py --help              # every Config field is a flag

Writes a run directory (config, metadata, progress.csv, TensorBoard logs,
checkpoints, learning_curve.png) under ``runs/``. Ctrl-C stops at the end of
the current batch, writes a checkpoint and prints the command that resumes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from typing import Annotated, Any, Literal

import gymnasium as gym
import torch
import tyro

from parllel.builders import (
    add_advantage_estimation,
    build_alternating_cages,
    build_eval_sampler,
    build_sample_tree,
)
from parllel.cages import (
    Cage,
    CageOptions,
    EnvSpaces,
    ProcessLayout,
    build_cage,
)
from parllel.cages.building import suggest_layout_for
from parllel.errors import ConfigError
from parllel.runners import OnPolicyRunner, RunSettings
from parllel.runners.cli import parse_config, run_main
from parllel.samplers import AlternatingSampler, BackgroundSampler, FeedForwardSampler
from parllel.schedules import linear_schedule
from parllel.seeding import Seeds
from parllel.torch import PolicyExport, SharedWeights, TorchHandler
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.algos import PPO, ActorCriticEvaluator, VTraceCorrection, adam
from parllel.torch.models import build_actor_critic
from parllel.transforms import Compose


@dataclasses.dataclass
class Config:
    seed: int = 0
    """master seed (python, numpy, torch and every env)"""
    n_envs: int = 8
    """environments stepped side by side"""
    batch_T: int = 32
    """env steps per env per batch (8 x 32 = 256 samples per update)"""
    total_steps: int = 102_400
    """env steps to train for (400 batches; rounded up to whole batches)"""
    gamma: float = 0.98
    """discount factor"""
    gae_lambda: float = 0.8
    """GAE lambda"""
    learning_rate: float = 1e-3
    """initial Adam learning rate (decays linearly to 0)"""
    clip_range: float = 0.2
    """initial PPO clip range (decays linearly to 0)"""
    epochs: int = 20
    """passes over each batch"""
    minibatches: int = 1
    """minibatches per epoch"""
    entropy_coef: float = 0.0
    """weight of the entropy bonus"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layer widths of the actor-critic MLP"""
    parallel: Literal["process", "serial", "auto"] = "process"
    """where envs step: worker processes, this process, or measured"""
    sampler: Literal["feedforward", "alternating"] = "feedforward"
    """alternating: two halves of the envs, one worker each, inference overlaps stepping"""
    rebalance: bool = False
    """feed-forward process cages: move envs towards the faster process"""
    async_sampling: Annotated[bool, tyro.conf.arg(aliases=("--async",))] = False
    """sample in a background process while PPO trains on the last batch"""
    max_lag: int = 1
    """--async: policy versions a batch may be behind the learner (0: take turns)"""
    refresh: Literal["batch", "step"] = "batch"
    """--async: the sampler loads new weights before each batch, or each step"""
    vtrace: bool = False
    """correct advantages and value targets for the policy lag with V-trace"""
    backend: Literal["torch", "jax"] = "torch"
    """learning library: torch, or JAX (flax networks, one compiled PPO update)"""
    seeds: int = 1
    """--backend jax: train seeds seed, seed+1, ... as one program (one run directory each)"""
    run: RunSettings = RunSettings.field(
        eval_interval_steps=5_000, checkpoint_interval_steps=25_000
    )
    """run directory, console, logging, evaluation and checkpoints"""


QUICK = dict(total_steps=512, eval_interval_steps=256, eval_episodes=2, epochs=2)
"""the --quick preset: a tiny smoke run"""


def make_env() -> gym.Env:
    return gym.make("CartPole-v1")


def build_agent(config: Config, spaces: Any, seeds: Seeds) -> Any:
    """The actor-critic MLP for ``spaces`` (an ``observation`` and ``action`` space)."""
    if config.backend == "jax":
        from parllel.jax.agents import build_actor_critic_agent  # the jax extra

        return build_actor_critic_agent(
            spaces.observation,
            spaces.action,
            seed=seeds.torch,  # the learner's stream initializes the weights
            hidden_sizes=config.hidden_sizes,
        )
    model, distribution = build_actor_critic(
        spaces.observation, spaces.action, hidden_sizes=config.hidden_sizes
    )
    return ActorCriticAgent(model, distribution)


def build_handler(config: Config, agent: Any, n_envs: int, seed: int | None) -> Any:
    """The handler that runs ``agent`` on the sample tree (torch or JAX)."""
    if config.backend == "jax":
        from parllel.jax import JaxHandler

        return JaxHandler(agent, n_envs=n_envs, seed=seed)
    return TorchHandler(agent, n_envs=n_envs, seed=seed)


def build_training_cages(config: Config, seeds: Seeds) -> list[Cage]:
    """The training envs: one cage (worker processes by default; with
    ``--rebalance`` its envs move towards the faster process), or two halves
    of one worker each for ``--sampler alternating``."""
    if config.sampler == "alternating":
        return build_alternating_cages(
            make_env, config.n_envs, options=CageOptions(seed=seeds.envs)
        )
    layout = None
    if config.rebalance:  # the measured split, its envs free to move
        suggested = suggest_layout_for(make_env, config.n_envs)
        layout = replace(suggested or ProcessLayout(), rebalance=True)
    return [
        build_cage(
            make_env,
            config.n_envs,
            parallel=config.parallel,
            options=CageOptions(seed=seeds.envs),
            layout=layout,
        )
    ]


def build_sampler(
    config: Config, seeds: Seeds, weights: SharedWeights | None = None
) -> tuple[FeedForwardSampler | AlternatingSampler, ActorCriticAgent]:
    """The cages, the agent, the batch buffer and its transforms.

    With ``weights`` the agent follows the learner's published weights (it
    samples in a background process); without, it is the learner's agent.
    """
    cages = build_training_cages(config, seeds)
    agent = build_agent(config, cages[0].spaces, seeds)
    # actions from their own stream: the same batches wherever sampling runs
    handler = build_handler(config, agent, config.n_envs, seeds.actions)
    if weights is not None:
        handler.follow_weights(weights, every=config.refresh)
    # the batch buffer [T, B] and what runs on it after each batch
    sample_tree = build_sample_tree(cages, handler, config.batch_T)
    transform = Compose(
        add_advantage_estimation(sample_tree, config.gamma, config.gae_lambda)
    )
    sampler_type = (
        AlternatingSampler if config.sampler == "alternating" else FeedForwardSampler
    )
    return sampler_type(cages, handler, sample_tree, transform=transform), agent


def build_background_sampler(
    config: Config, seeds: Seeds, weights: SharedWeights
) -> FeedForwardSampler | AlternatingSampler:
    """Runs in the background process: the sampler, following ``weights``."""
    torch.set_num_threads(1)
    return build_sampler(config, seeds, weights)[0]


@dataclasses.dataclass
class Sampling:
    """What the learner gets from either way of sampling."""

    sampler: FeedForwardSampler | AlternatingSampler | BackgroundSampler
    agent: ActorCriticAgent
    learner: TorchHandler | None  # publishes the weights (--async)
    checkpoint_objects: dict[str, Any]
    close: tuple


def synchronous_sampling(config: Config, seeds: Seeds) -> Sampling:
    """The sampler steps the envs in this process's loop, between updates."""
    sampler, agent = build_sampler(config, seeds)
    model = agent if config.backend == "jax" else agent.model  # a JAX agent's params
    return Sampling(
        sampler,
        agent,
        learner=None,
        checkpoint_objects={"model": model, "transform": sampler.transform},
        close=(*sampler.cages, sampler.sample_tree),
    )


def background_sampling(config: Config, seeds: Seeds) -> Sampling:
    """``--async``: the learner's agent publishes its weights; the sampler,
    with the envs, runs in a background process and follows them."""
    env = make_env()
    agent = build_agent(
        config, EnvSpaces(env.observation_space, env.action_space), seeds
    )
    env.close()
    learner = TorchHandler(agent, n_envs=config.n_envs)
    weights = learner.share_weights()
    sampler = BackgroundSampler(
        build_background_sampler, config, seeds, weights, max_lag=config.max_lag
    )
    return Sampling(
        sampler,
        agent,
        learner,
        checkpoint_objects={"model": agent.model},  # + the sampler, by the runner
        close=(sampler, weights),
    )


def train_seeds(config: Config, resume: str | None) -> list[dict]:
    """``--seeds K``: K runs (master seeds ``seed .. seed + K - 1``) in one
    program: one cage of K x n_envs envs, each seeded from its run's seeds,
    one vmapped policy step and one vmapped PPO update; each run writes an
    ordinary run directory inside the group directory (docs/seeds.md)."""
    from parllel.jax.algos import PPO as JaxPPO
    from parllel.jax.algos import SeededPPO
    from parllel.jax.algos import adam as jax_adam
    from parllel.jax.export import PolicyExport as JaxPolicyExport
    from parllel.jax.seeds import RunView, SeededHandler, SeedStack
    from parllel.runners.seed_runs import start_seed_runs
    from parllel.runners.seeds import SeedsRunner

    n_eval = config.run.eval_episodes  # eval envs per run, one episode each
    runs = start_seed_runs(
        config.run, "cartpole-ppo", config, seeds=config.seeds,
        master=config.seed, n_envs=config.n_envs, n_eval_envs=n_eval, resume=resume,
    )  # fmt: skip
    # every run's envs in one cage: run k owns columns k * n_envs .. (k + 1) * n_envs
    cage = build_cage(
        make_env,
        config.seeds * config.n_envs,
        parallel=config.parallel,
        options=CageOptions(seed=runs.env_seeds),
    )
    # each run's agent from its own seeds, parameters stacked [K, ...]
    stack = SeedStack([build_agent(config, cage.spaces, seeds) for seeds in runs.seeds])
    handler = SeededHandler(
        stack, config.n_envs, seeds=[seeds.actions for seeds in runs.seeds]
    )
    sample_tree = build_sample_tree(cage, handler, config.batch_T)  # [T, K * B]
    transform = Compose(  # GAE works column by column: the runs stay apart
        add_advantage_estimation(sample_tree, config.gamma, config.gae_lambda)
    )
    sampler = FeedForwardSampler(cage, handler, sample_tree, transform=transform)
    # every run's deterministic episodes in one eval cage, run k's envs together
    eval_sampler, eval_cage = build_eval_sampler(
        make_env,
        SeededHandler(stack, n_eval, seeds=[seeds.actions for seeds in runs.seeds]),
        config.seeds * n_eval,
        config.seeds * n_eval,
        seed=runs.eval_env_seeds,
    )
    ppos = [
        JaxPPO(
            agent,
            jax_adam(config.learning_rate),
            learning_rate=linear_schedule(config.learning_rate, 0.0),
            clip_range=linear_schedule(config.clip_range, 0.0),
            epochs=config.epochs,
            minibatches=config.minibatches,
            entropy_coef=config.entropy_coef,
            seed=seeds.torch,
        )
        for agent, seeds in zip(stack.agents, runs.seeds)
    ]
    seeded = SeededPPO(  # every run's update in one compiled call
        ppos,
        stack,
        envs_per_run=config.n_envs,
        seeds=[seeds.master for seeds in runs.seeds],
    )
    runner = SeedsRunner(
        sampler,
        seeded,
        config.total_steps,
        runs.seed_runs(  # each run's checkpoint holds what a single run's does
            lambda k: {
                "model": RunView(stack, k),
                "transform": transform,
                "ppo": seeded.run_state(k),
            },
            handler.action_key,
        ),
        config_keys=["n_envs", "batch_T", "hidden_sizes", "backend", "seeds"],
        **runs.runner_options(config.total_steps, eval_sampler, n_eval),
    )
    return runs.train(
        runner,
        close=(cage, eval_cage, sample_tree),
        policy=lambda objects: JaxPolicyExport(  # each run's policy.npz
            objects["model"],
            env_id="CartPole-v1",
            observation_space=cage.spaces.observation,
            action_space=cage.spaces.action,
        ),
    )


def main(config: Config, resume: str | None = None) -> dict | list[dict]:
    if config.backend == "jax":  # before JAX's first computation (docs/jax.md)
        from parllel.jax.training_setup import prepare_jax_for_training

        prepare_jax_for_training(runs=config.seeds)
    torch.set_num_threads(1)
    if config.seeds > 1:
        if config.backend != "jax" or config.async_sampling or config.vtrace:
            raise ConfigError(
                "--seeds K runs with --backend jax, synchronously: add --backend jax "
                "(and leave out --async and --vtrace)"
            )
        return train_seeds(config, resume)
    if config.backend == "jax" and (config.async_sampling or config.vtrace):
        raise ConfigError("--backend jax samples synchronously: no --async, --vtrace")
    seeds = Seeds.from_master(config.seed, n_envs=config.n_envs, n_eval_envs=4)
    run = config.run.start("cartpole-ppo", config, seeds, resume)
    sampling = (background_sampling if config.async_sampling else synchronous_sampling)(
        config, seeds
    )
    agent = sampling.agent
    eval_sampler, eval_cage = build_eval_sampler(
        make_env,
        build_handler(config, agent, 4, seed=None),
        4,
        config.run.eval_episodes,
        seed=seeds.eval_envs,
    )

    # the algorithm
    if config.backend == "jax":
        from parllel.jax.algos import PPO as JaxPPO
        from parllel.jax.algos import adam as jax_adam

        ppo: Any = JaxPPO(  # every epoch and minibatch in one compiled call
            agent,
            jax_adam(config.learning_rate),
            learning_rate=linear_schedule(config.learning_rate, 0.0),
            clip_range=linear_schedule(config.clip_range, 0.0),
            epochs=config.epochs,
            minibatches=config.minibatches,
            entropy_coef=config.entropy_coef,
            seed=seeds.torch,  # the minibatch order
        )
        runner = OnPolicyRunner(
            sampling.sampler,
            ppo,
            config.total_steps,
            checkpoint_objects={**sampling.checkpoint_objects, "ppo": ppo},
            config_keys=["n_envs", "batch_T", "hidden_sizes", "backend"],
            **run.runner_options(config.total_steps, eval_sampler),
        )
        from parllel.jax.export import PolicyExport as JaxPolicyExport

        spaces = sampling.sampler.cages[0].spaces
        return run.train(
            runner,
            close=(*sampling.close, eval_cage),
            policy=JaxPolicyExport(  # writes policy.npz (plays in numpy)
                agent,
                env_id="CartPole-v1",
                observation_space=spaces.observation,
                action_space=spaces.action,
            ),
        )
    model, distribution = agent.model, agent.distribution
    optimizer = adam(model.parameters(), config.learning_rate)  # fused: measured faster
    ppo = PPO(
        ActorCriticEvaluator(model, distribution),
        optimizer,
        learning_rate=linear_schedule(config.learning_rate, 0.0),
        clip_range=linear_schedule(config.clip_range, 0.0),
        epochs=config.epochs,
        minibatches=config.minibatches,
        entropy_coef=config.entropy_coef,
        correction=(
            VTraceCorrection(gamma=config.gamma, trace_lambda=config.gae_lambda)
            if config.vtrace
            else None
        ),
    )

    runner = OnPolicyRunner(
        sampling.sampler,
        ppo,
        config.total_steps,
        checkpoint_objects={**sampling.checkpoint_objects, "ppo": ppo},
        config_keys=["n_envs", "batch_T", "hidden_sizes", "async_sampling"],
        publisher=sampling.learner,
        **run.runner_options(config.total_steps, eval_sampler),
    )
    return run.train(
        runner,
        close=(*sampling.close, eval_cage),
        policy=PolicyExport(agent, env_id="CartPole-v1"),  # writes policy.pt
    )


if __name__ == "__main__":
    run_main(main, parse_config(Config, quick=QUICK, description=__doc__))
