"""Kernels against plain-Python scalar references on hypothesis batches."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parllel.errors import ConfigError, DtypeError, ShapeError
from parllel.transforms.functional import (
    discounted_return,
    generalized_advantage_estimation,
    normalize_advantage,
    valid_mask,
)

SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TOL = {"rtol": 1e-5, "atol": 1e-5}


# -- plain-Python references -------------------------------------------------
def ref_gae(reward, value, term, trunc, boot, final, gamma, lam, bootstrap_truncated):
    """Scalar GAE over one ``[T]`` column; returns (advantage, return) lists."""
    n = len(reward)
    adv = [0.0] * n
    following_adv = 0.0
    for t in reversed(range(n)):
        if term[t]:
            next_value, carry = 0.0, 0.0
        elif trunc[t]:
            next_value = float(final[t]) if bootstrap_truncated else 0.0
            carry = 0.0
        elif t == n - 1:
            next_value, carry = float(boot), 0.0
        else:
            next_value, carry = float(value[t + 1]), following_adv
        delta = float(reward[t]) + gamma * next_value - float(value[t])
        adv[t] = delta + gamma * lam * carry
        following_adv = adv[t]
    return adv, [a + float(v) for a, v in zip(adv, value)]


def ref_return(reward, term, trunc, boot, final, gamma):
    """Scalar discounted return; ``boot``/``final`` may be None (then 0)."""
    n = len(reward)
    out = [0.0] * n
    for t in reversed(range(n)):
        if term[t]:
            following = 0.0
        elif trunc[t]:
            following = 0.0 if final is None else float(final[t])
        elif t == n - 1:
            following = 0.0 if boot is None else float(boot)
        else:
            following = out[t + 1]
        out[t] = float(reward[t]) + gamma * following
    return out


def columns(shape):
    """All (b, *feature) index tuples of a ``[T, B, *F]`` array."""
    return list(np.ndindex(*shape[1:]))


@st.composite
def batches(draw):
    """A random batch: T, B, feature shape, flag layout, dtype, data."""
    n_steps = draw(st.integers(1, 24))
    n_envs = draw(st.integers(1, 5))
    feature_shape = draw(st.sampled_from([(), (3,), (2, 2)]))
    per_component_flags = draw(st.booleans()) and feature_shape != ()
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    p_term = draw(st.sampled_from([0.0, 0.1, 0.4]))
    p_trunc = draw(st.sampled_from([0.0, 0.1, 0.4]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shape = (n_steps, n_envs) + feature_shape
    flag_shape = shape if per_component_flags else shape[:2]
    return {
        "reward": rng.uniform(-2, 2, shape).astype(dtype),
        "value": rng.uniform(-5, 5, shape).astype(dtype),
        "terminated": rng.random(flag_shape) < p_term,
        "truncated": rng.random(flag_shape) < p_trunc,
        "bootstrap_value": rng.uniform(-5, 5, shape[1:]).astype(dtype),
        "final_value": rng.uniform(-5, 5, shape).astype(dtype),
    }


def flags_at(flags, shape, col):
    """The ``[T]`` flag column for output column ``col`` (broadcast per env)."""
    full = np.broadcast_to(
        flags.reshape(flags.shape + (1,) * (len(shape) - flags.ndim)), shape
    )
    return full[(slice(None),) + col]


# -- GAE and returns ---------------------------------------------------------
@SETTINGS
@given(
    batch=batches(),
    gamma=st.floats(0, 1),
    lam=st.floats(0, 1),
    boot_trunc=st.booleans(),
)
def test_gae_matches_reference(batch, gamma, lam, boot_trunc):
    adv, ret = generalized_advantage_estimation(
        **batch, gamma=gamma, gae_lambda=lam, truncation_as_termination=not boot_trunc
    )
    shape = batch["reward"].shape
    assert adv.dtype == batch["value"].dtype
    for col in columns(shape):
        sl = (slice(None),) + col
        ref_adv, ref_ret = ref_gae(
            batch["reward"][sl], batch["value"][sl],
            flags_at(batch["terminated"], shape, col), flags_at(batch["truncated"], shape, col),
            batch["bootstrap_value"][col], batch["final_value"][sl], gamma, lam, boot_trunc,
        )  # fmt: skip
        np.testing.assert_allclose(adv[sl], ref_adv, **TOL)
        np.testing.assert_allclose(ret[sl], ref_ret, **TOL)


@SETTINGS
@given(
    batch=batches(),
    gamma=st.floats(0, 1),
    use_boot=st.booleans(),
    use_final=st.booleans(),
)
def test_discounted_return_matches_reference(batch, gamma, use_boot, use_final):
    boot = batch["bootstrap_value"] if use_boot else None
    final = batch["final_value"] if use_final else None
    out = discounted_return(
        batch["reward"], batch["terminated"], batch["truncated"], gamma=gamma,
        bootstrap_value=boot, final_value=final,
    )  # fmt: skip
    shape = batch["reward"].shape
    for col in columns(shape):
        sl = (slice(None),) + col
        ref = ref_return(
            batch["reward"][sl], flags_at(batch["terminated"], shape, col),
            flags_at(batch["truncated"], shape, col),
            None if boot is None else boot[col], None if final is None else final[sl], gamma,
        )  # fmt: skip
        np.testing.assert_allclose(out[sl], ref, **TOL)


@SETTINGS
@given(batch=batches(), gamma=st.floats(0, 1))
def test_gae_with_lambda_one_is_bootstrapped_discounted_return(batch, gamma):
    _, ret = generalized_advantage_estimation(**batch, gamma=gamma, gae_lambda=1.0)
    expected = discounted_return(
        batch["reward"], batch["terminated"], batch["truncated"], gamma=gamma,
        bootstrap_value=batch["bootstrap_value"], final_value=batch["final_value"],
    )  # fmt: skip
    scale = 1 + np.abs(expected).max()
    np.testing.assert_allclose(ret, expected, rtol=1e-5, atol=1e-5 * scale)


def test_return_out_may_alias_reward():
    reward = np.ones((4, 2))
    flags = np.zeros((4, 2), bool)
    discounted_return(reward, flags, flags, gamma=0.5, return_out=reward)
    np.testing.assert_allclose(reward[:, 0], [1.875, 1.75, 1.5, 1.0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_analytic_truncation_bootstrap_matters(dtype):
    """Constant reward 1 and perfect values 1/(1-gamma) give zero advantages
    when truncations bootstrap, and visibly wrong ones when they terminate."""
    gamma, n_steps, n_envs = 0.9, 50, 3
    perfect = 1.0 / (1.0 - gamma)
    reward = np.ones((n_steps, n_envs), dtype)
    value = np.full((n_steps, n_envs), perfect, dtype)
    terminated = np.zeros((n_steps, n_envs), bool)
    truncated = np.zeros((n_steps, n_envs), bool)
    truncated[[4, 17, 30, 49], 0] = True
    truncated[::7, 1] = True
    batch = dict(
        reward=reward, value=value, terminated=terminated, truncated=truncated,
        bootstrap_value=np.full(n_envs, perfect, dtype),
        final_value=np.full((n_steps, n_envs), perfect, dtype),
    )  # fmt: skip
    for lam in (0.0, 0.95, 1.0):
        adv, ret = generalized_advantage_estimation(
            **batch, gamma=gamma, gae_lambda=lam
        )
        np.testing.assert_allclose(adv, 0.0, atol=1e-4)
        np.testing.assert_allclose(ret, perfect, rtol=1e-5)
        wrong, _ = generalized_advantage_estimation(
            **batch, gamma=gamma, gae_lambda=lam, truncation_as_termination=True
        )
        # At a truncation, termination semantics drop gamma * V = 9.0.
        np.testing.assert_allclose(wrong[truncated], -gamma * perfect, rtol=1e-5)
        assert np.abs(wrong).max() > 8.0


# -- advantage normalization and the valid mask ---------------------------------
@SETTINGS
@given(batch=batches(), use_mask=st.booleans())
def test_normalize_advantage_matches_numpy(batch, use_mask):
    adv = batch["value"].copy()
    original = adv.copy()
    valid = None
    mask = np.ones(adv.shape, bool)
    if use_mask:
        valid = valid_mask(batch["terminated"].reshape(adv.shape[:2] + (-1,)).any(-1))
        mask = np.broadcast_to(
            valid.reshape(valid.shape + (1,) * (adv.ndim - 2)), adv.shape
        )
    normalize_advantage(adv, valid, epsilon=1e-8)
    selected = original[mask].astype(np.float64)
    expected = ref_normalized(selected)
    np.testing.assert_allclose(adv[mask], expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(adv[~mask], original[~mask])


def ref_normalized(x):
    """The plain reference: SB3's ``(a - a.mean()) / (a.std() + 1e-8)`` with the
    sample std (``ddof=1``); fewer than two entries unchanged."""
    if x.size < 2:
        return x
    return (x - x.mean()) / (x.std(ddof=1) + 1e-8)


def ref_valid(done):
    n_steps, n_envs = done.shape
    out = np.zeros(done.shape, bool)
    for b in range(n_envs):
        finished = False
        for t in range(n_steps):
            out[t, b] = not finished
            finished = finished or bool(done[t, b])
    return out


@SETTINGS
@given(batch=batches())
def test_valid_mask_matches_reference(batch):
    term = batch["terminated"].reshape(batch["reward"].shape[:2] + (-1,)).any(-1)
    trunc = batch["truncated"].reshape(term.shape + (-1,)).any(-1)
    np.testing.assert_array_equal(valid_mask(term, trunc), ref_valid(term | trunc))
    np.testing.assert_array_equal(valid_mask(term | trunc), ref_valid(term | trunc))


def test_valid_mask_example():
    done = np.array([[False, False], [True, False], [False, True], [False, False]])
    assert valid_mask(done).tolist() == [
        [True, True],
        [True, True],
        [False, True],
        [False, False],
    ]


# -- bad input ---------------------------------------------------------------
def good_batch():
    shape = (6, 2)
    return dict(
        reward=np.zeros(shape, np.float32), value=np.zeros(shape, np.float32),
        terminated=np.zeros(shape, bool), truncated=np.zeros(shape, bool),
        bootstrap_value=np.zeros(2, np.float32), final_value=np.zeros(shape, np.float32),
    )  # fmt: skip


@pytest.mark.parametrize(
    "field, bad, error",
    [
        ("reward", np.zeros((6, 2), np.int64), DtypeError),
        ("value", np.zeros((6, 3), np.float32), ShapeError),
        ("value", np.zeros((6, 2), np.float16), DtypeError),
        ("terminated", np.zeros((6, 2), np.float32), DtypeError),
        ("truncated", np.zeros((5, 2), bool), ShapeError),
        ("bootstrap_value", np.zeros((6, 2), np.float32), ShapeError),
        ("final_value", np.zeros((6,), np.float32), ShapeError),
        ("reward", np.zeros(6, np.float32), ShapeError),
    ],
)
def test_gae_bad_field_is_named(field, bad, error):
    batch = good_batch()
    batch[field] = bad
    with pytest.raises(error, match=field):
        generalized_advantage_estimation(**batch, gamma=0.99, gae_lambda=0.95)


@pytest.mark.parametrize(
    "name, gamma, lam",
    [("gamma", 1.5, 0.9), ("gae_lambda", 0.9, -0.1), ("gamma", float("nan"), 0.9)],
)
def test_gae_hyperparameters_out_of_range(name, gamma, lam):
    with pytest.raises(ConfigError, match=name):
        generalized_advantage_estimation(**good_batch(), gamma=gamma, gae_lambda=lam)


def test_gae_without_final_value_needs_explicit_choice():
    batch = good_batch()
    del batch["final_value"]
    with pytest.raises(ConfigError, match="final_value"):
        generalized_advantage_estimation(**batch, gamma=0.99, gae_lambda=0.95)
    generalized_advantage_estimation(
        **batch, gamma=0.99, gae_lambda=0.95, truncation_as_termination=True
    )


def test_output_that_would_be_a_copy_is_refused():
    batch = good_batch()
    for key in ("reward", "value", "final_value"):
        batch[key] = np.zeros((6, 2, 3), np.float32)
    batch["bootstrap_value"] = np.zeros((2, 3), np.float32)
    out = np.zeros((6, 3, 2), np.float32).transpose(0, 2, 1)  # env/feature swapped
    with pytest.raises(ShapeError, match="advantage"):
        generalized_advantage_estimation(
            **batch, gamma=0.9, gae_lambda=0.9, advantage_out=out
        )
    with pytest.raises(ShapeError, match="return_"):
        generalized_advantage_estimation(
            **batch,
            gamma=0.9,
            gae_lambda=0.9,
            return_out=np.zeros((6, 2, 3), np.float64)[:, ::-1],
        )
