"""The JAX backend: flax models, JAX agents, JaxHandler and compiled algorithms.

- :class:`JaxHandler`: runs a JAX agent's jitted policy on the sample tree.
- :mod:`parllel.jax.models`: flax.linen networks with the torch builders'
  semantics, parameter init and conversion from and to torch state dicts.
- :mod:`parllel.jax.distributions`, :mod:`parllel.jax.agents`,
  :mod:`parllel.jax.algos` (PPO as one compiled update).

Nothing here imports torch (conversions take numpy arrays).
"""

from parllel.jax.handler import JaxHandler

__all__ = ["JaxHandler"]
