"""Parts of the fake samplers and learners the on-policy resume tests run,
and the callback that stops a run part way.

A fake sampler's tree holds ``[T, B, obs]`` observations that a real
:class:`~parllel.transforms.NormalizeObservations` normalizes, so its
statistics are state a checkpoint must keep; a fake learner's state is its
optimizer's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from parllel import fields
from parllel.runners import Callback
from parllel.timing import PhaseTimes
from parllel.transforms import NormalizeObservations


class NormalizedSampler:
    """A fake sampler's tree and normalizer; ``normalized(values)`` writes a
    batch of observations and normalizes them in place."""

    def __init__(self, T: int, B: int, obs: int) -> None:
        self.shape = (T, B, obs)  # of the observations
        self.sample_tree = {
            fields.OBSERVATION: np.zeros((T, B, obs), np.float32),
            fields.REWARD: np.zeros((T, B), np.float32),
        }
        self.normalizer = NormalizeObservations(self.sample_tree)
        self.phase_times = PhaseTimes()
        self.action_generator: Any = None

    def normalized(self, values: Any) -> np.ndarray:
        """The observations, set to ``values`` and then normalized."""
        observation = self.sample_tree[fields.OBSERVATION]
        observation[:] = values
        self.normalizer(self.sample_tree)
        return observation


class OptimizerState:
    """A fake learner whose checkpointed state is its ``optimizer``'s."""

    optimizer: torch.optim.Optimizer

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])


class StopAt(Callback):
    """Stops the run (``request_stop``) after the update that reaches ``step``
    env steps."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_update_end(self, runner: Any, metrics: dict) -> None:
        if runner.env_steps >= self.step:
            runner.request_stop()
