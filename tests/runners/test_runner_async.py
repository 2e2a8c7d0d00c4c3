"""Runners with a BackgroundSampler: publishing, lag logging, checkpoint and resume."""

from __future__ import annotations

import numpy as np
import pytest

from parllel.errors import ConfigError
from parllel.runners import Callback, OnPolicyRunner
from parllel.samplers.background import BackgroundSampler
from tests.helpers.background_helpers import (
    N_ENVS,
    T,
    build_normalizing_sampler,
    learner_update,
    make_linear_handler,
)

pytestmark = pytest.mark.timeout(120)

BATCHES = 4


class UpdateAlgorithm:
    """Changes the learner's weights deterministically at every optimize."""

    def __init__(self, handler) -> None:
        self.handler, self.calls = handler, 0

    def optimize(self, batch, progress=None):
        learner_update(self.handler, self.calls)
        self.calls += 1
        return {"calls": self.calls}


class Record(Callback):
    def __init__(self) -> None:
        self.actions: list[np.ndarray] = []
        self.metrics: list[dict] = []

    def on_collect_end(self, runner, batch, traj_infos):
        self.actions.append(batch["action"].to_ndarray().copy())

    def on_update_end(self, runner, metrics):
        self.metrics.append(dict(metrics))


def run_synchronous(seed: int, batches: int) -> list[np.ndarray]:
    sampler = build_normalizing_sampler(seed)
    record = Record()
    try:
        OnPolicyRunner(
            sampler,
            UpdateAlgorithm(sampler.handler),
            batches * T * N_ENVS,
            callbacks=[record],
            handle_interrupt=False,
        ).run()
    finally:
        sampler.cages[0].close()
    return record.actions


def async_runner(seed, weights, learner, max_lag, total_steps, **kwargs):
    background = BackgroundSampler(
        build_normalizing_sampler, seed, weights, max_lag=max_lag
    )
    record = Record()
    runner = OnPolicyRunner(
        background,
        UpdateAlgorithm(learner),
        total_steps,
        callbacks=[record],
        handle_interrupt=False,
        publisher=learner,
        **kwargs,
    )
    return background, runner, record


def test_max_lag_0_runner_trains_on_the_synchronous_batches():
    expected = run_synchronous(seed=0, batches=BATCHES)
    learner = make_linear_handler(0)
    weights = learner.share_weights()
    try:
        background, runner, record = async_runner(
            0, weights, learner, 0, BATCHES * T * N_ENVS
        )
        with background:
            runner.run()
    finally:
        weights.close()
    assert len(record.actions) == BATCHES
    for n, (a, b) in enumerate(zip(expected, record.actions)):
        np.testing.assert_array_equal(a, b, err_msg=f"batch {n}")
    assert all(m["async/lag_max"] == 0 for m in record.metrics)
    assert [m["async/policy_version"] for m in record.metrics] == [1, 2, 3, 4]
    assert all(
        m["async/restarts"] == m["async/dropped_batches"] == 0 for m in record.metrics
    )


def test_max_lag_1_lag_is_logged_and_bounded():
    learner = make_linear_handler(1)
    weights = learner.share_weights()
    try:
        background, runner, record = async_runner(
            1, weights, learner, 1, 6 * T * N_ENVS
        )
        with background:
            runner.run()
    finally:
        weights.close()
    for metrics in record.metrics:
        assert 0 <= metrics["async/lag_min"] <= metrics["async/lag_mean"]
        assert metrics["async/lag_mean"] <= metrics["async/lag_max"] <= 1


def count(sampler_state) -> float:
    """Observations the sampler's normalizer has seen."""
    stats = sampler_state["observation_normalizer"].values()
    return float(sum(np.asarray(s["count"]).sum() for s in stats))


@pytest.mark.filterwarnings("ignore::parllel.errors.ParllelWarning")
def test_checkpoint_and_resume_restore_weights_and_sampler_state(tmp_path):
    learner = make_linear_handler(2)
    weights = learner.share_weights()
    try:
        background, runner, _ = async_runner(
            2,
            weights,
            learner,
            1,
            3 * T * N_ENVS,
            checkpoint_dir=tmp_path,
            checkpoint_objects={"model": learner.agent.model},
        )
        with background:
            runner.run()
            saved = background.state_dict()
        saved_weights = [p.detach().clone() for p in learner.agent.model.parameters()]
    finally:
        weights.close()
    assert "sampler" in runner.checkpoint_objects

    learner = make_linear_handler(9)  # other initial weights, restored below
    weights = learner.share_weights()
    try:
        background, runner, record = async_runner(
            9,
            weights,
            learner,
            0,
            5 * T * N_ENVS,
            checkpoint_dir=tmp_path,
            checkpoint_objects={"model": learner.agent.model},
        )
        with background:
            runner.load(tmp_path)
            assert runner.env_steps == 3 * T * N_ENVS
            # sent to the background process with the first batch's start
            assert count(background.state_dict()) == count(saved)
            for restored, expected in zip(
                learner.agent.model.parameters(), saved_weights
            ):
                np.testing.assert_array_equal(restored.detach(), expected)
            runner.run()
            resumed = background.state_dict()
    finally:
        weights.close()
    assert count(resumed) > count(saved)  # the statistics continued from the checkpoint
    assert runner.env_steps == 5 * T * N_ENVS
    assert all(m["async/lag_max"] == 0 for m in record.metrics)


def test_publisher_without_shared_weights_is_refused():
    sampler = build_normalizing_sampler(0)
    try:
        with pytest.raises(ConfigError, match="share_weights"):
            OnPolicyRunner(
                sampler,
                UpdateAlgorithm(sampler.handler),
                100,
                publisher=make_linear_handler(0),
            )
    finally:
        sampler.cages[0].close()


def test_a_following_background_sampler_needs_a_publisher():
    learner = make_linear_handler(3)
    weights = learner.share_weights()
    try:
        with BackgroundSampler(build_normalizing_sampler, 3, weights) as background:
            with pytest.raises(ConfigError, match="publisher="):
                OnPolicyRunner(background, UpdateAlgorithm(learner), 100)
    finally:
        weights.close()


def test_loading_a_checkpoint_after_sampling_started_says_when_to_load(tmp_path):
    learner = make_linear_handler(4)
    weights = learner.share_weights()
    try:
        background, runner, _ = async_runner(
            4,
            weights,
            learner,
            0,
            T * N_ENVS,
            checkpoint_dir=tmp_path,
            checkpoint_objects={"model": learner.agent.model},
        )
        with background:
            runner.run()
            with pytest.raises(ConfigError, match="before runner.run"):
                runner.load(tmp_path)
    finally:
        weights.close()
