"""Train PPO with parameter sharing on MPE's cooperative simple_spread (3 agents).

    python examples/multiagent/train_ppo_spread.py                  # the full run (~4 min)
    python examples/multiagent/train_ppo_spread.py --quick          # a tiny smoke run
    python examples/multiagent/train_ppo_spread.py --parallel serial
    python examples/multiagent/train_ppo_spread.py --resume runs/spread-ppo-...

Three agents must cover three landmarks without colliding. Each agent's
reward is half the shared distance term (minus the sum over landmarks of
the distance to the nearest agent) and half its own collision penalty
(simple_spread's ``local_ratio=0.5``). The PettingZoo parallel env runs in worker
processes through :class:`~parllel.multiagent.parallel_env.ParallelEnvAdapter`: the agents
are one more dimension of the sample tree (``[T, B, A, ...]``). One
actor-critic, built from one agent's spaces, acts for every agent (it sees
``[B, A, obs]`` observations); :class:`~parllel.transforms.MultiAgentGAE`
estimates each agent's advantages (``--normalize-rewards``: on rewards
scaled per agent by :class:`~parllel.transforms.NormalizeRewards`) and PPO
trains on the agents' rows folded into the env dimension
(:class:`~parllel.torch.algos.FlattenAgents`).

The logged returns are the team's: the sum over agents of their rewards in
an episode (25 steps; random actions score about -82);
``train/agent_return_mean`` and ``eval/agent_return_mean`` are one agent's.
Discounting is short (gamma 0.95): an agent's reward is a distance at every
step, so the value of the next few steps is what steers it.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any, Literal

import numpy as np
import torch
from mpe2 import simple_spread_v3

from parllel import fields
from parllel.builders import build_eval_sampler, build_sample_tree
from parllel.cages import CageOptions, build_cage
from parllel.multiagent import (
    MultiAgentTrajInfo,
    make_parallel_env_factory,
    unstack_space,
)
from parllel.runners import Callback, OnPolicyRunner, RunSettings
from parllel.runners.cli import parse_config, run_main
from parllel.samplers import FeedForwardSampler
from parllel.schedules import linear_schedule
from parllel.seeding import Seeds
from parllel.torch import TorchHandler
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.algos import PPO, ActorCriticEvaluator, FlattenAgents, adam
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
    batch_T: int = 50
    """env steps per env per batch (2 episodes of 25 steps)"""
    total_steps: int = 320_000
    """env steps to train for (each step moves every agent)"""
    gamma: float = 0.95
    """discount factor"""
    gae_lambda: float = 0.95
    """GAE lambda"""
    learning_rate: float = 1e-3
    """initial Adam learning rate (decays linearly to 0)"""
    epochs: int = 10
    """passes over each batch"""
    minibatches: int = 4
    """minibatches per epoch"""
    entropy_coef: float = 0.01
    """weight of the entropy bonus"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layer widths of the shared actor-critic MLP"""
    shared_trunk: bool = False
    """one MLP trunk for the policy and value heads (default: one each)"""
    normalize_rewards: bool = False
    """scale each agent's rewards by the running std of its discounted return"""
    parallel: Literal["process", "serial"] = "process"
    """where envs step: worker processes or this process"""
    run: RunSettings = RunSettings.field(
        eval_interval_steps=32_000,
        eval_episodes=16,
        log_interval_steps=8_000,
        checkpoint_interval_steps=160_000,
    )
    """run directory, console, logging, evaluation and checkpoints"""


QUICK = dict(
    n_envs=4,
    batch_T=32,
    total_steps=512,
    eval_interval_steps=256,
    log_interval_steps=256,
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
    """Logs the mean return of one agent next to the team's, in training and evaluation.

    ``train/agent_return_mean``: over the agents of the last ``window``
    training episodes; ``eval/agent_return_mean``: over the agents of the
    last evaluation's episodes. It is also the runner's eval sampler: it
    passes ``collect`` on to ``eval_sampler`` and keeps the episodes.
    """

    def __init__(self, eval_sampler: Any, window: int = 100) -> None:
        self.eval_sampler = eval_sampler
        self.train_returns: deque[float] = deque(maxlen=window)
        self.eval_returns: list[float] = []

    def collect(self) -> list:
        """Run the evaluation; keep the mean agent return of each episode."""
        traj_infos = self.eval_sampler.collect()
        self.eval_returns = [float(np.mean(t.agent_returns)) for t in traj_infos]
        return traj_infos

    def on_collect_end(self, runner: Any, batch: Any, traj_infos: list) -> None:
        self.train_returns.extend(float(np.mean(t.agent_returns)) for t in traj_infos)

    def on_update_end(self, runner: Any, metrics: dict[str, float]) -> None:
        if self.train_returns:
            metrics["train/agent_return_mean"] = float(np.mean(self.train_returns))

    def on_eval_end(self, runner: Any, eval_metrics: dict[str, float]) -> None:
        if self.eval_returns:
            eval_metrics["eval/agent_return_mean"] = float(np.mean(self.eval_returns))


def main(config: Config, resume: str | None = None) -> dict:
    torch.set_num_threads(1)
    seeds = Seeds.from_master(config.seed, n_envs=config.n_envs, n_eval_envs=4)
    run = config.run.start("spread-ppo", config, seeds, resume)
    factory = make_env_factory(config)
    cages = build_cage(
        factory,
        config.n_envs,
        parallel=config.parallel,
        options=CageOptions(seed=seeds.envs, traj_info_type=MultiAgentTrajInfo),
    )
    # one model for every agent (parameter sharing), from one agent's spaces
    model, distribution = build_actor_critic(
        unstack_space(cages.spaces.observation),
        unstack_space(cages.spaces.action),
        hidden_sizes=config.hidden_sizes,
        shared_trunk=config.shared_trunk,
    )
    agent = ActorCriticAgent(model, distribution)
    # sees [B, A, obs]; draws its actions from their own stream
    handler = TorchHandler(agent, n_envs=config.n_envs, seed=seeds.actions)
    sample_tree = build_sample_tree(cages, handler, config.batch_T)
    transforms: list = []
    if config.normalize_rewards:
        # each agent's rewards scaled by the running std of its return (as
        # SB3's VecNormalize does for one agent)
        transforms.append(
            NormalizeRewards(
                sample_tree,
                config.gamma,
                reward_field=(fields.ENV_INFO, fields.AGENT_REWARD),
                done_fields=(
                    (fields.ENV_INFO, fields.AGENT_TERMINATED),
                    (fields.ENV_INFO, fields.AGENT_TRUNCATED),
                ),
            )
        )
    # per-agent advantages and returns [T, B, A]
    transforms.append(
        MultiAgentGAE(sample_tree, gamma=config.gamma, gae_lambda=config.gae_lambda)
    )
    transform = Compose(transforms)
    sampler = FeedForwardSampler(cages, handler, sample_tree, transform=transform)
    eval_sampler, eval_cage = build_eval_sampler(
        factory,
        TorchHandler(agent, n_envs=4),
        4,
        config.run.eval_episodes,
        seed=seeds.eval_envs,
        traj_info_type=MultiAgentTrajInfo,
    )
    agent_returns = AgentReturns(eval_sampler)

    ppo = PPO(
        ActorCriticEvaluator(model, distribution),
        adam(model.parameters(), config.learning_rate),
        learning_rate=linear_schedule(config.learning_rate, 0.0),
        epochs=config.epochs,
        minibatches=config.minibatches,
        entropy_coef=config.entropy_coef,
        normalize_advantage=True,
    )
    runner = OnPolicyRunner(
        sampler,
        FlattenAgents(ppo),  # every agent's rows, [T, B * A], masked by agent_mask
        config.total_steps,
        checkpoint_objects={"model": model, "ppo": ppo, "transform": transform},
        config_keys=[
            "n_agents",
            "n_envs",
            "batch_T",
            "hidden_sizes",
            "shared_trunk",
            "normalize_rewards",
        ],
        callbacks=[agent_returns],
        # the eval sampler: eval_sampler's episodes, per agent too
        **run.runner_options(config.total_steps, agent_returns),
    )
    return run.train(runner, close=(cages, sample_tree, eval_cage))


if __name__ == "__main__":
    run_main(main, parse_config(Config, quick=QUICK, description=__doc__))
