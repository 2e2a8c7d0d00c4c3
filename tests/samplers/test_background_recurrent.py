"""BackgroundSampler with recurrent and alternating samplers: the synchronous batches.

A recurrent torch agent whose weights the learner changes after every batch:
with ``max_lag=0`` the background process carries the agent's state (and the
envs) from batch to batch and waits for each new version, so every batch,
``initial_state`` included, equals the synchronous sampler's.
"""

from __future__ import annotations

import numpy as np
import pytest

from parllel import fields
from parllel.samplers.background import BackgroundSampler
from tests.helpers.background_helpers import learner_update, snapshot
from tests.helpers.background_recurrent_helpers import (
    T,
    build_alternating_sampler,
    build_recurrent_sampler,
    make_recurrent_handler,
)

BATCHES = 4
BUILDERS = {
    "recurrent": build_recurrent_sampler,
    "alternating": build_alternating_sampler,
}


def synchronous_batches(build, seed: int) -> list[dict[str, np.ndarray]]:
    sampler = build(seed)
    try:
        batches = []
        for n in range(BATCHES):
            tree, _ = sampler.collect_batch()
            batches.append(snapshot(tree))
            learner_update(sampler.handler, n)
    finally:
        for cage in sampler.cages:
            cage.close()
        sampler.sample_tree.close()
    return batches


def background_batches(build, seed: int) -> list[dict[str, np.ndarray]]:
    learner = make_recurrent_handler(seed)
    weights = learner.share_weights()
    try:
        with BackgroundSampler(build, seed, weights, max_lag=0) as background:
            batches = []
            for n in range(BATCHES):
                batch = background.collect_batch(learner_version=learner.policy_version)
                assert (batch.batch_index, batch.policy_version, batch.lag) == (n, n, 0)
                batches.append(snapshot(batch.sample_tree))
                # each step's version (the synchronous handler records none)
                versions = batches[-1].pop(
                    f"{fields.AGENT_INFO}.{fields.POLICY_VERSION}"
                )
                assert (versions[:T] == n).all()
                learner_update(learner, n)
                learner.publish_weights()
    finally:
        weights.close()
    return batches


@pytest.mark.parametrize("kind", BUILDERS)
def test_max_lag_0_recurrent_agent_batches_equal_the_synchronous_sampler(kind):
    build = BUILDERS[kind]
    expected = synchronous_batches(build, seed=5)
    actual = background_batches(build, seed=5)
    assert len(expected) == len(actual) == BATCHES
    for n, (a, b) in enumerate(zip(expected, actual)):
        assert a.keys() == b.keys()
        for path in a:
            np.testing.assert_array_equal(
                a[path], b[path], err_msg=f"batch {n}, {path}"
            )
    # the test covers what it claims: state carried across batches (non-zero
    # initial state after the first batch), episode ends, changing weights
    state = [s[fields.INITIAL_STATE] for s in expected]
    assert not state[0].any() and all(s.any() for s in state[1:])
    assert any(s[fields.DONE].any() for s in expected)
    values = [s[f"{fields.AGENT_INFO}.{fields.VALUE}"] for s in expected]
    assert not np.array_equal(values[0], values[1])
