"""Train SAC on Pendulum-v1: one env, one gradient update per env step.

    python examples/pendulum/train_sac.py            # eval return >= -200 in ~5k steps
    python examples/pendulum/train_sac.py --quick    # a tiny smoke run
    python examples/pendulum/train_sac.py --async    # the env steps while SAC updates
    python examples/pendulum/train_sac.py --backend jax  # the JAX SAC (the jax extra)
    python examples/pendulum/train_sac.py --backend jax --seeds 8  # 8 seeds, one program
    python examples/pendulum/train_sac.py --resume runs/pendulum-sac-...
    python examples/pendulum/train_sac.py --help     # every Config field is a flag

Writes a run directory (config, metadata, progress.csv, TensorBoard logs,
checkpoints, learning_curve.png) under ``runs/``. Stops early once the mean
eval return reaches ``target_return``.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

import gymnasium as gym
import numpy as np
import torch
import tyro

from parllel.builders import build_eval_sampler, build_replay_tree, build_sample_tree
from parllel.cages import CageOptions, ProcessCage, build_cage
from parllel.errors import ConfigError
from parllel.replays import UniformReplay
from parllel.runners import Callback, OffPolicyRunner, RunSettings
from parllel.runners.cli import parse_config, run_main
from parllel.runners.off_policy import AttributeSchedule
from parllel.samplers import BackgroundSampler, FeedForwardSampler
from parllel.seeding import Seeds
from parllel.torch import PolicyExport, SharedWeights, TorchHandler
from parllel.torch.agents import build_sac_agent
from parllel.torch.algos import SAC, EntropyCoefficient, build_sac_optimizer


@dataclasses.dataclass
class Config:
    seed: int = 0
    """master seed (python, numpy, torch and the env)"""
    batch_T: int = 1
    """env steps per batch (one env): update after every step"""
    total_steps: int = 20_000
    """env steps to train for"""
    replay_size: int = 1_000_000
    """replay capacity in env steps"""
    batch_size: int = 256
    """transitions per gradient update"""
    learning_starts: int = 256
    """uniform random actions until this many env steps are stored"""
    replay_ratio: float = 1.0
    """gradient updates per env step"""
    learning_rate: float = 1e-3
    """Adam learning rate (actor, critics, temperature)"""
    gamma: float = 0.99
    """discount factor"""
    tau: float = 0.005
    """target-critic averaging rate"""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """hidden layer widths of actor and critics"""
    target_return: float | None = -200.0
    """stop once the mean eval return reaches this (None: never)"""
    checkpoint_replay_contents: bool = False
    """save every stored transition in checkpoints"""
    async_sampling: Annotated[bool, tyro.conf.arg(aliases=("--async",))] = False
    """step the env in a background process while SAC updates (batches reach
    the replay one batch later; replay_ratio still sets updates per env step)"""
    max_lag: int = 1
    """--async: policy versions a batch may be behind the learner"""
    backend: Literal["torch", "jax"] = "torch"
    """learning library: torch, or JAX (flax networks, each batch's updates one
    compiled call)"""
    seeds: int = 1
    """--backend jax: train seeds seed, seed+1, ... as one program (one run
    directory each; every run trains to --total-steps, no --target-return stop)"""
    run: RunSettings = RunSettings.field(
        eval_interval_steps=1_000, checkpoint_interval_steps=5_000
    )
    """run directory, console, logging, evaluation and checkpoints"""


QUICK = dict(
    total_steps=400,
    learning_starts=64,
    batch_size=64,
    hidden_sizes=(32, 32),
    eval_interval_steps=200,
    eval_episodes=2,
)
"""the --quick preset: a tiny smoke run"""


def make_env() -> gym.Env:
    return gym.make("Pendulum-v1")


class StopAtReturn(Callback):
    """Ends training after the first evaluation whose mean return reaches a target."""

    def __init__(self, target: float | None) -> None:
        self.target = target

    def on_eval_end(self, runner: Any, eval_metrics: dict[str, float]) -> None:
        mean = eval_metrics["eval/return_mean"]
        if self.target is not None and mean >= self.target:
            print(
                f"eval return {mean:.1f} reached --target-return {self.target:g}: "
                "training stops here (--target-return None trains to --total-steps)"
            )
            runner.request_stop()


class RandomUntil:
    """Sampler transform for the background process: uniform random actions
    (the warm-up) until ``steps`` env steps were collected.

    It counts the batches it sees (its state is checkpointed with the
    background sampler's) and switches the agent's ``random_actions`` off for
    the batches after that, as ``AttributeSchedule`` does in the learner's
    process when sampling is synchronous.
    """

    def __init__(self, agent: Any, steps: int, steps_per_batch: int) -> None:
        self.agent, self.steps, self.per_batch = agent, int(steps), steps_per_batch
        self.collected = 0
        agent.random_actions = self.steps > 0

    def __call__(self, tree: Any) -> Any:
        self.collected += self.per_batch
        self.agent.random_actions = self.collected < self.steps
        return tree

    def state_dict(self) -> dict[str, int]:
        return {"collected": self.collected}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.collected = int(state["collected"])
        self.agent.random_actions = self.collected < self.steps


def build_agent(config: Config, spaces: Any, seeds: Seeds) -> Any:
    """The squashed Gaussian actor and twin Q critic for ``spaces``."""
    if config.backend == "jax":
        from parllel.jax.agents import build_sac_agent as build_jax_sac_agent

        return build_jax_sac_agent(
            spaces.observation,
            spaces.action,
            seed=seeds.torch,  # the learner's stream initializes the weights
            hidden_sizes=config.hidden_sizes,
        )
    return build_sac_agent(
        spaces.observation, spaces.action, hidden_sizes=config.hidden_sizes
    )


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
    """SAC: one update per env step; alpha is learned, starting at 1."""
    if config.backend == "jax":
        from parllel.jax.algos import SAC as JaxSAC
        from parllel.jax.algos import EntropyCoefficient as JaxAlpha
        from parllel.jax.algos import build_sac_optimizers

        return JaxSAC(  # every update of a batch in one compiled call
            agent,
            build_sac_optimizers(config.learning_rate),
            JaxAlpha(1.0),
            seed=seeds.torch,  # the reparameterization noise
            tau=config.tau,
            replay_ratio=config.replay_ratio,
        )
    # one fused Adam steps actor, critic and alpha together
    alpha = EntropyCoefficient(1.0)
    optimizer = build_sac_optimizer(agent, alpha, learning_rate=config.learning_rate)
    return SAC(
        agent, optimizer, alpha, tau=config.tau, replay_ratio=config.replay_ratio
    )


def build_background_sampler(
    config: Config, seeds: Seeds, weights: SharedWeights
) -> FeedForwardSampler:
    """Runs in the background process: the env and an actor following ``weights``.

    It fills ordinary ``[T, B]`` batches; the learner copies each into its
    replay (``replay.record_batch``).
    """
    torch.set_num_threads(1)
    cage = build_cage(
        make_env, 1, parallel="serial", options=CageOptions(seed=seeds.envs)
    )
    agent = build_agent(config, cage.spaces, seeds)
    handler = TorchHandler(agent, n_envs=1, seed=seeds.actions)
    handler.follow_weights(weights, modules={"actor": agent.actor})
    tree = build_sample_tree(cage, handler, config.batch_T, final_observation=True)
    warmup = RandomUntil(agent, config.learning_starts, config.batch_T)
    return FeedForwardSampler(cage, handler, tree, transform=warmup)


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
        config.run, "pendulum-sac", config, seeds=K, master=config.seed,
        n_envs=1, n_eval_envs=n_eval, resume=resume,
    )  # fmt: skip
    # every run's env in one cage: run k owns column k
    cage = build_cage(
        make_env, K, parallel="serial", options=CageOptions(seed=runs.env_seeds)
    )
    stack = SeedStack([build_agent(config, cage.spaces, seeds) for seeds in runs.seeds])
    handler = SeededHandler(stack, 1, seeds=[seeds.actions for seeds in runs.seeds])
    replay_tree = build_replay_tree(cage, handler, config.batch_T, config.replay_size)
    replay = PerRunReplay(  # run k samples its own column with its own rng
        replay_tree,
        config.batch_size,
        [np.random.default_rng(seeds.replay) for seeds in runs.seeds],
        learning_starts=config.learning_starts,
        discount=config.gamma,
    )
    sampler = FeedForwardSampler(cage, handler, replay_tree)
    eval_sampler, eval_cage = build_eval_sampler(
        make_env,
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
        config_keys=["batch_T", "replay_size", "hidden_sizes", "backend", "seeds"],
        **runs.runner_options(config.total_steps, eval_sampler, n_eval),
    )
    return runs.train(
        runner,
        close=(cage, eval_cage, replay_tree),
        policy=lambda objects: policy_export(config)(  # each run's policy.npz
            objects["agent"],
            env_id="Pendulum-v1",
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
        if config.backend != "jax" or config.async_sampling:
            raise ConfigError(
                "--seeds K runs with --backend jax, synchronously: add --backend jax "
                "(and leave out --async)"
            )
        if config.checkpoint_replay_contents:
            raise ConfigError(
                "--seeds K checkpoints no replay contents (a resumed group refills "
                "its replay): leave out --checkpoint-replay-contents"
            )
        return train_seeds(config, resume)
    if config.backend == "jax" and config.async_sampling:
        raise ConfigError("--backend jax samples synchronously: no --async")
    seeds = Seeds.from_master(
        config.seed, n_envs=1, n_eval_envs=config.run.eval_episodes
    )
    run = config.run.start("pendulum-sac", config, seeds, resume)

    # one env in this process, the agent (squashed Gaussian actor, twin Q)
    cage = build_cage(
        make_env, 1, parallel="serial", options=CageOptions(seed=seeds.envs)
    )
    agent = build_agent(config, cage.spaces, seeds)
    handler = build_handler(config, agent, 1, seeds.actions)

    # the full-size replay tree: the sampler's [T, B] window slides over it,
    # so every step is written once, straight into the replay (no copy)
    replay_tree = build_replay_tree(
        cage,
        handler,
        config.batch_T,
        config.replay_size,
        storage="shared" if isinstance(cage, ProcessCage) else "local",
    )
    replay = UniformReplay(
        replay_tree,
        config.batch_size,
        np.random.default_rng(seeds.replay),
        learning_starts=config.learning_starts,
        discount=config.gamma,
    )
    callbacks: list[Callback] = [StopAtReturn(config.target_return)]
    if config.async_sampling:
        # the env and a copy of the actor step in a background process; this
        # one only learns (the cage above only gave the replay its layout)
        cage.close()
        weights = handler.share_weights(modules={"actor": agent.actor})
        sampler: Any = BackgroundSampler(
            build_background_sampler, config, seeds, weights, max_lag=config.max_lag
        )
        close: tuple = (sampler, weights)
        publisher: TorchHandler | None = handler
    else:
        sampler = FeedForwardSampler(cage, handler, replay_tree)
        # warm-up: uniform random actions until learning starts
        callbacks.append(
            AttributeSchedule(
                agent, "random_actions", lambda step: step < config.learning_starts
            )
        )
        close, publisher = (cage,), None
    eval_sampler, eval_cage = build_eval_sampler(
        make_env,
        build_handler(config, agent, config.run.eval_episodes, seed=None),
        config.run.eval_episodes,
        config.run.eval_episodes,
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
        config_keys=["batch_T", "replay_size", "hidden_sizes", "async_sampling"]
        + (["backend"] if jax else []),
        callbacks=callbacks,
        publisher=publisher,
        **run.runner_options(config.total_steps, eval_sampler),
    )
    return run.train(
        runner,
        close=(*close, eval_cage, replay_tree),
        # writes policy.pt (torch) or policy.npz (JAX, plays in numpy)
        policy=policy_export(config)(
            agent,
            env_id="Pendulum-v1",
            observation_space=cage.spaces.observation,
            action_space=cage.spaces.action,
        ),
    )


if __name__ == "__main__":
    run_main(main, parse_config(Config, quick=QUICK, description=__doc__))
