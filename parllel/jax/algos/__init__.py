"""JAX algorithms: :class:`PPO` (one compiled update), :class:`SeededPPO` (K
runs in one call), optimizers with torch's semantics (:func:`adam`,
:func:`clip_grad_norm`)."""

from parllel.jax.algos.optimizers import adam, clip_grad_norm
from parllel.jax.algos.ppo import PPO, minibatch_permutations
from parllel.jax.algos.ppo_seeds import SeededPPO

__all__ = ["PPO", "SeededPPO", "adam", "clip_grad_norm", "minibatch_permutations"]
