"""Self-play through a runner: snapshots by the callback, metrics in the log,
the pool saved in checkpoints and restored on resume."""

from __future__ import annotations

import pytest

from parllel.errors import ConfigError
from parllel.runners import OnPolicyRunner
from parllel.runners.selfplay import SelfPlayCallback
from tests.helpers.selfplay_envs import SelfPlayDriver
from tests.multiagent.test_selfplay import B, make_selfplay
from tests.runners.test_runner_schedules import FakeAlgorithm, RecordingLogger

pytestmark = pytest.mark.timeout(60)
T = 8


def build(checkpoint_dir, total_steps: int, seed: int = 0):
    selfplay, _, _ = make_selfplay(strategy="mostly_latest", snapshots=(), seed=seed)
    selfplay.snapshot_learner = lambda: (
        0 if not len(selfplay.pool) else ((selfplay.pool.latest_id + 1) % 4)
    )
    driver = SelfPlayDriver(selfplay, B, T=T)
    logger = RecordingLogger()
    runner = OnPolicyRunner(
        driver,
        FakeAlgorithm(),
        total_steps,
        logger=logger,
        checkpoint_dir=checkpoint_dir,
        checkpoint_objects={"selfplay": selfplay},
        callbacks=[SelfPlayCallback(selfplay, snapshot_interval=2)],
        handle_interrupt=False,
    )
    return runner, selfplay, driver, logger


def choices(driver: SelfPlayDriver) -> list:
    return [(e["seat"].tolist(), e["opponent"].tolist()) for e in driver.log]


def test_callback_snapshots_and_logs_metrics(tmp_path):
    runner, selfplay, _, logger = build(tmp_path, total_steps=6 * T * B)
    runner.run()
    assert len(selfplay.pool) == 1 + 3  # the first, then every 2 updates
    assert [selfplay.pool.info(i).step for i in selfplay.pool.ids] == [0, 96, 192, 288]
    step, metrics = logger.rows[-1]
    assert metrics["selfplay/pool_size"] == 4 and metrics["selfplay/games"] > 0
    assert {"selfplay/win_rate", "selfplay/learner_rating"} <= set(metrics)


def test_resume_restores_the_pool_and_continues_identically(tmp_path):
    first, selfplay, _, _ = build(tmp_path, total_steps=4 * T * B)
    first.run()
    saved = (selfplay.pool.ids, selfplay.pool.learner_mu, dict(selfplay.total))

    checkpoint = first.last_checkpoint
    runs = []
    for attempt in range(2):
        resumed_dir = tmp_path / f"resumed{attempt}"
        runner, resumed, driver, _ = build(resumed_dir, total_steps=8 * T * B, seed=7)
        runner.load(checkpoint)
        assert (resumed.pool.ids, resumed.pool.learner_mu, resumed.total) == saved
        driver.log.clear()
        runner.run()
        runs.append((choices(driver), resumed.pool.ids, resumed.total))
    assert runs[0] == runs[1]

    # without the checkpoint the same seed-7 objects choose otherwise
    (tmp_path / "other").mkdir()
    runner, fresh, driver, _ = build(tmp_path / "other", total_steps=4 * T * B, seed=7)
    runner.run()
    assert choices(driver) != runs[0][0][: len(driver.log)]


def test_bad_callback_configuration():
    selfplay, _, _ = make_selfplay()
    with pytest.raises(ConfigError, match="snapshot_interval"):
        SelfPlayCallback(selfplay, lambda: 1, snapshot_interval=0)
    with pytest.raises(ConfigError, match="snapshot_learner"):
        SelfPlayCallback(selfplay)
