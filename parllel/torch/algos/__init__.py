"""Torch RL algorithms and the protocol they use to evaluate an agent's policy."""

from parllel.torch.algos.batch import PolicyBatch
from parllel.torch.algos.dqn import DQN, epsilon_schedule
from parllel.torch.algos.evaluator import (
    ActorCriticEvaluator,
    PolicyEvaluation,
    PolicyEvaluator,
)
from parllel.torch.algos.ppo import PPO
from parllel.torch.algos.sac import SAC
from parllel.torch.algos.schedules import Schedule, constant_schedule, linear_schedule

__all__ = [
    "DQN",
    "PPO",
    "SAC",
    "ActorCriticEvaluator",
    "PolicyBatch",
    "PolicyEvaluation",
    "PolicyEvaluator",
    "Schedule",
    "constant_schedule",
    "epsilon_schedule",
    "linear_schedule",
]
