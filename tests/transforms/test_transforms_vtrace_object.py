"""The ComputeVTrace transform on sample trees: fields, allocation, errors."""

from __future__ import annotations

import numpy as np
import pytest

from parllel.arrays import Array
from parllel.errors import ConfigError, ShapeError
from parllel.transforms import (
    Compose,
    ComputeVTrace,
    EstimateAdvantage,
    NormalizeAdvantage,
)
from parllel.transforms.functional import vtrace
from parllel.tree import ArrayDict
from tests.transforms.test_transforms_objects import make_tree, nd, without


def vtrace_tree(storage="local", dtype=np.float32, seed=0):
    """A sample tree as the actor-critic agents record it: value and log_prob."""
    tree = make_tree(dtype=dtype, seed=seed, storage=storage)
    log_prob = Array(batch_shape=(8, 3), dtype=dtype, storage=storage)
    log_prob.to_ndarray()[...] = np.random.default_rng(seed + 1).normal(size=(8, 3))
    tree["agent_info"]["log_prob"] = log_prob
    return tree


def test_allocates_fields_and_matches_functional():
    tree = vtrace_tree(storage="shared")
    transform = ComputeVTrace(
        tree, gamma=0.9, trace_lambda=0.8, rho_bar=2.0, c_bar=0.5, pg_rho_bar=1.5
    )
    for key in ("advantage", "return_", "target_log_prob"):
        assert isinstance(tree[key], Array) and tree[key].shape == (8, 3)
        assert tree[key].storage == "shared" and tree[key].dtype == np.float32
    # the learner writes the target policy's log-probs, then runs the transform
    target = nd(tree.agent_info.log_prob) + np.random.default_rng(5).normal(
        0, 0.5, (8, 3)
    ).astype(np.float32)
    nd(tree.target_log_prob)[...] = target
    assert transform(tree) is tree
    expected_return, expected_advantage = vtrace(
        nd(tree.reward), nd(tree.agent_info.value), nd(tree.terminated),
        nd(tree.truncated), tree.bootstrap_value, nd(tree.final_value),
        log_ratio=target - nd(tree.agent_info.log_prob), gamma=0.9,
        trace_lambda=0.8, rho_bar=2.0, c_bar=0.5, pg_rho_bar=1.5,
    )  # fmt: skip
    np.testing.assert_array_equal(nd(tree.return_), expected_return)
    np.testing.assert_array_equal(nd(tree.advantage), expected_advantage)
    assert transform.state_dict() == {}


def test_unwritten_target_log_probs_give_nan_not_on_policy_results():
    tree = vtrace_tree()
    ComputeVTrace(tree, gamma=0.9)(tree)
    assert np.isnan(nd(tree.target_log_prob)).all()
    assert np.isnan(nd(tree.return_)).all() and np.isnan(nd(tree.advantage)).all()


def test_on_policy_tree_gives_the_gae_returns():
    tree = vtrace_tree(dtype=np.float64)
    tree["target_log_prob"] = nd(tree.agent_info.log_prob).copy()
    ComputeVTrace(tree, gamma=0.95, trace_lambda=0.9)(tree)
    vtrace_return = nd(tree.return_).copy()
    EstimateAdvantage(tree, gamma=0.95, gae_lambda=0.9)(tree)
    np.testing.assert_array_equal(vtrace_return, nd(tree.return_))


def test_custom_fields_and_pipeline():
    """Learner-side use: its own values and log-probs under custom names."""
    tree = vtrace_tree()
    rng = np.random.default_rng(3)
    tree["learner"] = {
        "value": rng.normal(size=(8, 3)).astype(np.float32),
        "bootstrap": rng.normal(size=3).astype(np.float32),
        "log_prob": rng.normal(size=(8, 3)).astype(np.float32),
    }
    pipeline = Compose(
        [
            ComputeVTrace(
                tree,
                gamma=0.99,
                value_field=("learner", "value"),
                bootstrap_value_field=("learner", "bootstrap"),
                target_log_prob_field=("learner", "log_prob"),
                truncation_as_termination=True,
            ),  # fmt: skip
            NormalizeAdvantage(tree),
        ]
    )
    assert "target_log_prob" not in tree  # a given path is never allocated
    pipeline(tree)
    learner = tree["learner"]
    expected_return, _ = vtrace(
        nd(tree.reward), learner["value"], nd(tree.terminated), nd(tree.truncated),
        learner["bootstrap"], log_ratio=learner["log_prob"] - nd(tree.agent_info.log_prob),
        gamma=0.99, truncation_as_termination=True,
    )  # fmt: skip
    np.testing.assert_array_equal(nd(tree.return_), expected_return)
    advantage = nd(tree.advantage)
    assert abs(advantage.mean()) < 1e-5 and abs(advantage.std(ddof=1) - 1) < 1e-3


@pytest.mark.parametrize(
    "field, kwargs",
    [
        ("agent_info.log_prob", {}),
        ("final_value", {}),
        ("learner", {"target_log_prob_field": ("learner", "log_prob")}),
        ("agent_info.old_value", {"value_field": ("agent_info", "old_value")}),
    ],
)
def test_missing_field_is_named(field, kwargs):
    tree = vtrace_tree()
    if field == "agent_info.log_prob":
        tree["agent_info"] = ArrayDict({"value": tree["agent_info"]["value"]})
    if field == "final_value":
        tree = without(tree, "final_value")
    with pytest.raises(ConfigError, match=f"'{field}'"):
        ComputeVTrace(tree, gamma=0.99, **kwargs)


def test_mismatched_target_log_probs_are_refused():
    tree = vtrace_tree()
    tree["target_log_prob"] = np.zeros((8, 2), np.float32)
    with pytest.raises(ShapeError, match="target_log_prob"):
        ComputeVTrace(tree, gamma=0.99)
    tree = vtrace_tree()
    transform = ComputeVTrace(tree, gamma=0.99)
    tree["target_log_prob"] = np.zeros((7, 3), np.float32)
    with pytest.raises(ShapeError, match="target_log_prob"):
        transform(tree)


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("gamma", {"gamma": 2.0}),
        ("trace_lambda", {"trace_lambda": 1.1}),
        ("rho_bar", {"rho_bar": 0.0}),
        ("c_bar", {"c_bar": "x"}),
        ("pg_rho_bar", {"pg_rho_bar": -1.0}),
    ],
)
def test_hyperparameters_checked_at_construction(name, kwargs):
    kwargs = {"gamma": 0.99, **kwargs}
    with pytest.raises(ConfigError, match=name):
        ComputeVTrace(vtrace_tree(), **kwargs)
