"""Train PPO with parameter sharing on MPE's cooperative simple_spread (3 agents).

    python examples/multiagent/train_ppo_spread.py                  # the full run (a few minutes)
    python examples/multiagent/train_ppo_spread.py --quick          # a tiny smoke run
    python examples/multiagent/train_ppo_spread.py --parallel serial
    python examples/multiagent/train_ppo_spread.py --resume runs/spread-ppo-...

Three agents must cover three landmarks without colliding; every agent
receives the team's reward. The PettingZoo parallel env runs in worker
processes through :class:`~parllel.multiagent.ParallelEnvAdapter`: the agents
are one more dimension of the sample tree (``[T, B, A, ...]``). One
actor-critic, built from one agent's spaces, acts for every agent (it sees
``[B, A, obs]`` observations); :class:`~parllel.transforms.MultiAgentGAE`
estimates each agent's advantages (on rewards scaled per agent by
:class:`~parllel.transforms.NormalizeRewards`) and PPO trains on the agents' rows folded
into the env dimension (:class:`~parllel.torch.algos.FlattenAgents`).

The logged returns are the team's: the sum over agents of their rewards in
an episode (25 steps); ``train/agent_return_mean`` is one agent's.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import numpy as np
import torch
from mpe2 import simple_spread_v3

from parllel import fields
from parllel.multiagent import (
    MultiAgentTrajInfo,
    make_parallel_env_factory,
    unstack_space,
)
from parllel.patterns import (
    build_cages,
    build_eval_sampler,
    build_run_logger,
    build_sample_tree,
    run_training,
)
from parllel.runners import Callback, OnPolicyRunner
from parllel.runtime import RunDirectory, Seeds, seed_everything
from parllel.runtime.cli import parse_config
from parllel.samplers import FeedForwardSampler
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.algos import (
    PPO,
    ActorCriticEvaluator,
    FlattenAgents,
    adam,
    linear_schedule,
)
from parllel.torch.handler import TorchHandler
from parllel.torch.models import build_actor_critic
from parllel.transforms import Compose, MultiAgentGAE, NormalizeRewards


@dataclasses.dataclass
class Config:
    seed: int = 0
    """master seed (python, numpy, torch and every env)"""
    n_agents: int = 3
    """agents (and landmarks) in simple_spread"""
    n_envs: int = 16
    """environments stepped side by side"""
    batch_T: int = 100
    """env steps per env per batch (4 episodes of 25 steps)"""
    total_steps: int = 600_000
    """env steps to train for (each step moves every agent)"""
    gamma: float = 0.95
    """discount factor"""
    gae_lambda: float = 0.95
    """GAE lambda"""
    learning_rate: float = 3e-4
    """initial Adam learning rate (decays linearly to 0)"""
    epochs: int = 4
    """passes over each batch"""
    minibatches: int = 4
    """minibatches per epoch"""
    entropy_coef: float = 0.01
    """weight of the entropy bonus"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layer widths of the shared actor-critic MLP"""
    eval_interval_steps: int = 50_000
    """env steps between evaluations (and log lines)"""
    eval_episodes: int = 16
    """deterministic episodes per evaluation"""
    checkpoint_interval_steps: int = 200_000
    """env steps between checkpoints (one is also written at the end)"""
    parallel: Literal["process", "serial"] = "process"
    """where envs step: worker processes or this process"""
    run_root: str = "runs"
    """directory the run directory is created in"""
    console: Literal["auto", "dashboard", "plain", "table"] = "auto"
    """terminal output: auto is the live dashboard on a terminal, plain lines otherwise"""


QUICK = dict(
    n_envs=4,
    batch_T=32,
    total_steps=512,
    eval_interval_steps=256,
    eval_episodes=2,
    epochs=1,
)
"""the --quick preset: a tiny smoke run"""


def make_env_factory(config: Config) -> Any:
    """A picklable factory of adapted simple_spread envs (built in the workers)."""
    return make_parallel_env_factory(
        simple_spread_v3.parallel_env,
        N=config.n_agents,
        max_cycles=25,
        continuous_actions=False,
    )


class AgentReturns(Callback):
    """Logs one agent's mean episode return next to the team's (``train/return_mean``)."""

    def __init__(self) -> None:
        self.returns: list[float] = []

    def on_collect_end(self, runner: Any, batch: Any, traj_infos: list) -> None:
        for traj_info in traj_infos:
            self.returns.extend(np.asarray(traj_info.agent_returns).tolist())
        self.returns = self.returns[-300:]

    def on_update_end(self, runner: Any, metrics: dict[str, float]) -> None:
        if self.returns:
            metrics["train/agent_return_mean"] = float(np.mean(self.returns))


def main(config: Config, resume: str | None = None) -> dict:
    torch.set_num_threads(1)
    seeds = Seeds.from_master(config.seed, n_envs=config.n_envs, n_eval_envs=4)
    seed_everything(seeds)
    run = (
        RunDirectory.open(resume)
        if resume
        else RunDirectory.create(
            config.run_root, "spread-ppo", config=config, seeds=seeds
        )
    )
    factory = make_env_factory(config)
    cages = build_cages(
        factory,
        config.n_envs,
        parallel=config.parallel,
        seed=seeds.envs,
        traj_info_type=MultiAgentTrajInfo,
    )
    # one model for every agent (parameter sharing), from one agent's spaces
    model, distribution = build_actor_critic(
        unstack_space(cages.spaces.observation),
        unstack_space(cages.spaces.action),
        hidden_sizes=config.hidden_sizes,
    )
    agent = ActorCriticAgent(model, distribution)
    handler = TorchHandler(agent, n_envs=config.n_envs)  # sees [B, A, obs]
    sample_tree = build_sample_tree(cages, handler, config.batch_T)
    # each agent's rewards scaled by the running std of its return (as SB3's
    # VecNormalize does for one agent), then per-agent advantages
    agent_rewards = NormalizeRewards(
        sample_tree,
        config.gamma,
        reward_field=(fields.ENV_INFO, fields.AGENT_REWARD),
        done_fields=(
            (fields.ENV_INFO, fields.AGENT_TERMINATED),
            (fields.ENV_INFO, fields.AGENT_TRUNCATED),
        ),
    )
    advantages = MultiAgentGAE(
        sample_tree, gamma=config.gamma, gae_lambda=config.gae_lambda
    )
    transform = Compose([agent_rewards, advantages])
    sampler = FeedForwardSampler(cages, handler, sample_tree, transform=transform)
    eval_sampler, eval_cage = build_eval_sampler(
        factory,
        TorchHandler(agent, n_envs=4),
        4,
        config.eval_episodes,
        seed=seeds.eval_envs,
    )

    ppo = PPO(
        ActorCriticEvaluator(model, distribution),
        adam(model.parameters(), config.learning_rate),
        learning_rate=linear_schedule(config.learning_rate, 0.0),
        epochs=config.epochs,
        minibatches=config.minibatches,
        entropy_coef=config.entropy_coef,
        normalize_advantage=True,
    )
    logger = build_run_logger(
        run, config.total_steps, resume=bool(resume), console=config.console
    )
    runner = OnPolicyRunner(
        sampler,
        FlattenAgents(ppo),  # every agent's rows, [T, B * A], masked by agent_mask
        config.total_steps,
        eval_sampler=eval_sampler,
        eval_interval_steps=config.eval_interval_steps,
        logger=logger,
        log_interval_steps=config.eval_interval_steps,
        checkpoint_dir=run.checkpoints_dir,
        checkpoint_interval_steps=config.checkpoint_interval_steps,
        checkpoint_objects={"model": model, "ppo": ppo, "transform": transform},
        config=dataclasses.asdict(config),
        config_keys=["n_agents", "n_envs", "batch_T", "hidden_sizes"],
        callbacks=[AgentReturns()],
    )
    return run_training(
        runner, run, resume=bool(resume), close=(cages, sample_tree, eval_cage)
    )


if __name__ == "__main__":
    main(*parse_config(Config, quick=QUICK, description=__doc__))
