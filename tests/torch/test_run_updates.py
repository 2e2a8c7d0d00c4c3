"""run_updates: the update loop DQN and SAC share."""

import numpy as np
import pytest
import torch

from parllel.errors import ParllelError
from parllel.replays.transitions import ReplayBatch
from parllel.torch.algos.off_policy import run_updates


def _batch(first: int, n: int = 3) -> ReplayBatch:
    zeros = np.zeros(n, np.float32)
    return ReplayBatch(
        observation=np.zeros((n, 2), np.float32),
        action=np.zeros(n, np.int64),
        reward=zeros,
        next_observation=np.zeros((n, 2), np.float32),
        terminated=np.zeros(n, bool),
        truncated=np.zeros(n, bool),
        discount=np.ones(n, np.float32),
        n_steps=np.ones(n, np.int64),
        indices=np.arange(first, first + n),
        weights=np.ones(n, np.float32),
    )


class _Replay:
    def __init__(self) -> None:
        self.sampled = 0

    def sample(self) -> ReplayBatch:
        self.sampled += 1
        return _batch(10 * self.sampled)


class _Prioritized(_Replay):
    def __init__(self) -> None:
        super().__init__()
        self.updates: list[tuple[list[int], list[float]]] = []

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        self.updates.append((indices.tolist(), priorities.tolist()))


def test_each_update_gets_a_fresh_torch_batch_and_the_metrics_are_averaged():
    seen = []

    def update(batch):
        assert isinstance(batch.indices, torch.Tensor)
        seen.append(batch.indices.tolist())
        return {"loss": float(len(seen))}, batch.indices.float() / 2

    replay = _Prioritized()
    metrics = run_updates(replay, 2, None, update)
    assert metrics == {"loss": 1.5, "updates": 2.0}
    assert seen == [[10, 11, 12], [20, 21, 22]]
    assert replay.updates == [
        ([10, 11, 12], [5.0, 5.5, 6.0]),
        ([20, 21, 22], [10.0, 10.5, 11.0]),
    ]


def test_a_uniform_replay_takes_no_priorities():
    replay = _Replay()
    metrics = run_updates(replay, 3, None, lambda batch: ({"loss": 1.0}, None))
    assert metrics == {"loss": 1.0, "updates": 3.0}
    assert replay.sampled == 3
    assert run_updates(replay, 0, None, lambda batch: ({}, None)) == {"updates": 0.0}


def test_a_prioritized_replay_needs_priorities():
    def no_priorities(batch):
        return {"loss": 0.0}, None

    with pytest.raises(ParllelError, match="no_priorities.*no new priorities"):
        run_updates(_Prioritized(), 1, None, no_priorities)
