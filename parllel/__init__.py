"""parllel: fast, composable reinforcement-learning sampling.

The layers and the direction of imports are described in ``docs/architecture.md``
(the map) and checked by the import-linter contracts in ``pyproject.toml``.
Importing :mod:`parllel` itself imports nothing heavy.
"""

__version__ = "0.1.0"
DISTRIBUTION = "parllel-rl"
"""the distribution's name (``pip``, ``importlib.metadata``); the import name is ``parllel``"""
