"""Sampling on a Ray cluster: actors that each run a whole local sampler.

Install the ``ray`` extra (``pip install -e ".[ray]"`` in the parllel
checkout). Importing this package does not
import ray; creating a :class:`RaySampler` does (and raises
:class:`~parllel.errors.MissingDependencyError` without it).
"""

from __future__ import annotations

from parllel.distributed.sampler import RaySampler

__all__ = [
    "RaySampler",
]
