"""JAX algorithms: :class:`PPO` (one compiled update), :class:`SeededPPO` (K
runs in one call), :class:`SAC` (K updates in one call), :class:`SeededSAC` (K runs' SAC in one
call), DQN, and Adam with torch's semantics (:func:`adam`)."""

from parllel.jax.algos.dqn import DQN
from parllel.jax.algos.optimizers import adam
from parllel.jax.algos.ppo import PPO
from parllel.jax.algos.ppo_seeds import SeededPPO
from parllel.jax.algos.sac import SAC
from parllel.jax.algos.sac_seeds import SeededSAC
from parllel.jax.algos.sac_setup import EntropyCoefficient, build_sac_optimizers

__all__ = [
    "DQN",
    "PPO",
    "SAC",
    "EntropyCoefficient",
    "SeededPPO",
    "SeededSAC",
    "adam",
    "build_sac_optimizers",
]
