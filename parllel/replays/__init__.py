"""Replay buffers over full-size rotating Arrays (no torch needed).

Each collected ``[T, B]`` batch is copied into the window of Arrays allocated
with ``full_size=N`` (``replay.record_batch(sample_tree)``), and samples are
read from those rows in place:

- :class:`UniformReplay`: uniform sampling, optional n-step returns.
- :class:`PrioritizedReplay`: proportional prioritization (numba sum tree).
- :class:`ReplayRatio`: whole gradient updates per collected batch.

Both return a :class:`~parllel.replays.transitions.ReplayBatch`.
"""

from parllel.replays.prioritized import PrioritizedReplay
from parllel.replays.ratio import ReplayRatio
from parllel.replays.uniform import UniformReplay

__all__ = [
    "PrioritizedReplay",
    "ReplayRatio",
    "UniformReplay",
]
