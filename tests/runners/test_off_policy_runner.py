"""OffPolicyRunner: resume (counters, replay, weights), replay contents flag, schedules."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch

from parllel import fields
from parllel.builders import build_replay_tree, build_sample_tree
from parllel.cages import CageOptions, build_cage
from parllel.errors import ConfigError, ParllelWarning
from parllel.logging import CsvSink, read_progress
from parllel.replays import UniformReplay
from parllel.replays.transitions import gather_transitions
from parllel.runners import Callback, OffPolicyRunner
from parllel.runners.off_policy import AttributeSchedule
from parllel.samplers import FeedForwardSampler
from parllel.schedules import epsilon_schedule
from parllel.torch import TorchHandler
from parllel.torch.agents import build_dqn_agent, build_sac_agent
from parllel.torch.algos import DQN, SAC, EntropyCoefficient, adam, build_sac_optimizer
from tests.helpers.replay_helpers import assert_equal_trees

pytestmark = pytest.mark.timeout(90)

T, B, N = 2, 2, 16


class Setup:
    """A tiny SAC run on Pendulum: cage, sampler, replay, algorithm, runner."""

    def __init__(
        self,
        checkpoint_dir,
        total_steps,
        contents,
        seed=0,
        learning_starts=8,
        replay_ratio=0.5,
        policy_delay=1,
        **runner_options,
    ):
        torch.manual_seed(seed)
        self.cage = build_cage(
            lambda: gym.make("Pendulum-v1"),
            B,
            parallel="serial",
            options=CageOptions(seed=seed),
        )
        spaces = self.cage.spaces
        self.agent = build_sac_agent(
            spaces.observation, spaces.action, hidden_sizes=(8,)
        )
        handler = TorchHandler(self.agent, n_envs=B)
        self.sample_tree = build_sample_tree(
            self.cage, handler, T, final_observation=True
        )
        self.replay = UniformReplay(
            build_replay_tree(self.cage, handler, T, N),
            8,
            np.random.default_rng(seed),
            learning_starts=learning_starts,
        )
        sampler = FeedForwardSampler(self.cage, handler, self.sample_tree)
        alpha = EntropyCoefficient(1.0)
        optimizer = build_sac_optimizer(self.agent, alpha, learning_rate=1e-3)
        self.sac = SAC(
            self.agent,
            optimizer,
            alpha,
            replay_ratio=replay_ratio,
            policy_delay=policy_delay,
        )
        self.runner = OffPolicyRunner(
            sampler,
            self.replay,
            self.sac,
            total_steps,
            checkpoint_dir=checkpoint_dir,
            checkpoint_objects={"actor": self.agent.actor, "sac": self.sac},
            checkpoint_replay_contents=contents,
            config={"T": T, "B": B},
            rng=np.random.default_rng(seed + 1),
            **runner_options,
        )

    def close(self):
        self.cage.close()
        self.sample_tree.close()


@pytest.mark.parametrize("contents", [True, False])
def test_resume_restores_counters_replay_and_weights(tmp_path, contents):
    first = Setup(tmp_path, total_steps=24, contents=contents)
    try:
        first.runner.run()
        saved_replay = first.replay.state_dict(include_contents=True)
        saved_actor = {k: v.clone() for k, v in first.agent.actor.state_dict().items()}
        saved_critic = {
            k: v.clone() for k, v in first.sac.target_critic.state_dict().items()
        }
        env_steps, updates = first.runner.env_steps, first.runner.updates
        assert env_steps == 24 and updates == first.sac.updates_done > 0
    finally:
        first.close()

    second = Setup(tmp_path, total_steps=40, contents=contents, seed=7)
    try:
        second.runner.load(tmp_path)
        assert second.runner.env_steps == env_steps
        assert second.runner.updates == updates
        assert second.sac.updates_done == updates
        for key, value in second.agent.actor.state_dict().items():
            torch.testing.assert_close(value, saved_actor[key])
        for key, value in second.sac.target_critic.state_dict().items():
            torch.testing.assert_close(value, saved_critic[key])
        storage = second.replay.storage
        assert storage.steps_recorded == saved_replay["storage"]["steps_recorded"]
        assert second.replay.rng.bit_generator.state == saved_replay["rng"]
        if contents:
            assert storage.cursor == saved_replay["storage"]["cursor"]
            assert len(second.replay) == len(first.replay)
            assert_equal_trees(
                second.replay.state_dict(include_contents=True)["storage"]["contents"],
                saved_replay["storage"]["contents"],
            )
        else:
            assert len(second.replay) == 0 and not second.replay.ready
        second.runner.run()  # continues to 40 steps
        assert second.runner.env_steps == 40
        assert second.runner.updates > updates
        steps_per_env = (40 - (0 if contents else 24)) // B
        assert len(second.replay) == min(steps_per_env, N - 1) * B
    finally:
        second.close()


def _no_update_warnings(run):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run()
    return [w for w in caught if "no gradient update" in str(w.message)]


def test_a_run_too_short_to_reach_learning_starts_is_warned(tmp_path):
    """learning_starts=8, 4 env steps a batch: total_steps=4 never updates."""
    short = Setup(tmp_path / "short", total_steps=4, contents=False)
    try:
        with pytest.warns(ParllelWarning, match="this run makes no gradient update"):
            short.runner.run()
        assert short.runner.updates == 0
    finally:
        short.close()
    first = Setup(tmp_path, total_steps=24, contents=False)
    try:
        assert not _no_update_warnings(first.runner.run)  # 24 >= 8: it learns
    finally:
        first.close()
    # resumed without the replay's rows: 4 more steps refill 4 of the 8
    resumed = Setup(tmp_path, total_steps=28, contents=False)
    try:
        resumed.runner.load(tmp_path)
        (warned,) = _no_update_warnings(resumed.runner.run)
        assert "holds 0 transitions and needs 8" in str(warned.message)
        assert "train to at least total_steps=32" in str(warned.message)
        assert warned.filename == __file__  # attributed to the caller's line
        assert resumed.runner.updates == first.runner.updates
    finally:
        resumed.close()


def test_resume_cuts_the_interrupted_episodes(tmp_path):
    """After a resume the envs restart: the newest stored step becomes truncated
    and keeps its true next observation as its final observation."""
    first = Setup(tmp_path, total_steps=10, contents=True)
    try:
        first.runner.run()
        storage = first.replay.storage
        newest = (storage.cursor - 1) % N
        true_next = storage.rows[fields.OBSERVATION][storage.cursor].copy()
        assert not storage.rows[fields.TRUNCATED][newest].any()  # mid-episode
    finally:
        first.close()
    second = Setup(tmp_path, total_steps=16, contents=True)
    try:
        second.runner.load(tmp_path)
        second.runner.run()  # one more batch
        rows = second.replay.storage.rows
        assert rows[fields.TRUNCATED][newest].all()
        final = second.replay.storage.final_observation(
            np.full(B, newest), np.arange(B)
        )
        np.testing.assert_array_equal(final, true_next)
        positions = newest * B + np.arange(B)
        sample = gather_transitions(second.replay.storage, positions, 1, 0.99)
        np.testing.assert_array_equal(sample.next_observation, true_next)
        assert sample.truncated.all() and not sample.terminated.any()
    finally:
        second.close()


class Record(Callback):
    def __init__(self, agent):
        self.agent, self.seen = agent, []

    def on_collect_end(self, runner, batch, traj_infos):
        self.seen.append((runner.env_steps, self.agent.epsilon))


def test_epsilon_schedule_callback_and_dqn_runner():
    cage = build_cage(
        lambda: gym.make("CartPole-v1"),
        B,
        parallel="serial",
        options=CageOptions(seed=0),
    )
    try:
        agent = build_dqn_agent(
            cage.spaces.observation, cage.spaces.action, hidden_sizes=(8,)
        )
        handler = TorchHandler(agent, n_envs=B)
        sample_tree = build_sample_tree(cage, handler, T, final_observation=True)
        replay = UniformReplay(
            build_replay_tree(cage, handler, T, N), 4, np.random.default_rng(0)
        )
        sampler = FeedForwardSampler(cage, handler, sample_tree)
        optimizer = adam(agent.q_network.parameters(), learning_rate=1e-3)
        dqn = DQN(agent, optimizer, target_update_interval=2, updates_per_optimize=3)
        record = Record(agent)
        schedule = epsilon_schedule(1.0, 0.0, decay_steps=8)
        runner = OffPolicyRunner(
            sampler,
            replay,
            dqn,
            12,
            callbacks=[AttributeSchedule(agent, "epsilon", schedule), record],
        )
        metrics = runner.run()
        # epsilon is set before each batch from the steps done so far
        assert record.seen == [(4 * (i + 1), schedule(4 * i)) for i in range(3)]
        assert metrics["schedule/epsilon"] == 0.0
        assert runner.updates == dqn.updates_done == 9  # ready after one batch
        with pytest.raises(ConfigError, match="no attribute"):
            AttributeSchedule(agent, "epsilonn", schedule)
    finally:
        cage.close()


def test_sac_agent_random_actions_are_uniform_within_bounds():
    low, high = np.array([-2, 0], np.float32), np.array([2, 1], np.float32)
    space = gym.spaces.Box(low, high, dtype=np.float32)
    agent = build_sac_agent(space, space, hidden_sizes=(8,))
    agent.random_actions = True
    observation = torch.zeros(4000, 2)
    action = agent.step(observation, None, None, None).action
    assert (action >= torch.tensor(space.low)).all()
    assert (action <= torch.tensor(space.high)).all()
    torch.testing.assert_close(
        action.mean(0), torch.tensor([0.0, 0.5]), atol=0.05, rtol=0
    )
    agent.set_mode("eval")  # evaluation stays deterministic
    first = agent.step(observation[:2], None, None, None).action
    torch.testing.assert_close(
        first, agent.step(observation[:2], None, None, None).action
    )


def test_sac_resumed_where_log_lines_miss_the_actor_logs_every_loss(tmp_path):
    """With ``policy_delay=2`` and one update per batch, the actor steps at
    every other update. Learning starts at step 12, so every log line (every
    8 steps) falls on an update without an actor step, before and after the
    resume: the last update of each window never computed ``pi_loss`` or
    ``alpha_loss``. Every row of progress.csv still has them: the mean of the
    window's updates that computed them."""
    csv_path = tmp_path / "logs" / "progress.csv"
    options = dict(
        contents=True,
        learning_starts=12,
        replay_ratio=0.25,  # one update per 4-step batch
        policy_delay=2,
        log_interval_steps=8,
    )
    first = Setup(tmp_path, 24, logger=CsvSink(csv_path), **options)
    try:
        first.runner.run()
    finally:
        first.close()
        first.runner.logger.close()
    second = Setup(tmp_path, 40, logger=CsvSink(csv_path, resume=True), **options)
    try:
        second.runner.load(tmp_path)
        assert second.sac.updates_done == 4
        second.runner.run()
        assert second.sac.updates_done == 8
    finally:
        second.close()
        second.runner.logger.close()
    progress = read_progress(csv_path)
    assert list(progress["step"]) == [8, 16, 24, 32, 40]
    for key in ("algo/q1_loss", "algo/pi_loss", "algo/alpha_loss", "algo/entropy"):
        assert np.isfinite(progress[key][1:]).all(), key  # from the first update on
