"""GroupViews: the per-step views every sampler uses, and trees it refuses."""

from __future__ import annotations

import numpy as np
import pytest

from parllel import fields
from parllel.agents.base import AgentExample
from parllel.errors import ConfigError
from parllel.samplers import sample_tree_from_examples
from parllel.samplers.steps import GroupViews
from parllel.tree import ArrayDict

T, B = 3, 2
ENV_EXAMPLE = {
    fields.OBSERVATION: np.zeros(4, np.float32),
    fields.ACTION: np.int64(0),
    fields.REWARD: np.float32(0.0),
    fields.TERMINATED: False,
    fields.TRUNCATED: False,
    fields.ENV_INFO: {},
}


def sample_tree(previous: bool) -> ArrayDict:
    agent_example = AgentExample(np.int64(0), {fields.VALUE: np.float32(0.0)})
    return sample_tree_from_examples(
        ENV_EXAMPLE, agent_example, T, B, "local", previous=previous
    )


def without(tree: ArrayDict, key: str) -> ArrayDict:
    return ArrayDict({name: leaf for name, leaf in tree.items() if name != key})


def test_views_of_a_built_tree_cover_every_step() -> None:
    tree = sample_tree(previous=True)
    views = GroupViews(tree, 0, B)
    assert len(views.observation) == T + 1 and len(views.done) == T
    assert len(views.step_slots) == T and views.valid is None
    prev_action, prev_reward = views.previous(1)
    assert prev_action is not None and prev_reward is not None
    assert len(views.previous_pairs[0]) == 2  # action leaf and reward


def test_views_without_previous_fields_give_none() -> None:
    views = GroupViews(sample_tree(previous=False), 0, B)
    assert views.previous(0) == (None, None)
    assert views.previous_pairs == [[]] * T


@pytest.mark.parametrize(
    "missing", [fields.DONE, fields.AGENT_INFO, fields.ACTION, fields.TERMINATED]
)
def test_a_tree_without_a_field_every_sampler_writes_is_refused(missing: str) -> None:
    tree = without(sample_tree(previous=False), missing)
    with pytest.raises(ConfigError, match=repr(missing)):
        GroupViews(tree, 0, B)


@pytest.mark.parametrize("kept", [fields.PREV_ACTION, fields.PREV_REWARD])
def test_a_tree_with_only_one_previous_field_is_refused(kept: str) -> None:
    dropped = fields.PREV_REWARD if kept == fields.PREV_ACTION else fields.PREV_ACTION
    tree = without(sample_tree(previous=True), dropped)
    with pytest.raises(ConfigError, match="both or neither"):
        GroupViews(tree, 0, B)
