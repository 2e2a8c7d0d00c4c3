"""Functional transforms on empty batches (T == 0 or B == 0) match the references."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel.transforms.functional import (
    discounted_return,
    generalized_advantage_estimation,
    normalize_advantage,
    valid_mask,
)
from tests.transforms.test_transforms_kernels import (
    TOL,
    columns,
    flags_at,
    ref_gae,
    ref_normalized,
    ref_return,
    ref_valid,
)

SETTINGS = settings(max_examples=60, deadline=None)


@st.composite
def small_batches(draw):
    """Batches whose T and B may be 0, with optional features and per-component flags."""
    n_steps = draw(st.integers(0, 3))
    n_envs = draw(st.integers(0, 3))
    feature_shape = draw(st.sampled_from([(), (2,), (2, 3)]))
    per_component = draw(st.booleans()) and feature_shape != ()
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shape = (n_steps, n_envs) + feature_shape
    flag_shape = shape if per_component else shape[:2]
    return {
        "reward": rng.uniform(-2, 2, shape).astype(dtype),
        "value": rng.uniform(-5, 5, shape).astype(dtype),
        "terminated": rng.random(flag_shape) < 0.3,
        "truncated": rng.random(flag_shape) < 0.3,
        "bootstrap_value": rng.uniform(-5, 5, shape[1:]).astype(dtype),
        "final_value": rng.uniform(-5, 5, shape).astype(dtype),
    }


@SETTINGS
@given(batch=small_batches(), use_boot=st.booleans(), use_final=st.booleans())
def test_discounted_return_of_any_size(batch, use_boot, use_final):
    boot = batch["bootstrap_value"] if use_boot else None
    final = batch["final_value"] if use_final else None
    out = discounted_return(
        batch["reward"], batch["terminated"], batch["truncated"], gamma=0.9,
        bootstrap_value=boot, final_value=final,
    )  # fmt: skip
    shape = batch["reward"].shape
    assert out.shape == shape and out.dtype == batch["reward"].dtype
    for col in columns(shape):
        sl = (slice(None),) + col
        ref = ref_return(
            batch["reward"][sl], flags_at(batch["terminated"], shape, col),
            flags_at(batch["truncated"], shape, col),
            None if boot is None else boot[col], None if final is None else final[sl], 0.9,
        )  # fmt: skip
        np.testing.assert_allclose(out[sl], ref, **TOL)


@SETTINGS
@given(batch=small_batches())
def test_gae_of_any_size(batch):
    adv, ret = generalized_advantage_estimation(**batch, gamma=0.9, gae_lambda=0.8)
    shape = batch["reward"].shape
    assert adv.shape == ret.shape == shape
    for col in columns(shape):
        sl = (slice(None),) + col
        ref_adv, ref_ret = ref_gae(
            batch["reward"][sl], batch["value"][sl],
            flags_at(batch["terminated"], shape, col), flags_at(batch["truncated"], shape, col),
            batch["bootstrap_value"][col], batch["final_value"][sl], 0.9, 0.8, True,
        )  # fmt: skip
        np.testing.assert_allclose(adv[sl], ref_adv, **TOL)
        np.testing.assert_allclose(ret[sl], ref_ret, **TOL)


@SETTINGS
@given(batch=small_batches(), use_mask=st.booleans())
def test_normalize_advantage_of_any_size(batch, use_mask):
    advantage = batch["value"].copy()
    valid = ~batch["terminated"] if use_mask else None
    out = normalize_advantage(advantage, valid)
    assert out is advantage and out.shape == batch["value"].shape
    if out.size == 0:
        return
    mask = (
        np.ones(out.shape, bool)
        if valid is None
        else np.broadcast_to(
            valid.reshape(valid.shape + (1,) * (out.ndim - valid.ndim)), out.shape
        )
    )
    if not mask.any():
        np.testing.assert_array_equal(out, batch["value"])
        return
    chosen = batch["value"][mask].astype(np.float64)
    expected = ref_normalized(chosen)
    np.testing.assert_allclose(out[mask], expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(out[~mask], batch["value"][~mask])


@SETTINGS
@given(batch=small_batches())
def test_valid_mask_of_any_size(batch):
    terminated = batch["terminated"]
    if terminated.ndim != 2:
        per_env = int(np.prod(terminated.shape[2:]))
        terminated = terminated.reshape(terminated.shape[:2] + (per_env,)).any(-1)
    out = valid_mask(terminated)
    assert out.shape == terminated.shape and out.dtype == np.bool_
    np.testing.assert_array_equal(out, ref_valid(terminated))
