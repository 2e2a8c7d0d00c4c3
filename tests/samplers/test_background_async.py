"""BackgroundSampler: start handshake, sampler state, per-step versions, deadlock."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from parllel import fields
from parllel.errors import ConfigError, ParllelWarning, PolicyLagError
from parllel.samplers.background import BackgroundSampler
from parllel.tree import ArrayDict
from tests.helpers.background_helpers import (
    build_normalizing_sampler,
    build_torch_sampler,
    build_tree_then_follow,
    learner_update,
    make_linear_handler,
)

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]


def normalizer_counts(state) -> float:
    (stats,) = state["observation_normalizer"].values()
    return float(np.asarray(stats["count"]).sum())


def test_sampler_state_comes_with_every_batch_and_loads_before_the_start():
    with BackgroundSampler(build_normalizing_sampler, 0, max_lag=None) as first:
        built = first.state_dict()
        assert set(built) == {"transform", "observation_normalizer"}
        counts = [
            normalizer_counts(first.collect_batch().sampler_state) for _ in range(3)
        ]
        saved = first.state_dict()
    assert counts[0] < counts[1] < counts[2] == normalizer_counts(saved)

    with BackgroundSampler(build_normalizing_sampler, 0, max_lag=None) as second:
        second.load_state_dict(saved)
        assert second.state_dict() is not None and not second.started
        batch = second.collect_batch()  # the statistics continue from the checkpoint
        assert second.started
        assert normalizer_counts(batch.sampler_state) > counts[2]
        with pytest.raises(ConfigError, match="before the first collect_batch"):
            second.load_state_dict(saved)
        with pytest.raises(ConfigError, match="cannot reset"):
            second.reset()


def test_loading_state_of_parts_the_sampler_lacks_is_an_error_in_the_learner():
    with BackgroundSampler(build_torch_sampler, 0, max_lag=None) as sampler:
        sampler.load_state_dict({"observation_normalizer": {}})
        with pytest.raises(Exception, match="observation_normalizer"):
            sampler.collect_batch()


def test_sampling_waits_for_the_first_collect_batch_so_restored_weights_are_used():
    """Weights published between construction and the first batch are the
    ones the first batch uses (a resumed run restores them there)."""
    learner = make_linear_handler(seed=3)
    weights = learner.share_weights()
    try:
        with BackgroundSampler(build_torch_sampler, 3, weights, max_lag=0) as sampler:
            learner_update(learner, 0)
            version = learner.publish_weights()  # e.g. after loading a checkpoint
            batch = sampler.collect_batch(learner_version=version)
            assert (batch.policy_version, batch.lag) == (version, 0)
            versions = batch.sample_tree[fields.AGENT_INFO][fields.POLICY_VERSION]
            assert (versions.to_ndarray() == version).all()
            learner.publish_weights()
            batch = sampler.collect_batch(learner_version=learner.policy_version)
            assert (batch.batch_index, batch.lag, batch.lag_min) == (1, 0, 0)
    finally:
        weights.close()


def test_a_learner_that_never_publishes_gets_a_deadlock_error_not_a_hang():
    learner = make_linear_handler(seed=4)
    weights = learner.share_weights()
    try:
        sampler = BackgroundSampler(build_torch_sampler, 4, weights, max_lag=0)
        sampler.deadlock_seconds = 0.5
        with sampler:
            sampler.collect_batch(learner_version=0)
            with pytest.raises(PolicyLagError, match="deadlock.*version 1"):
                sampler.collect_batch(learner_version=0)  # nothing was published
    finally:
        weights.close()


def test_handler_following_every_step_loads_weights_between_steps():
    learner = make_linear_handler(seed=5)
    weights = learner.share_weights()
    try:
        follower = make_linear_handler(seed=6)  # other initial weights
        follower.follow_weights(weights, every="step")
        observation = np.arange(3 * 4, dtype=np.float32).reshape(3, 4)
        action = np.zeros(3, dtype=np.int64)
        info = {"value": np.zeros(3, np.float32), fields.POLICY_VERSION: np.zeros(3)}
        info[fields.POLICY_VERSION] = info[fields.POLICY_VERSION].astype(np.int64)
        out_info = ArrayDict(info)
        follower.step(
            observation, None, None, out_action=action, out_agent_info=out_info
        )
        assert (out_info[fields.POLICY_VERSION] == 0).all()
        learner_update(learner, 0)
        learner.publish_weights()
        follower.step(
            observation, None, None, out_action=action, out_agent_info=out_info
        )
        assert (out_info[fields.POLICY_VERSION] == 1).all()
        with torch.no_grad():
            expected = learner.agent.model(torch.from_numpy(observation) / 10)[:, 0]
        np.testing.assert_allclose(out_info["value"], expected.numpy(), rtol=1e-6)
    finally:
        weights.close()


def test_follow_weights_refuses_an_unknown_refresh_cadence():
    learner = make_linear_handler(seed=7)
    weights = learner.share_weights()
    try:
        with pytest.raises(ConfigError, match="every"):
            make_linear_handler(seed=7).follow_weights(weights, every="episode")
    finally:
        weights.close()


def test_k_defaults_to_room_for_the_allowed_lag():
    with BackgroundSampler(build_torch_sampler, 0, max_lag=2) as sampler:
        assert sampler.ring.k == 3
    with BackgroundSampler(build_torch_sampler, 0, max_lag=None) as sampler:
        assert sampler.ring.k == 2


def test_an_unpicklable_builder_is_a_config_error_naming_the_fix():
    with pytest.raises(ConfigError, match="module-level function"):
        BackgroundSampler(lambda seed: build_torch_sampler(seed), 0)


def test_a_tree_built_before_follow_weights_is_warned_about():
    learner = make_linear_handler(seed=8)
    weights = learner.share_weights()
    try:
        with pytest.warns(ParllelWarning, match="build the tree after"):
            sampler = BackgroundSampler(build_tree_then_follow, 8, weights)
        sampler.close()
    finally:
        weights.close()


UNGUARDED = """
from parllel.samplers import BackgroundSampler
from tests.helpers.background_helpers import build_torch_sampler

sampler = BackgroundSampler(build_torch_sampler, 0)
sampler.close()
"""


def test_a_script_without_the_main_guard_is_told_so(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(UNGUARDED)
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode != 0
    assert "ConfigError: the background sampler's process is started" in done.stderr
