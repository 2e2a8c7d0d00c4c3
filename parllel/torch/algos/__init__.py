"""Torch RL algorithms and the protocol they use to evaluate an agent's policy.

Every algorithm receives its optimizer (``PPO(evaluator, optimizer)``,
``SAC(agent, optimizer, alpha)``, ``DQN(agent, optimizer)``); :func:`adam` and
:func:`build_sac_optimizer` build the usual ones.
"""

from parllel.torch.algos.dqn import DQN
from parllel.torch.algos.evaluator import ActorCriticEvaluator
from parllel.torch.algos.multiagent import FlattenAgents, PerPolicy
from parllel.torch.algos.optimizers import adam
from parllel.torch.algos.ppo import PPO
from parllel.torch.algos.sac import SAC
from parllel.torch.algos.sac_setup import EntropyCoefficient, build_sac_optimizer
from parllel.torch.algos.vtrace_correction import VTraceCorrection

__all__ = [
    "DQN",
    "PPO",
    "SAC",
    "ActorCriticEvaluator",
    "EntropyCoefficient",
    "FlattenAgents",
    "PerPolicy",
    "VTraceCorrection",
    "adam",
    "build_sac_optimizer",
]
