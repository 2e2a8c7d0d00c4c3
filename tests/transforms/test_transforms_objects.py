"""Transform objects on real sample trees: allocation, state, statistics, errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parllel.arrays import Array
from parllel.errors import ConfigError, DtypeError, ShapeError
from parllel.transforms import (
    ClipRewards,
    Compose,
    ComputeValidMask,
    EstimateAdvantage,
    NormalizeAdvantage,
    NormalizeObservations,
    NormalizeRewards,
)
from parllel.transforms.functional import generalized_advantage_estimation, valid_mask
from parllel.transforms.running_stats import RunningMeanStd
from parllel.tree import ArrayDict

SETTINGS = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def make_tree(n_steps=8, n_envs=3, dtype=np.float32, seed=0, storage="local"):
    rng = np.random.default_rng(seed)

    def arr(feature_shape=(), dt=dtype, batch=(n_steps, n_envs)):
        a = Array(
            batch_shape=batch, feature_shape=feature_shape, dtype=dt, storage=storage
        )
        data = rng.random(a.shape) < 0.2 if dt == np.bool_ else rng.normal(size=a.shape)
        a.to_ndarray()[...] = data
        return a

    return ArrayDict(
        {
            "observation": {"position": arr((2,)), "pixels": arr((2, 2), np.uint8)},
            "reward": arr(),
            "terminated": arr(dt=np.bool_),
            "truncated": arr(dt=np.bool_),
            "agent_info": {"value": arr()},
            "bootstrap_value": rng.normal(size=n_envs).astype(dtype),
            "final_value": arr(),
        }
    )


def nd(leaf):
    return leaf.to_ndarray() if isinstance(leaf, Array) else leaf


def test_estimate_advantage_allocates_and_matches_functional():
    tree = make_tree()
    gae = EstimateAdvantage(tree, gamma=0.9, gae_lambda=0.8)
    assert isinstance(tree["advantage"], Array) and tree["advantage"].shape == (8, 3)
    assert tree["return_"].dtype == np.float32
    gae(tree)
    expected, returns = generalized_advantage_estimation(
        nd(tree.reward), nd(tree.agent_info.value), nd(tree.terminated),
        nd(tree.truncated), tree.bootstrap_value, nd(tree.final_value),
        gamma=0.9, gae_lambda=0.8,
    )  # fmt: skip
    np.testing.assert_allclose(nd(tree.advantage), expected)
    np.testing.assert_allclose(nd(tree.return_), returns)


def test_pipeline_runs_and_keeps_shared_storage():
    tree = make_tree(storage="shared")
    pipeline = Compose(
        [
            ComputeValidMask(tree),
            ClipRewards(tree, bound=1.0),
            NormalizeRewards(tree, gamma=0.99),
            EstimateAdvantage(tree, gamma=0.99, gae_lambda=0.95),
            NormalizeAdvantage(tree, only_valid=True),
            NormalizeObservations(tree),
        ]
    )
    assert tree.valid.storage == "shared" and tree.advantage.storage == "shared"
    assert pipeline(tree) is tree
    valid = nd(tree.valid)
    np.testing.assert_array_equal(
        valid, valid_mask(nd(tree.terminated), nd(tree.truncated))
    )
    adv = nd(tree.advantage)[valid].astype(np.float64)
    assert abs(adv.mean()) < 1e-5 and abs(adv.std(ddof=1) - 1) < 1e-4
    state = pipeline.state_dict()
    assert list(state) == [
        "0.ComputeValidMask", "1.ClipRewards", "2.NormalizeRewards",
        "3.EstimateAdvantage", "4.NormalizeAdvantage", "5.NormalizeObservations",
    ]  # fmt: skip
    with pytest.raises(ConfigError, match="do not match"):
        pipeline.load_state_dict({"0.Other": {}})
    tree.close()


def test_valid_mask_from_done_only():
    done = np.array([[False, True], [True, False], [False, False]])
    tree = ArrayDict({"done": done})
    ComputeValidMask(tree)
    assert tree.valid.tolist() == [[True, True], [True, False], [False, False]]


def test_state_dict_round_trip_restores_identical_outputs():
    tree_a, tree_b = make_tree(seed=1), make_tree(seed=1)
    first = Compose(
        [NormalizeRewards(tree_a, gamma=0.9), NormalizeObservations(tree_a)]
    )
    first(make_tree(seed=2))  # accumulate some state
    second = Compose(
        [NormalizeRewards(tree_b, gamma=0.9), NormalizeObservations(tree_b)]
    )
    second.load_state_dict(first.state_dict())
    first(tree_a)
    second(tree_b)
    np.testing.assert_array_equal(nd(tree_a.reward), nd(tree_b.reward))
    np.testing.assert_array_equal(
        nd(tree_a.observation.position), nd(tree_b.observation.position)
    )
    for key, value in first.state_dict()["0.NormalizeRewards"].items():
        np.testing.assert_array_equal(
            value, second.state_dict()["0.NormalizeRewards"][key]
        )


@SETTINGS
@given(
    data=st.data(),
    feature_shape=st.sampled_from([(), (3,), (2, 2)]),
    dtype=st.sampled_from([np.float32, np.float64]),
)
def test_running_stats_equal_numpy_for_any_split(data, feature_shape, dtype):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    n_rows = data.draw(st.integers(1, 60))
    x = (rng.normal(size=(n_rows,) + feature_shape) * 3 + 5).astype(dtype)
    cuts = sorted(data.draw(st.lists(st.integers(0, n_rows), max_size=5)))
    stats = RunningMeanStd(feature_shape)
    for chunk in np.split(x, cuts):
        stats.update(chunk)
    x64 = x.astype(np.float64)
    assert stats.count == n_rows
    np.testing.assert_allclose(stats.mean, x64.mean(0), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(stats.var, x64.var(0), rtol=1e-9, atol=1e-9)


def test_running_stats_mask_and_normalize():
    x = np.arange(12, dtype=np.float64).reshape(6, 2)
    mask = np.array([True, False, True, True, False, True])
    stats = RunningMeanStd((2,), epsilon=1e-12)
    stats.update(x, mask)
    np.testing.assert_allclose(stats.mean, x[mask].mean(0))
    out = stats.normalize(x[mask])
    np.testing.assert_allclose(out.mean(0), 0, atol=1e-9)
    np.testing.assert_allclose(out.std(0), 1, atol=1e-6)
    assert np.abs(stats.normalize(x * 100, clip=2.0)).max() == 2.0


@SETTINGS
@given(data=st.data())
def test_obs_normalizer_stats_equal_numpy_over_batches(data):
    n_batches = data.draw(st.integers(1, 4))
    trees = [
        make_tree(n_steps=data.draw(st.integers(1, 6)), seed=i)
        for i in range(n_batches)
    ]
    raw = [
        nd(t.observation.position).astype(np.float64).reshape(-1, 2).copy()
        for t in trees
    ]
    norm = NormalizeObservations(trees[0], clip=np.inf)
    assert list(norm.stats) == ["position"]  # uint8 pixels skipped by default
    for tree in trees:
        norm(tree)
    seen = np.concatenate(raw)
    np.testing.assert_allclose(
        norm.stats["position"].mean, seen.mean(0), rtol=1e-9, atol=1e-12
    )
    np.testing.assert_allclose(
        norm.stats["position"].var, seen.var(0), rtol=1e-9, atol=1e-12
    )


def test_obs_normalizer_freeze_and_clip():
    tree = make_tree()
    norm = NormalizeObservations(tree, leaves=["position"], clip=0.5)
    norm(tree)
    assert np.abs(nd(tree.observation.position)).max() <= 0.5
    norm.frozen = True
    before = norm.state_dict()
    norm(make_tree(seed=3))
    np.testing.assert_array_equal(
        before["position"]["count"], norm.state_dict()["position"]["count"]
    )
    step = {"position": np.ones((3, 2), np.float32)}
    norm.normalize(step)
    assert np.abs(step["position"]).max() <= 0.5


def ref_reward_norm(reward, done, gamma, epsilon, clip):
    """SB3-style per-step reference: (normalized rewards, all returns seen)."""
    returns = np.zeros(reward.shape[1])
    seen, out = [], np.empty_like(reward, dtype=np.float64)
    for t in range(reward.shape[0]):
        returns = returns * gamma + reward[t]
        seen.extend(returns.tolist())
        var = np.var(seen)
        out[t] = np.clip(reward[t] / np.sqrt(var + epsilon), -clip, clip)
        returns[done[t]] = 0.0
    return out, np.array(seen)


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from([np.float32, np.float64]))
def test_reward_normalization_matches_reference(data, dtype):
    seed = data.draw(st.integers(0, 1000))
    n_steps, n_envs = data.draw(st.integers(1, 10)), data.draw(st.integers(1, 4))
    trees = [
        make_tree(n_steps, n_envs, dtype, seed + i)
        for i in range(data.draw(st.integers(1, 3)))
    ]
    all_reward = np.concatenate([nd(t.reward).astype(np.float64) for t in trees])
    all_done = np.concatenate([nd(t.terminated) | nd(t.truncated) for t in trees])
    expected, seen = ref_reward_norm(all_reward, all_done, 0.9, 1e-8, 10.0)
    norm = NormalizeRewards(trees[0], gamma=0.9)
    got = []
    for tree in trees:
        norm(tree)
        got.append(nd(tree.reward))
    np.testing.assert_allclose(np.concatenate(got), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(norm.return_var, seen.var(), rtol=1e-6, atol=1e-9)


# -- bad input fails at construction, naming the field --------------------------
def without(tree, *path):
    node = tree
    for key in path[:-1]:
        node = node[key]
    items = dict(node.items())
    del items[path[-1]]
    return ArrayDict(items) if node is tree else None


@pytest.mark.parametrize(
    "field", ["reward", "terminated", "truncated", "bootstrap_value", "final_value"]
)
def test_estimate_advantage_missing_field(field):
    tree = without(make_tree(), field)
    with pytest.raises(ConfigError, match=field):
        EstimateAdvantage(tree, gamma=0.99, gae_lambda=0.95)


def test_estimate_advantage_missing_value_and_bad_dtype():
    tree = make_tree()
    tree["agent_info"] = ArrayDict({"log_prob": np.zeros((8, 3), np.float32)})
    with pytest.raises(ConfigError, match="agent_info.value"):
        EstimateAdvantage(tree, gamma=0.99, gae_lambda=0.95)
    tree = make_tree()
    tree["reward"] = np.zeros((8, 3), np.int32)
    with pytest.raises(DtypeError, match="reward"):
        EstimateAdvantage(tree, gamma=0.99, gae_lambda=0.95)
    tree = make_tree()
    tree["bootstrap_value"] = np.zeros(4, np.float32)
    with pytest.raises(ShapeError, match="bootstrap_value"):
        EstimateAdvantage(tree, gamma=0.99, gae_lambda=0.95)


@pytest.mark.parametrize(
    "gamma, lam, name",
    [(1.01, 0.9, "gamma"), (0.9, 2.0, "gae_lambda"), (-0.1, 0.9, "gamma")],
)
def test_hyperparameters_checked_at_construction(gamma, lam, name):
    with pytest.raises(ConfigError, match=name):
        EstimateAdvantage(make_tree(), gamma=gamma, gae_lambda=lam)


def test_other_transforms_name_missing_or_bad_fields():
    tree = make_tree()
    with pytest.raises(ConfigError, match="advantage"):
        NormalizeAdvantage(tree)
    EstimateAdvantage(tree, gamma=0.9, gae_lambda=0.9)
    with pytest.raises(ConfigError, match="valid"):
        NormalizeAdvantage(tree, only_valid=True)
    with pytest.raises(DtypeError, match="observation.pixels"):
        NormalizeObservations(tree, leaves=["pixels"])
    with pytest.raises(ConfigError, match="observation.speed"):
        NormalizeObservations(tree, leaves=["speed"])
    with pytest.raises(ConfigError, match="gamma"):
        NormalizeRewards(tree, gamma=1.5)
    with pytest.raises(ConfigError, match="clip"):
        NormalizeRewards(tree, gamma=0.9, clip=0)
    with pytest.raises(ConfigError, match="terminated"):
        ComputeValidMask(ArrayDict({"reward": np.zeros((2, 2))}))
    tree["reward"] = np.zeros((8, 3), np.int64)
    with pytest.raises(DtypeError, match="reward"):
        ClipRewards(tree)


def test_add_reward_clipping_clips_the_tree_rewards():
    from parllel.builders import add_reward_clipping

    tree = make_tree()
    nd(tree["reward"])[:] = np.linspace(-4.0, 4.0, 24, dtype=np.float32).reshape(8, 3)
    (clip,) = add_reward_clipping(tree)
    assert isinstance(clip, ClipRewards)
    clip(tree)
    rewards = nd(tree["reward"])
    assert rewards.min() == -1.0 and rewards.max() == 1.0
    np.testing.assert_array_equal(
        rewards[np.abs(rewards) < 1],
        np.linspace(-4.0, 4.0, 24, dtype=np.float32).reshape(8, 3)[np.abs(rewards) < 1],
    )
