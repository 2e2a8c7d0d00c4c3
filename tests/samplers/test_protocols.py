"""Every parllel sampler satisfies the protocol the runners type it with."""

from __future__ import annotations

import numpy as np
import pytest

from parllel.cages import CageOptions, SerialCage
from parllel.distributed import RaySampler
from parllel.errors import ConfigError
from parllel.runners.batches import AsyncBatches, SyncBatches, batches_of
from parllel.samplers import BackgroundSampler, EvalSampler, sample_tree_from_examples
from parllel.samplers.protocols import (
    AsyncSampler,
    EvalSource,
    TrainingSampler,
    WeightPublisher,
)
from tests.helpers.envs import CountingEnv
from tests.samplers.test_samplers_alignment import build
from tests.samplers.test_samplers_eval import make_handler


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["feedforward", "recurrent", "alternating"])
def test_training_samplers_satisfy_the_protocol(kind):
    sampler, tree, cages = build(kind, "serial", {}, recurrent=kind == "recurrent")
    try:
        assert isinstance(sampler, TrainingSampler)
        assert not isinstance(sampler, AsyncSampler)
        assert not isinstance(sampler, WeightPublisher)  # it follows no weights
        assert sampler.action_generator is None  # a NumpyHandler's agent
        assert isinstance(batches_of(sampler, None), SyncBatches)
    finally:
        for cage in cages:
            cage.close()
        tree.close()


@pytest.mark.timeout(30)
def test_eval_sampler_satisfies_the_protocol():
    with SerialCage(CountingEnv, 2, options=CageOptions(seed=0)) as cage:
        handler, example = make_handler(cage)
        with sample_tree_from_examples(cage.example, example, 5, 2) as tree:
            assert isinstance(EvalSampler(cage, handler, tree, 1), EvalSource)


def test_background_and_ray_samplers_are_async_samplers():
    for sampler_type in (BackgroundSampler, RaySampler):
        assert issubclass(sampler_type, AsyncSampler)
        assert not sampler_type.__abstractmethods__  # every seam implemented


class _Version:
    policy_version: int | None = 3

    def publish_weights(self) -> int:
        return 4


class _Async(AsyncSampler):
    """The least an AsyncSampler implements, for the runner's checks."""

    def __init__(self, follows: bool) -> None:
        self.max_lag, self._follows = 0, follows

    @property
    def sample_tree(self):
        return {"reward": np.zeros((2, 3))}

    @property
    def follows_weights(self):
        return self._follows

    @property
    def started(self):
        return False

    def collect_batch(self, learner_version=None):
        raise AssertionError("not collected here")

    def fault_counts(self):
        return {"restarts": 0}

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass

    def reset(self):
        pass

    def close(self):
        pass


def test_a_publisher_and_an_async_sampler_make_async_batches():
    assert isinstance(_Version(), WeightPublisher)
    batches = batches_of(_Async(follows=True), _Version())
    assert isinstance(batches, AsyncBatches)
    assert batches.steps_per_batch == 6
    assert batches.fault_metrics() == {"async/restarts": 0.0}
    with pytest.raises(ConfigError, match="publisher="):
        batches_of(_Async(follows=True), None)  # nobody would publish
    assert isinstance(batches_of(_Async(follows=False), None), AsyncBatches)


def test_an_async_sampler_refuses_reset_and_state_once_started():
    class Started(_Async):
        started = True
        reset = AsyncSampler.reset

    sampler = Started(follows=False)
    with pytest.raises(ConfigError, match="a Started cannot reset once sampling"):
        sampler.reset()
    with pytest.raises(ConfigError, match="cannot load_state_dict.*first collect"):
        sampler._refuse_started("load_state_dict")
