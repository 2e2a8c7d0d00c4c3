"""Train SAC on a MuJoCo env with CleanRL's SAC settings as defaults.

    python examples/mujoco/train_sac.py                         # HalfCheetah-v4, 1M steps
    python examples/mujoco/train_sac.py --env-id Hopper-v4 --seed 1
    python examples/mujoco/train_sac.py --quick                 # a tiny smoke run
    python examples/mujoco/train_sac.py --backend jax           # the JAX SAC (the jax extra)
    python examples/mujoco/train_sac.py --backend jax --seeds 8 # 8 seeds, one program
    python examples/mujoco/train_sac.py --resume runs/mujoco-sac-HalfCheetah-v4-...
    python examples/mujoco/train_sac.py --help                  # every Config field is a flag

Defaults are CleanRL's ``sac_continuous_action.py``: one env, one gradient
update per env step, replay of 1M steps, batches of 256, gamma 0.99, target
averaging tau 0.005 after every update, Adam with learning rate 3e-4 for the
actor and 1e-3 for the twin Q critics and the entropy temperature (learned,
starting at alpha 1, target entropy -action_dim), uniform random actions
for the first 5,000 steps (learning starts then), 256x256 ReLU actor and
critics, the actor's log-std bounded to [-5, 2], the actor and the
temperature stepping twice after every second critic step (CleanRL's ``policy_frequency=2``: ``SAC(policy_delay=2)``; with
``--policy-delay 1`` parllel's fused update steps critic, actor and
temperature together from one backward pass, about a third less autograd work
per step), 1M env steps.

What differs from CleanRL: CleanRL squashes the log-std into [-5, 2] with a
tanh; here it is clipped. The replay stores observations as float32 (the
env's are float64).

The default env is HalfCheetah-v4 (v4 runs with the installed mujoco; with
a mujoco that no longer loads v4, pass ``--env-id HalfCheetah-v5``). The
column ``train/return_mean`` of ``logs/progress.csv`` is the mean return of
the last 100 training episodes. Writes a run directory under ``runs/``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Literal

import gymnasium as gym
import numpy as np
import torch

from parllel.builders import build_eval_sampler, build_replay_tree
from parllel.cages import CageOptions, build_cage
from parllel.envs.mujoco import make_mujoco_env
from parllel.errors import ConfigError
from parllel.replays import UniformReplay
from parllel.runners import OffPolicyRunner, RunSettings
from parllel.runners.cli import parse_config, run_main
from parllel.runners.off_policy import AttributeSchedule
from parllel.samplers import FeedForwardSampler
from parllel.seeding import Seeds
from parllel.torch import PolicyExport, TorchHandler
from parllel.torch.agents import build_sac_agent
from parllel.torch.algos import SAC, EntropyCoefficient


@dataclasses.dataclass
class Config:
    env_id: str = "HalfCheetah-v4"
    """gymnasium MuJoCo env id (v4 as CleanRL's runs; v5 works too)"""
    seed: int = 0
    """master seed (python, numpy, torch and the env)"""
    batch_T: int = 1
    """env steps per batch (one env): update after every step"""
    total_steps: int = 1_000_000
    """env steps to train for"""
    replay_size: int = 1_000_000
    """replay capacity in env steps"""
    batch_size: int = 256
    """transitions per gradient update"""
    learning_starts: int = 5_000
    """uniform random actions until this many env steps are stored"""
    replay_ratio: float = 1.0
    """gradient updates per env step"""
    policy_lr: float = 3e-4
    """Adam learning rate of the actor"""
    q_lr: float = 1e-3
    """Adam learning rate of the critics and the entropy temperature"""
    gamma: float = 0.99
    """discount factor"""
    tau: float = 0.005
    """target-critic averaging rate"""
    policy_delay: int = 2
    """critic steps per actor update; each actor update is that many steps (1: fused)"""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """hidden layer widths of actor and critics"""
    min_log_std: float = -5.0
    """lower bound of the actor's log-std"""
    max_log_std: float = 2.0
    """upper bound of the actor's log-std"""
    max_episode_steps: int | None = None
    """end episodes (truncate) after this many steps (None: the env's own limit)"""
    checkpoint_replay_contents: bool = False
    """save every stored transition in checkpoints"""
    backend: Literal["torch", "jax"] = "torch"
    """learning library: torch, or JAX (flax networks, each batch's updates one
    compiled call)"""
    seeds: int = 1
    """--backend jax: train seeds seed, seed+1, ... as one program (one run directory each)"""
    run: RunSettings = RunSettings.field(
        eval_interval_steps=50_000,
        eval_episodes=5,
        log_interval_steps=5_000,
        checkpoint_interval_steps=100_000,
    )
    """run directory, console, logging, evaluation and checkpoints"""


QUICK = dict(
    total_steps=400,
    replay_size=10_000,
    learning_starts=64,
    batch_size=64,
    hidden_sizes=(32, 32),
    max_episode_steps=64,  # episodes end within the run (and evaluations stay short)
    log_interval_steps=100,
    eval_interval_steps=200,
    eval_episodes=2,
    checkpoint_interval_steps=5_000,
)
"""the --quick preset: a tiny smoke run"""


def run_name(config: Config) -> str:
    """The run directory's name: ``mujoco-sac-<env id>`` (its ``/`` as ``-``),
    e.g. ``mujoco-sac-Hopper-v4-<timestamp>``."""
    return f"mujoco-sac-{config.env_id.replace('/', '-')}"


def make_env(env_id: str, max_episode_steps: int | None = None) -> gym.Env:
    """The MuJoCo env as ``gym.make`` gives it (without MuJoCo's settotalmass
    and v4's "out of date" notices)."""
    return make_mujoco_env(env_id, max_episode_steps=max_episode_steps)


def build_agent(config: Config, spaces: Any, seeds: Seeds) -> Any:
    """The squashed Gaussian actor and twin Q critic for ``spaces``."""
    options = dict(
        hidden_sizes=config.hidden_sizes,
        min_log_std=config.min_log_std,
        max_log_std=config.max_log_std,
    )
    if config.backend == "jax":
        from parllel.jax.agents import build_sac_agent as build_jax_sac_agent

        # the learner's stream initializes the weights
        return build_jax_sac_agent(
            spaces.observation, spaces.action, seed=seeds.torch, **options
        )
    return build_sac_agent(spaces.observation, spaces.action, **options)


def build_handler(config: Config, agent: Any, n_envs: int, seed: int | None) -> Any:
    """The handler that runs ``agent`` on the sample tree (torch or JAX)."""
    if config.backend == "jax":
        from parllel.jax import JaxHandler

        return JaxHandler(agent, n_envs=n_envs, seed=seed)
    return TorchHandler(agent, n_envs=n_envs, seed=seed)


def policy_export(config: Config) -> Any:
    """What exports the run's policy: policy.pt (torch) or policy.npz (JAX)."""
    if config.backend == "jax":
        from parllel.jax.export import PolicyExport as JaxPolicyExport

        return JaxPolicyExport
    return PolicyExport


def build_sac(config: Config, agent: Any, seeds: Seeds) -> Any:
    """SAC: one update per env step; alpha is learned, starting at 1; Adam
    with the actor's learning rate and the critics' (alpha's too)."""
    options = dict(
        tau=config.tau,
        replay_ratio=config.replay_ratio,
        policy_delay=config.policy_delay,
    )
    if config.backend == "jax":
        from parllel.jax.algos import SAC as JaxSAC
        from parllel.jax.algos import EntropyCoefficient as JaxAlpha
        from parllel.jax.algos import build_sac_optimizers

        optimizers = build_sac_optimizers(
            config.q_lr, actor_learning_rate=config.policy_lr
        )
        # every update of a batch in one compiled call
        return JaxSAC(agent, optimizers, JaxAlpha(1.0), seed=seeds.torch, **options)
    alpha = EntropyCoefficient(1.0)
    optimizer = torch.optim.Adam(  # one fused Adam, a parameter group each
        [
            {"params": agent.actor.parameters(), "lr": config.policy_lr},
            {"params": agent.critic.parameters(), "lr": config.q_lr},
            {"params": [alpha.log_alpha], "lr": config.q_lr},
        ],
        lr=config.q_lr,
        fused=True,
    )
    return SAC(agent, optimizer, alpha, **options)


def train_seeds(config: Config, resume: str | None) -> list[dict]:
    """``--seeds K``: K runs (master seeds ``seed .. seed + K - 1``) in one
    program: one cage of K envs, each seeded from its run's seeds, one vmapped
    policy step and one vmapped SAC update; each run samples its own env's
    transitions with its own replay RNG and writes an ordinary run directory
    inside the group directory (docs/seeds.md)."""
    from parllel.jax.algos import SeededSAC
    from parllel.jax.seeds import SeededHandler, SeedStack
    from parllel.replays.per_run import PerRunReplay
    from parllel.runners.seed_runs import start_seed_runs
    from parllel.runners.seeds import SeedsRunner

    K, n_eval = config.seeds, config.run.eval_episodes  # eval envs per run
    runs = start_seed_runs(
        config.run, run_name(config), config, seeds=K, master=config.seed,
        n_envs=1, n_eval_envs=n_eval, resume=resume,
    )  # fmt: skip
    # every run's env in one cage: run k owns column k
    env_factory = functools.partial(make_env, config.env_id, config.max_episode_steps)
    cage = build_cage(
        env_factory, K, parallel="serial", options=CageOptions(seed=runs.env_seeds)
    )
    stack = SeedStack([build_agent(config, cage.spaces, seeds) for seeds in runs.seeds])
    handler = SeededHandler(stack, 1, seeds=[seeds.actions for seeds in runs.seeds])
    replay_tree = build_replay_tree(
        cage, handler, config.batch_T, config.replay_size, observation_dtype=np.float32
    )
    replay = PerRunReplay(  # run k samples its own column with its own rng
        replay_tree,
        config.batch_size,
        [np.random.default_rng(seeds.replay) for seeds in runs.seeds],
        learning_starts=config.learning_starts,
        discount=config.gamma,
    )
    sampler = FeedForwardSampler(cage, handler, replay_tree)
    eval_sampler, eval_cage = build_eval_sampler(
        env_factory,
        SeededHandler(stack, n_eval, seeds=[seeds.actions for seeds in runs.seeds]),
        K * n_eval,
        K * n_eval,
        seed=runs.eval_env_seeds,
    )
    sacs = [
        build_sac(config, agent, seeds)
        for agent, seeds in zip(stack.agents, runs.seeds)
    ]
    seeded = SeededSAC(sacs, stack, seeds=[seeds.master for seeds in runs.seeds])
    runner = SeedsRunner(
        sampler,
        seeded,
        config.total_steps,
        runs.seed_runs(  # each run's checkpoint holds what a single run's does
            lambda k: {
                "agent": seeded.run_agent(k),
                "sac": seeded.run_state(k),
                "replay": replay.run_checkpoint(k),
            },
            handler.action_key,
        ),
        replay=replay,
        callbacks=[  # warm-up: uniform random actions until learning starts
            AttributeSchedule(
                seeded, "random_actions", lambda step: step < config.learning_starts
            )
        ],
        config_keys=[
            "env_id",
            "batch_T",
            "replay_size",
            "hidden_sizes",
            "backend",
            "seeds",
        ],
        **runs.runner_options(config.total_steps, eval_sampler, n_eval),
    )
    return runs.train(
        runner,
        close=(cage, eval_cage, replay_tree),
        policy=lambda objects: policy_export(config)(  # each run's policy.npz
            objects["agent"],
            env_id=config.env_id,
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
        if config.backend != "jax" or config.checkpoint_replay_contents:
            raise ConfigError(
                "--seeds K runs with --backend jax and checkpoints no replay "
                "contents: add --backend jax (and leave out "
                "--checkpoint-replay-contents)"
            )
        return train_seeds(config, resume)
    n_eval = config.run.eval_episodes
    seeds = Seeds.from_master(config.seed, n_envs=1, n_eval_envs=n_eval)
    run = config.run.start(run_name(config), config, seeds, resume)

    # one env in this process; the squashed Gaussian actor and twin Q critic
    env_factory = functools.partial(make_env, config.env_id, config.max_episode_steps)
    cage = build_cage(
        env_factory, 1, parallel="serial", options=CageOptions(seed=seeds.envs)
    )
    agent = build_agent(config, cage.spaces, seeds)
    handler = build_handler(config, agent, 1, seeds.actions)

    # the full-size replay tree: the sampler's [T, 1] window slides over it,
    # so every step is written once, straight into the replay
    replay_tree = build_replay_tree(
        cage, handler, config.batch_T, config.replay_size, observation_dtype=np.float32
    )
    replay = UniformReplay(
        replay_tree,
        config.batch_size,
        np.random.default_rng(seeds.replay),
        learning_starts=config.learning_starts,
        discount=config.gamma,
    )
    sampler = FeedForwardSampler(cage, handler, replay_tree)
    warmup = AttributeSchedule(  # uniform random actions until learning starts
        agent, "random_actions", lambda step: step < config.learning_starts
    )
    eval_sampler, eval_cage = build_eval_sampler(
        env_factory,
        build_handler(config, agent, n_eval, seed=None),
        n_eval,
        n_eval,
        seed=seeds.eval_envs,
    )

    # the algorithm
    sac = build_sac(config, agent, seeds)
    jax = config.backend == "jax"

    runner = OffPolicyRunner(
        sampler,
        replay,
        sac,
        config.total_steps,
        checkpoint_objects=(
            {"agent": agent, "sac": sac}  # a JAX agent's parameters, numpy leaves
            if jax
            else {"actor": agent.actor, "critic": agent.critic, "sac": sac}
        ),
        checkpoint_replay_contents=config.checkpoint_replay_contents,
        config_keys=["env_id", "batch_T", "replay_size", "hidden_sizes"]
        + (["backend"] if jax else []),
        callbacks=[warmup],
        **run.runner_options(config.total_steps, eval_sampler),
    )
    return run.train(
        runner,
        close=(cage, eval_cage, replay_tree),
        # writes policy.pt (torch) or policy.npz (JAX, plays in numpy)
        policy=policy_export(config)(
            agent,
            env_id=config.env_id,
            observation_space=cage.spaces.observation,
            action_space=cage.spaces.action,
        ),
    )


if __name__ == "__main__":
    run_main(main, parse_config(Config, quick=QUICK, description=__doc__))
