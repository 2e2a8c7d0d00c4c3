"""The JAX backend: flax models, JAX agents, JaxHandler and compiled algorithms.

- :class:`JaxHandler`: runs a JAX agent's jitted policy on the sample tree.
- :mod:`parllel.jax.models`: flax.linen networks with the torch builders'
  semantics, parameter init and conversion from and to torch state dicts.
- :mod:`parllel.jax.distributions`, :mod:`parllel.jax.agents`,
  :mod:`parllel.jax.algos` (PPO as one compiled update).

Nothing here imports torch (conversions take numpy arrays). Without jax,
flax or optax installed, importing it raises
:class:`~parllel.errors.MissingDependencyError` naming the ``jax`` extra.
"""

import importlib.util

from parllel.errors import MissingDependencyError
from parllel.errors.base import install_hint

_missing = [
    name for name in ("jax", "flax", "optax") if importlib.util.find_spec(name) is None
]
if _missing:
    raise MissingDependencyError(
        f"the JAX backend needs {', '.join(_missing)}: {install_hint('jax')}"
    )

from parllel.jax.handler import JaxHandler  # noqa: E402

__all__ = ["JaxHandler"]
