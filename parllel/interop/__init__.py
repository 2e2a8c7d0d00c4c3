"""Interop with other RL libraries' env APIs (torch-free).

- :class:`VectorEnvCage` runs any gymnasium vector env (``SyncVectorEnv``,
  ``AsyncVectorEnv``, or another ``gymnasium.vector.VectorEnv``) as a parllel
  cage, so samplers, transforms, replays and runners use it unchanged.
"""

from parllel.interop.vector_env_cage import VectorEnvCage

__all__ = ["VectorEnvCage"]
