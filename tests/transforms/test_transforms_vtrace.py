"""V-trace and truncated importance weights against plain-Python references."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parllel.errors import ConfigError, DtypeError, ShapeError
from parllel.transforms.functional import (
    generalized_advantage_estimation,
    truncated_importance_weights,
    valid_mask,
    vtrace,
)
from tests.transforms.test_transforms_kernels import columns, flags_at

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


# -- plain-Python reference --------------------------------------------------
def ref_vtrace(reward, value, term, trunc, boot, final, ratio, gamma, lam,
               rho_bar, c_bar, pg_rho_bar, bootstrap_truncated):  # fmt: skip
    """V-trace over one ``[T]`` column, as the paper's forward sum.

    ``v[s] = V[s] + sum_{t >= s} gamma^(t - s) (prod_{s <= i < t} c[i]) delta[t]``
    where the sum stops at the first episode end or the batch end.
    Returns (targets, policy-gradient advantages) as lists.
    """
    n = len(reward)
    ratio = [float(x) for x in ratio]

    def ends(t):
        return bool(term[t]) or bool(trunc[t]) or t == n - 1

    def next_value(t):
        if term[t]:
            return 0.0
        if trunc[t]:
            return float(final[t]) if bootstrap_truncated else 0.0
        return float(boot) if t == n - 1 else float(value[t + 1])

    def delta(t):
        rho = min(rho_bar, ratio[t])
        return rho * (float(reward[t]) + gamma * next_value(t) - float(value[t]))

    targets = []
    for s in range(n):
        total, weight, t = 0.0, 1.0, s
        while True:
            total += weight * delta(t)
            if ends(t):
                break
            weight *= gamma * lam * min(c_bar, ratio[t])
            t += 1
        targets.append(float(value[s]) + total)
    advantages = []
    for s in range(n):
        following = next_value(s) if ends(s) else targets[s + 1]
        pg_rho = min(pg_rho_bar, ratio[s])
        advantages.append(
            pg_rho * (float(reward[s]) + gamma * following - float(value[s]))
        )
    return targets, advantages


@st.composite
def vtrace_batches(draw, max_steps=16):
    """Random batches (T and B may be 0) with both kinds of episode end."""
    n_steps = draw(st.integers(0, max_steps))
    n_envs = draw(st.integers(0, 4))
    feature_shape = draw(st.sampled_from([(), (), (3,), (2, 2)]))
    per_component_flags = draw(st.booleans()) and feature_shape != ()
    per_component_ratio = draw(st.booleans()) and feature_shape != ()
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    p_term = draw(st.sampled_from([0.0, 0.1, 0.3]))
    p_trunc = draw(st.sampled_from([0.0, 0.1, 0.3]))
    log_scale = draw(st.sampled_from([0.0, 0.3, 1.5]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shape = (n_steps, n_envs) + feature_shape
    flag_shape = shape if per_component_flags else shape[:2]
    ratio_shape = shape if per_component_ratio else shape[:2]
    return {
        "reward": rng.uniform(-2, 2, shape).astype(dtype),
        "value": rng.uniform(-5, 5, shape).astype(dtype),
        "terminated": rng.random(flag_shape) < p_term,
        "truncated": rng.random(flag_shape) < p_trunc,
        "bootstrap_value": rng.uniform(-5, 5, shape[1:]).astype(dtype),
        "final_value": rng.uniform(-5, 5, shape).astype(dtype),
        "log_ratio": rng.normal(0, log_scale, ratio_shape).astype(dtype),
    }


def clip_thresholds():
    return st.sampled_from([0.5, 1.0, 2.0, math.inf])


def assert_close(actual, expected, dtype):
    expected = np.asarray(expected, np.float64)
    scale = 1.0 + (np.abs(expected).max() if expected.size else 0.0)
    tol = 2e-5 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol * scale)


# -- against the reference -----------------------------------------------------
@SETTINGS
@given(
    batch=vtrace_batches(),
    gamma=st.floats(0, 1),
    lam=st.floats(0, 1),
    rho_bar=clip_thresholds(),
    c_bar=clip_thresholds(),
    pg_rho_bar=st.one_of(st.none(), clip_thresholds()),
    boot_trunc=st.booleans(),
    as_ratio=st.booleans(),
)
def test_vtrace_matches_reference(
    batch, gamma, lam, rho_bar, c_bar, pg_rho_bar, boot_trunc, as_ratio
):
    log_ratio = batch.pop("log_ratio")
    ratio_arg = {"ratio": np.exp(log_ratio)} if as_ratio else {"log_ratio": log_ratio}
    targets, advantages = vtrace(
        **batch, **ratio_arg, gamma=gamma, trace_lambda=lam, rho_bar=rho_bar,
        c_bar=c_bar, pg_rho_bar=pg_rho_bar, truncation_as_termination=not boot_trunc,
    )  # fmt: skip
    shape = batch["reward"].shape
    dtype = batch["value"].dtype
    assert targets.shape == advantages.shape == shape
    assert targets.dtype == advantages.dtype == dtype
    pg_bar = rho_bar if pg_rho_bar is None else pg_rho_bar
    for col in columns(shape):
        sl = (slice(None),) + col
        ratio = np.exp(flags_at(log_ratio, shape, col).astype(np.float64))
        ref_targets, ref_advantages = ref_vtrace(
            batch["reward"][sl], batch["value"][sl],
            flags_at(batch["terminated"], shape, col),
            flags_at(batch["truncated"], shape, col),
            batch["bootstrap_value"][col], batch["final_value"][sl], ratio,
            gamma, lam, rho_bar, c_bar, pg_bar, boot_trunc,
        )  # fmt: skip
        assert_close(targets[sl], ref_targets, dtype)
        assert_close(advantages[sl], ref_advantages, dtype)


def test_reference_on_a_hand_computed_column():
    """The reference itself, on one column worked out by hand."""
    # T = 3, gamma = 0.5, lambda = 1, ratios (2, 0.5, 1) clipped at 1 -> (1, .5, 1)
    # step 1 truncates (final value 4): the trace stops there.
    targets, advantages = ref_vtrace(
        reward=[1.0, 1.0, 1.0], value=[0.0, 2.0, 0.0], term=[0, 0, 0],
        trunc=[0, 1, 0], boot=8.0, final=[0.0, 4.0, 0.0], ratio=[2.0, 0.5, 1.0],
        gamma=0.5, lam=1.0, rho_bar=1.0, c_bar=1.0, pg_rho_bar=1.0,
        bootstrap_truncated=True,
    )  # fmt: skip
    # delta = (1 * (1 + .5 * 2 - 0), .5 * (1 + .5 * 4 - 2), 1 * (1 + .5 * 8 - 0))
    #       = (2, 0.5, 5); v1 = 2 + 0.5; v0 = 0 + 2 + 0.5 * 1 * 0.5 = 2.25
    assert targets == [2.25, 2.5, 5.0]
    # pg: (1 * (1 + .5 * 2.5 - 0), .5 * (1 + .5 * 4 - 2), 1 * (1 + .5 * 8))
    assert advantages == [2.25, 0.5, 5.0]


# -- the on-policy limit: lambda-returns ------------------------------------------
@SETTINGS
@given(
    batch=vtrace_batches(),
    gamma=st.floats(0, 1),
    lam=st.floats(0, 1),
    boot_trunc=st.booleans(),
    above_one=st.booleans(),
)
def test_on_policy_targets_are_gae_returns(batch, gamma, lam, boot_trunc, above_one):
    """Ratios 1 (or any ratios >= 1, clipped to 1) and rho_bar = c_bar = 1:
    the targets are GAE's lambda-returns, bit for bit in float64."""
    log_ratio = batch.pop("log_ratio")
    log_ratio = np.abs(log_ratio) if above_one else np.zeros_like(log_ratio)
    kwargs = dict(gamma=gamma, truncation_as_termination=not boot_trunc)
    targets, advantages = vtrace(
        **batch, log_ratio=log_ratio, trace_lambda=lam, **kwargs
    )
    gae_advantage, gae_return = generalized_advantage_estimation(
        **batch, gae_lambda=lam, **kwargs
    )
    if batch["value"].dtype == np.float64:
        np.testing.assert_array_equal(targets, gae_return)
    else:
        assert_close(targets, gae_return.astype(np.float64), np.float32)
    # the advantage is delta[t] + gamma * A[t + 1] (GAE's advantages, 0 where
    # the trace is cut), delta being GAE's advantage with lambda = 0
    delta, _ = generalized_advantage_estimation(**batch, gae_lambda=0.0, **kwargs)
    shape = targets.shape
    for col in columns(shape):
        sl = (slice(None),) + col
        cut = flags_at(batch["terminated"], shape, col) | flags_at(
            batch["truncated"], shape, col
        )
        cut[-1:] = True
        following = np.zeros(shape[0])
        following[:-1] = gae_advantage[sl][1:]
        expected = delta[sl] + gamma * np.where(cut, 0.0, following)
        assert_close(advantages[sl], expected, batch["value"].dtype)
    if lam == 1.0:
        assert_close(advantages, gae_advantage.astype(np.float64), np.float32)


# -- episode ends, invalid steps, empty batches ---------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_perfect_values_give_zero_advantages_under_any_ratios(dtype):
    """Constant reward 1 and values 1/(1 - gamma): every TD error is 0 when
    truncations bootstrap, whatever the ratios; termination semantics at a
    truncation would drop gamma * V."""
    gamma, n_steps, n_envs = 0.9, 40, 3
    perfect = 1.0 / (1.0 - gamma)
    rng = np.random.default_rng(0)
    truncated = np.zeros((n_steps, n_envs), bool)
    truncated[[3, 17, 39], 0] = True
    truncated[::5, 1] = True
    batch = dict(
        reward=np.ones((n_steps, n_envs), dtype),
        value=np.full((n_steps, n_envs), perfect, dtype),
        terminated=np.zeros((n_steps, n_envs), bool), truncated=truncated,
        bootstrap_value=np.full(n_envs, perfect, dtype),
        final_value=np.full((n_steps, n_envs), perfect, dtype),
        log_ratio=rng.normal(0, 1, (n_steps, n_envs)).astype(dtype),
    )  # fmt: skip
    for lam, bar in ((0.0, 1.0), (0.95, 1.0), (1.0, math.inf)):
        targets, advantages = vtrace(
            **batch, gamma=gamma, trace_lambda=lam, rho_bar=bar, c_bar=bar
        )
        np.testing.assert_allclose(targets, perfect, rtol=1e-5)
        np.testing.assert_allclose(advantages, 0.0, atol=1e-4)
        wrong, _ = vtrace(
            **batch, gamma=gamma, trace_lambda=lam, truncation_as_termination=True
        )
        rho = np.minimum(1.0, np.exp(batch["log_ratio"].astype(np.float64)))
        np.testing.assert_allclose(
            wrong[truncated], perfect - rho[truncated] * gamma * perfect, rtol=1e-4
        )


@SETTINGS
@given(batch=vtrace_batches(), gamma=st.floats(0, 1), lam=st.floats(0, 1))
def test_invalid_steps_do_not_leak_into_valid_ones(batch, gamma, lam):
    """Wait-reset sampling: whatever follows an episode end in the same
    column (garbage, NaN, huge log-ratios) leaves the valid steps alone."""
    shape = batch["reward"].shape
    if batch["terminated"].ndim != 2 or batch["truncated"].ndim != 2:
        return  # the valid mask is per env
    valid = valid_mask(batch["terminated"], batch["truncated"])
    targets, advantages = vtrace(**batch, gamma=gamma, trace_lambda=lam)
    garbage = dict(batch)
    invalid = ~valid
    full = invalid.reshape(invalid.shape + (1,) * (len(shape) - 2))
    for key in ("reward", "value", "final_value"):
        garbage[key] = np.where(full, np.nan, batch[key]).astype(batch[key].dtype)
    ratio_full = full if batch["log_ratio"].ndim == len(shape) else invalid
    garbage["log_ratio"] = np.where(ratio_full, 80.0, batch["log_ratio"]).astype(
        batch["log_ratio"].dtype
    )
    rng = np.random.default_rng(0)
    for key in ("terminated", "truncated"):
        garbage[key] = np.where(invalid, rng.random(invalid.shape) < 0.5, batch[key])
    targets2, advantages2 = vtrace(**garbage, gamma=gamma, trace_lambda=lam)
    np.testing.assert_array_equal(targets2[valid], targets[valid])
    np.testing.assert_array_equal(advantages2[valid], advantages[valid])


@pytest.mark.parametrize("shape", [(0, 3), (4, 0), (0, 0), (0, 2, 3), (3, 0, 2)])
def test_empty_batches_give_empty_outputs(shape):
    data = np.zeros(shape, np.float32)
    flags = np.zeros(shape[:2], bool)
    targets, advantages = vtrace(
        data, data, flags, flags, np.zeros(shape[1:], np.float32), data,
        log_ratio=np.zeros(shape[:2], np.float32), gamma=0.99,
    )  # fmt: skip
    assert targets.shape == advantages.shape == shape
    assert targets.dtype == np.float32


def test_preallocated_outputs_are_written_through_feature_views():
    rng = np.random.default_rng(1)
    shape = (5, 2, 3)
    batch = dict(
        reward=rng.normal(size=shape), value=rng.normal(size=shape),
        terminated=np.zeros(shape[:2], bool), truncated=np.zeros(shape[:2], bool),
        bootstrap_value=rng.normal(size=shape[1:]), final_value=rng.normal(size=shape),
        log_ratio=rng.normal(size=shape[:2]),
    )  # fmt: skip
    expected = vtrace(**batch, gamma=0.9, trace_lambda=0.8)
    storage = np.zeros((2,) + shape, np.float64)
    return_out, advantage_out = storage[0], storage[1]
    result = vtrace(
        **batch, gamma=0.9, trace_lambda=0.8,
        return_out=return_out, advantage_out=advantage_out,
    )  # fmt: skip
    assert result[0] is return_out and result[1] is advantage_out
    np.testing.assert_array_equal(storage[0], expected[0])
    np.testing.assert_array_equal(storage[1], expected[1])


# -- truncated importance weights ---------------------------------------------------
@SETTINGS
@given(
    log_ratio=st.lists(st.floats(-30, 30), max_size=20),
    clip=clip_thresholds(),
    dtype=st.sampled_from([np.float32, np.float64]),
)
def test_truncated_importance_weights_match_numpy(log_ratio, clip, dtype):
    log_ratio = np.asarray(log_ratio, dtype)
    expected = np.minimum(np.exp(log_ratio.astype(np.float64)), clip)
    weights = truncated_importance_weights(log_ratio, clip=clip)
    assert weights.dtype == dtype and weights.shape == log_ratio.shape
    np.testing.assert_allclose(weights, expected, rtol=1e-6)
    ratio = np.exp(log_ratio)
    in_place = truncated_importance_weights(ratio=ratio, clip=clip, out=ratio)
    assert in_place is ratio
    np.testing.assert_allclose(ratio, expected, rtol=1e-6)


# -- bad input ----------------------------------------------------------------------
def good_batch():
    shape = (6, 2)
    return dict(
        reward=np.zeros(shape, np.float32), value=np.zeros(shape, np.float32),
        terminated=np.zeros(shape, bool), truncated=np.zeros(shape, bool),
        bootstrap_value=np.zeros(2, np.float32), final_value=np.zeros(shape, np.float32),
        log_ratio=np.zeros(shape, np.float32),
    )  # fmt: skip


@pytest.mark.parametrize(
    "field, bad, error",
    [
        ("reward", np.zeros((6, 2), np.int64), DtypeError),
        ("value", np.zeros((6, 3), np.float32), ShapeError),
        ("terminated", np.zeros((6, 2), np.float32), DtypeError),
        ("truncated", np.zeros((5, 2), bool), ShapeError),
        ("bootstrap_value", np.zeros((6, 2), np.float32), ShapeError),
        ("final_value", np.zeros((6,), np.float32), ShapeError),
        ("log_ratio", np.zeros((5, 2), np.float32), ShapeError),
        ("log_ratio", np.zeros((6, 2, 1), np.float32), ShapeError),
        ("log_ratio", np.zeros((6, 2), np.int32), DtypeError),
        ("reward", np.zeros(6, np.float32), ShapeError),
    ],
)
def test_bad_field_is_named(field, bad, error):
    batch = good_batch()
    batch[field] = bad
    with pytest.raises(error, match=field):
        vtrace(**batch, gamma=0.99)


def test_ratio_arguments():
    batch = good_batch()
    log_ratio = batch.pop("log_ratio")
    with pytest.raises(ConfigError, match="exactly one of 'log_ratio'"):
        vtrace(**batch, gamma=0.99)
    with pytest.raises(ConfigError, match="exactly one of 'log_ratio'"):
        vtrace(**batch, log_ratio=log_ratio, ratio=np.exp(log_ratio), gamma=0.99)
    negative = np.ones_like(log_ratio)
    negative[3, 1] = -0.5
    with pytest.raises(ConfigError, match="'ratio' must be >= 0"):
        vtrace(**batch, ratio=negative, gamma=0.99)
    with pytest.raises(ConfigError, match="'ratio' must be >= 0"):
        truncated_importance_weights(ratio=negative)
    with pytest.raises(ConfigError, match="exactly one"):
        truncated_importance_weights()


@pytest.mark.parametrize(
    "name, value",
    [
        ("gamma", 1.5),
        ("trace_lambda", -0.1),
        ("trace_lambda", math.nan),
        ("rho_bar", 0.0),
        ("c_bar", -1.0),
        ("pg_rho_bar", math.nan),
    ],
)
def test_hyperparameters_out_of_range(name, value):
    kwargs = {"gamma": 0.99, name: value}
    with pytest.raises(ConfigError, match=name):
        vtrace(**good_batch(), **kwargs)


def test_without_final_value_needs_explicit_choice():
    batch = good_batch()
    del batch["final_value"]
    with pytest.raises(ConfigError, match="final_value"):
        vtrace(**batch, gamma=0.99)
    vtrace(**batch, gamma=0.99, truncation_as_termination=True)


def test_output_that_would_be_a_copy_is_refused():
    batch = good_batch()
    for key in ("reward", "value", "final_value"):
        batch[key] = np.zeros((6, 2, 3), np.float32)
    batch["bootstrap_value"] = np.zeros((2, 3), np.float32)
    out = np.zeros((6, 3, 2), np.float32).transpose(0, 2, 1)  # env/feature swapped
    with pytest.raises(ShapeError, match="advantage"):
        vtrace(**batch, gamma=0.9, advantage_out=out)
    with pytest.raises(ShapeError, match="return_"):
        vtrace(**batch, gamma=0.9, return_out=out)
    with pytest.raises(ConfigError, match="read-only"):
        readonly = np.zeros((6, 2, 3), np.float32)
        readonly.flags.writeable = False
        vtrace(**batch, gamma=0.9, return_out=readonly)


@pytest.mark.parametrize("as_ratio", [False, True])
def test_nan_ratio_propagates_instead_of_being_clipped(as_ratio):
    """A NaN ratio (e.g. unwritten target log-probs) must not pass for the
    clip threshold: the step's outputs and the trace before it turn NaN."""
    batch = good_batch()
    log_ratio = batch.pop("log_ratio")
    log_ratio[3, 0] = np.nan
    ratio_arg = {"ratio": np.exp(log_ratio)} if as_ratio else {"log_ratio": log_ratio}
    targets, advantages = vtrace(**batch, **ratio_arg, gamma=0.9)
    assert np.isnan(targets[:4, 0]).all() and np.isnan(advantages[3, 0])
    assert not np.isnan(targets[4:, 0]).any() and not np.isnan(targets[:, 1]).any()
    assert np.isnan(truncated_importance_weights(log_ratio)[3, 0])
