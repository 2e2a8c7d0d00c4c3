"""max_lag=0 is the synchronous run, even while PPO shuffles its minibatches.

The actions come from the handler's generator (``Seeds.actions``), not from
torch's global RNG, which the learner's minibatch shuffling draws from in
the synchronous run only.
"""

from __future__ import annotations

import numpy as np
import torch

from parllel import fields
from parllel.samplers.background import BackgroundSampler
from parllel.samplers.background_process import (
    ACTION_GENERATOR,
    load_sampler_state,
    sampler_state,
)
from tests.helpers.ppo_determinism_helpers import (
    build_agent,
    build_ppo,
    build_ppo_sampler,
    valid_fields,
)

SEED, BATCHES = 5, 4


def synchronous_batches(minibatches: int) -> tuple[list, np.ndarray]:
    """The batches and the state of the action generator after them."""
    sampler = build_ppo_sampler(SEED)
    try:
        ppo = build_ppo(sampler.handler.agent, minibatches)
        batches = []
        for _ in range(BATCHES):
            tree, _ = sampler.collect_batch()
            batches.append(valid_fields(tree))
            ppo.optimize(tree)
        return batches, sampler.handler.generator.get_state().numpy()
    finally:
        for cage in sampler.cages:
            cage.close()
        sampler.sample_tree.close()


def background_batches(minibatches: int) -> tuple[list, np.ndarray]:
    """The batches and the action generator's state the background sampler
    reports with its last batch (what a checkpoint saves)."""
    from parllel.torch import TorchHandler

    agent = build_agent(SEED)  # the learner's global RNG as in the synchronous run
    learner = TorchHandler(agent, 4)
    weights = learner.share_weights()
    try:
        ppo = build_ppo(agent, minibatches)
        with BackgroundSampler(
            build_ppo_sampler, SEED, weights, max_lag=0
        ) as background:
            batches = []
            for _ in range(BATCHES):
                batch = background.collect_batch(learner.policy_version)
                batches.append(valid_fields(batch.sample_tree))
                ppo.optimize(batch.sample_tree)
                generator_state = background.state_dict()[ACTION_GENERATOR]
                learner.publish_weights()
            return batches, generator_state
    finally:
        weights.close()


def assert_batches_equal(expected: list, actual: list) -> None:
    for n, (a, b) in enumerate(zip(expected, actual, strict=True)):
        for path in a:
            np.testing.assert_array_equal(a[path], b[path], err_msg=f"batch {n} {path}")


def test_ppo_with_4_minibatches_background_max_lag_0_equals_the_synchronous_run():
    """4 CartPoles x 32 steps, 2 epochs of 4 shuffled minibatches: every
    batch (observations, actions, log-probs, values, rewards, flags, the
    final observations of ended episodes) equals the synchronous run's."""
    expected, expected_generator = synchronous_batches(minibatches=4)
    actual, actual_generator = background_batches(minibatches=4)
    assert_batches_equal(expected, actual)
    np.testing.assert_array_equal(expected_generator, actual_generator)
    assert any(batch[fields.DONE].any() for batch in expected)  # resets covered
    # the weights did change: the batches are not all drawn by one policy
    assert not np.array_equal(
        expected[0][f"{fields.AGENT_INFO}.{fields.LOG_PROB}"],
        expected[-1][f"{fields.AGENT_INFO}.{fields.LOG_PROB}"],
    )


def test_actions_do_not_depend_on_the_global_torch_rng():
    """Drawing from torch's global RNG between batches (as a learner does)
    changes no sampled action."""

    def actions(draw_between: bool) -> list[np.ndarray]:
        sampler = build_ppo_sampler(SEED)
        try:
            out = []
            for _ in range(3):
                tree, _ = sampler.collect_batch()
                out.append(tree[fields.ACTION].to_ndarray().copy())
                if draw_between:
                    torch.randperm(1000)
                    torch.rand(17)
            return out
        finally:
            for cage in sampler.cages:
                cage.close()
            sampler.sample_tree.close()

    quiet, drawing = actions(False), actions(True)
    for a, b in zip(quiet, drawing, strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_sampler_state_carries_the_action_generator():
    """What a background sampler or a Ray actor sends with each batch, and
    loads on resume or restart: the generator continues where it stopped."""
    sampler = build_ppo_sampler(SEED)
    try:
        state = sampler_state(sampler)
        expected = torch.rand(5, generator=sampler.handler.generator)
        load_sampler_state(sampler, state)
        assert torch.equal(torch.rand(5, generator=sampler.handler.generator), expected)
    finally:
        for cage in sampler.cages:
            cage.close()
        sampler.sample_tree.close()
