"""JAX algorithms: :class:`PPO` (one compiled update), optimizers with torch's
semantics (:func:`adam`, :func:`clip_grad_norm`)."""

from parllel.jax.algos.optimizers import adam, clip_grad_norm
from parllel.jax.algos.ppo import PPO, minibatch_permutations

__all__ = ["PPO", "adam", "clip_grad_norm", "minibatch_permutations"]
