"""parllel: fast, composable reinforcement-learning sampling.

Layers (imports point down only): ``arrays`` -> ``tree`` -> ``transforms`` ->
``cages`` -> ``agents`` -> ``samplers`` / ``replays`` -> ``torch`` -> runners
and patterns. Importing :mod:`parllel` itself imports nothing heavy.
"""

__version__ = "0.1.0"
