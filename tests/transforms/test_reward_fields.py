"""NormalizeRewards on other fields: each agent's rewards with its own episode ends."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel import fields
from parllel.errors import ConfigError
from parllel.transforms import NormalizeRewards

AGENT_FIELDS = dict(
    reward_field=(fields.ENV_INFO, fields.AGENT_REWARD),
    done_fields=(
        (fields.ENV_INFO, fields.AGENT_TERMINATED),
        (fields.ENV_INFO, fields.AGENT_TRUNCATED),
    ),
)


def ma_tree(rng, T, B, A):
    return {
        fields.ENV_INFO: {
            fields.AGENT_REWARD: rng.normal(size=(T, B, A)).astype(np.float32),
            fields.AGENT_TERMINATED: rng.random((T, B, A)) < 0.1,
            fields.AGENT_TRUNCATED: rng.random((T, B, A)) < 0.05,
        }
    }


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 6), st.integers(1, 3), st.integers(1, 3))
def test_agent_rewards_normalize_like_one_reward_per_agent(seed, T, B, A):
    rng = np.random.default_rng(seed)
    batches = [ma_tree(rng, T, B, A) for _ in range(3)]
    per_agent = []
    for a in range(A):  # the reference: agent a's column as a plain [T, B] reward
        info = [b[fields.ENV_INFO] for b in batches]
        trees = [
            {
                fields.REWARD: i[fields.AGENT_REWARD][..., a].copy(),
                fields.TERMINATED: i[fields.AGENT_TERMINATED][..., a].copy(),
                fields.TRUNCATED: i[fields.AGENT_TRUNCATED][..., a].copy(),
            }
            for i in info
        ]
        normalize = NormalizeRewards(trees[0], gamma=0.9)
        per_agent.append([normalize(tree)[fields.REWARD] for tree in trees])
    normalize = NormalizeRewards(batches[0], gamma=0.9, **AGENT_FIELDS)
    for k, batch in enumerate(batches):
        normalize(batch)
        got = batch[fields.ENV_INFO][fields.AGENT_REWARD]
        for a in range(A):
            np.testing.assert_allclose(got[..., a], per_agent[a][k], rtol=1e-5)


def test_bad_field_names_are_named():
    tree = ma_tree(np.random.default_rng(0), 2, 2, 2)
    with pytest.raises(ConfigError, match="env_info.missing"):
        NormalizeRewards(tree, gamma=0.9, reward_field=(fields.ENV_INFO, "missing"))
    with pytest.raises(ConfigError, match="two fields"):
        NormalizeRewards(
            tree,
            gamma=0.9,
            reward_field=AGENT_FIELDS["reward_field"],
            done_fields=("x",),
        )
