"""EvalSampler, decorrelation, observation normalization, sample_tree_from_examples, errors."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from parllel import fields
from parllel.agents import NumpyHandler, RandomAgent
from parllel.cages import CageOptions, SerialCage
from parllel.errors import ConfigError
from parllel.samplers import (
    AlternatingSampler,
    EvalSampler,
    FeedForwardSampler,
    RecurrentSampler,
    sample_tree_from_examples,
)
from parllel.transforms import NormalizeObservations
from tests.helpers.envs import CountingEnv
from tests.samplers.test_samplers_alignment import CountingAgent, T, build, check_batch


def make_handler(cage, recurrent=False, n_envs=None):
    handler = NumpyHandler(CountingAgent(recurrent=recurrent), n_envs or cage.n_envs)
    example = handler.example_outputs(
        cage.example[fields.OBSERVATION],
        cage.example[fields.ACTION],
        cage.example[fields.REWARD],
    )
    return handler, example


@pytest.mark.timeout(30)
def test_sample_tree_from_examples_layout():
    with SerialCage(
        partial(CountingEnv, observation="dict"), 3, options=CageOptions(seed=0)
    ) as cage:
        handler, example = make_handler(cage, recurrent=True)
        with sample_tree_from_examples(
            cage.example, example, 5, 3, recurrent=True, wait_reset=True
        ) as tree:
            assert tree.observation.state.shape == (5, 3, 4)
            assert tree.observation.state[5].shape == (3, 4)  # bootstrap row
            assert tree.action.padded[-1].shape == (3,)
            assert tree.reward.padding == tree.prev_reward.padding == 1
            assert tree.bootstrap_value.shape == (3,)
            assert tree.final_value.shape == (5, 3)
            assert tree.initial_state.shape == (3, 1)
            assert tree.valid.dtype == np.bool_ and tree.done.dtype == np.bool_
            assert set(tree.env_info) == {"t", "ale.lives"}  # "note" is a string
            assert tree.observation.state.storage == "shared"
            assert set(tree.agent_info) == {fields.VALUE, "count", "prev_reward_seen"}


@pytest.mark.timeout(30)
def test_eval_sampler_runs_n_episodes_in_eval_mode_with_frozen_statistics():
    with (
        SerialCage(CountingEnv, 3, options=CageOptions(seed=0)) as cage,
        SerialCage(
            CountingEnv, 2, options=CageOptions(seed=1, env_offset=100)
        ) as eval_cage,
    ):
        handler, example = make_handler(cage)
        with (
            sample_tree_from_examples(cage.example, example, 6, 3) as tree,
            sample_tree_from_examples(eval_cage.example, example, 1, 2) as eval_tree,
        ):
            normalizer = NormalizeObservations(tree)
            sampler = FeedForwardSampler(
                cage, handler, tree, observation_normalizer=normalizer
            )
            sampler.collect_batch()
            count = normalizer.stats[""].count
            assert count == 3 * 7  # reset observations + 6 steps
            eval_handler = NumpyHandler(handler.agent, 2)
            modes = []
            eval_handler.agent.set_mode = lambda mode: modes.append(mode)
            evaluator = EvalSampler(
                eval_cage, eval_handler, eval_tree, 5, observation_normalizer=normalizer
            )
            trajs = evaluator.collect()
            assert len(trajs) == 5
            assert all(traj.env_index in (100, 101) for traj in trajs)
            assert all(3 <= traj.length <= 7 for traj in trajs)
            assert modes == ["eval", "sample"] and eval_handler.mode == "sample"
            assert normalizer.stats[""].count == count and not normalizer.frozen
            sampler.collect_batch()  # training goes on, statistics too
            assert normalizer.stats[""].count == count + 3 * 6
            short = EvalSampler(eval_cage, eval_handler, eval_tree, 50, max_steps=4)
            assert len(short.collect()) < 50


@pytest.mark.timeout(30)
def test_observation_normalizer_normalizes_what_the_agent_sees():
    with SerialCage(CountingEnv, 3, options=CageOptions(seed=0)) as cage:
        seen = []
        agent = RandomAgent(cage.spaces.action, seed=0)
        step = agent.step
        agent.step = lambda obs, *a: seen.append(np.array(obs)) or step(obs, *a)
        handler = NumpyHandler(agent, 3)
        example = handler.example_outputs(cage.example[fields.OBSERVATION])
        with sample_tree_from_examples(
            cage.example, example, 4, 3, previous=True
        ) as tree:
            normalizer = NormalizeObservations(tree, clip=np.inf)
            sampler = FeedForwardSampler(
                cage, handler, tree, observation_normalizer=normalizer
            )
            sampler.collect_batch()
            np.testing.assert_array_equal(seen[1], tree.observation[0])
            assert np.abs(tree.observation[1:4]).max() < 10  # normalized, not raw tags


@pytest.mark.timeout(30)
@pytest.mark.parametrize("sampler_kind", ["feedforward", "recurrent", "alternating"])
def test_decorrelation_puts_envs_out_of_phase(sampler_kind):
    # a feed-forward agent: after random steps a recurrent state cannot be right
    sampler, tree, cages = build(sampler_kind, "serial", {}, recurrent=False)
    with tree:
        try:
            sampler.decorrelation_steps = 13
            sampler.seed = 3
            sampler.collect_batch()
            first = tree.observation[0][:, 2].copy()
            last = check_batch(tree, None, True, False)
            assert len(set(first.tolist())) > 1 and first.max() > 0
            sampler.collect_batch()
            check_batch(tree, last, True, False)
        finally:
            for cage in cages:
                cage.close()


@pytest.mark.timeout(30)
def test_configuration_errors_are_named():
    with (
        SerialCage(CountingEnv, 2, options=CageOptions(seed=0)) as cage,
        SerialCage(
            CountingEnv, 2, options=CageOptions(seed=0, reset_mode="wait")
        ) as wait_cage,
        SerialCage(
            CountingEnv, 2, options=CageOptions(seed=0, reset_mode="next_step")
        ) as next_cage,
    ):
        handler, example = make_handler(cage)
        rnn_handler, rnn_example = make_handler(cage, recurrent=True)
        with (
            sample_tree_from_examples(cage.example, example, 3, 2) as tree,
            sample_tree_from_examples(cage.example, example, 3, 3) as wide,
        ):
            with pytest.raises(ConfigError, match="RecurrentSampler"):
                FeedForwardSampler(cage, rnn_handler, tree)
            with pytest.raises(ConfigError, match="auto-reset"):
                FeedForwardSampler(wait_cage, handler, tree)
            with pytest.raises(ConfigError, match="auto-reset"):
                FeedForwardSampler(next_cage, handler, tree)
            with pytest.raises(ConfigError, match="reset_mode"):
                RecurrentSampler(next_cage, handler, tree)
            with pytest.raises(ConfigError, match="initial_state"):
                RecurrentSampler(cage, rnn_handler, tree)
            with pytest.raises(ConfigError, match="reset_mode"):
                RecurrentSampler(cage, handler, tree, wait_reset=True)
            with pytest.raises(ConfigError, match="B = 3"):
                FeedForwardSampler(cage, handler, wide)
            with pytest.raises(ConfigError, match="two cages"):
                AlternatingSampler([cage], handler, tree)
            with pytest.raises(ConfigError, match="n_episodes"):
                EvalSampler(cage, handler, tree, 0)
        with pytest.raises(ConfigError, match="no state"):
            sample_tree_from_examples(cage.example, example, 3, 2, recurrent=True)
        with pytest.raises(ConfigError, match="mode"):
            handler.set_mode("greedy")


@pytest.mark.timeout(30)
def test_alternating_sampler_computes_one_half_while_the_other_steps():
    """Call order: B's actions are computed between A's step_async and await_step."""
    sampler, tree, cages = build("alternating", "serial", {}, recurrent=False)
    calls = []

    def record(name, fn):
        def wrapper(*args, **kwargs):
            calls.append(name)
            return fn(*args, **kwargs)

        return wrapper

    for cage, half in zip(cages, "AB"):
        cage.step_async = record(f"{half}.step_async", cage.step_async)
        cage.await_step = record(f"{half}.await_step", cage.await_step)
    step = sampler.handler.step

    def act(*args, env_indices, **kwargs):
        calls.append("act " + ("A" if env_indices.start == 0 else "B"))
        return step(*args, env_indices=env_indices, **kwargs)

    sampler.handler.step = act
    with tree:
        try:
            sampler.collect_batch()
        finally:
            for cage in cages:
                cage.close()
    per_step = [
        "act B", "B.step_async", "A.await_step", "act A", "A.step_async", "B.await_step",
    ]  # fmt: skip
    assert calls[:2] == ["act A", "A.step_async"]
    assert calls[2 : 2 + 6 * (T - 1)] == per_step * (T - 1)
    assert calls[2 + 6 * (T - 1) :] == [
        "act B",
        "B.step_async",
        "A.await_step",
        "B.await_step",
    ]


class _LengthByEnv(CountingEnv):
    """The first env built runs 2-step episodes, the others 9-step episodes."""

    built: list[int] = []

    def __init__(self):
        super().__init__()
        self.short = not self.built
        self.built.append(1)

    def reset(self, *, seed=None, options=None):
        observation, info = super().reset(seed=seed, options=options)
        self.length = 2 if self.short else 9
        return observation, info


@pytest.mark.timeout(30)
def test_eval_sampler_takes_each_envs_first_episodes_not_the_shortest():
    _LengthByEnv.built.clear()
    with SerialCage(_LengthByEnv, 2, options=CageOptions(seed=5)) as cage:
        handler, example = make_handler(cage)
        with sample_tree_from_examples(cage.example, example, 1, 2, "local") as tree:
            trajs = EvalSampler(cage, handler, tree, n_episodes=4).collect()
    # the short env finishes 4 episodes before the long one finishes 1; an
    # unbiased evaluation still takes two episodes of each env
    assert sorted(traj.env_index for traj in trajs) == [0, 0, 1, 1]
    assert sorted(traj.length for traj in trajs) == [2, 2, 9, 9]
