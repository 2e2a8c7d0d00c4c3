"""Torch RL algorithms and the protocol they use to evaluate an agent's policy.

Every algorithm receives its optimizer (``PPO(evaluator, optimizer)``,
``SAC(agent, optimizer, alpha)``, ``DQN(agent, optimizer)``); :func:`adam` and
:func:`build_sac_optimizer` build the usual ones.
"""

from parllel.torch.algos.batch import PolicyBatch
from parllel.torch.algos.dqn import DQN, epsilon_schedule
from parllel.torch.algos.evaluator import (
    ActorCriticEvaluator,
    PolicyEvaluation,
    PolicyEvaluator,
)
from parllel.torch.algos.multiagent import FlattenAgents, PerPolicy, flatten_agents
from parllel.torch.algos.off_policy import adam
from parllel.torch.algos.ppo import PPO
from parllel.torch.algos.sac import SAC
from parllel.torch.algos.sac_setup import EntropyCoefficient, build_sac_optimizer
from parllel.torch.algos.schedules import Schedule, constant_schedule, linear_schedule
from parllel.torch.algos.vtrace_correction import VTraceCorrection

__all__ = [
    "DQN",
    "PPO",
    "SAC",
    "ActorCriticEvaluator",
    "EntropyCoefficient",
    "FlattenAgents",
    "PerPolicy",
    "PolicyBatch",
    "PolicyEvaluation",
    "PolicyEvaluator",
    "Schedule",
    "VTraceCorrection",
    "adam",
    "build_sac_optimizer",
    "constant_schedule",
    "epsilon_schedule",
    "flatten_agents",
    "linear_schedule",
]
