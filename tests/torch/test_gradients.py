"""clip_grad_norm equals torch's clip_grad_norm_ bit for bit; the finite check."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel.checkpoints.finite import check_finite_update
from parllel.errors import NonFiniteError
from parllel.torch.algos.gradients import clip_grad_norm

shapes = st.lists(
    st.lists(st.integers(1, 5), min_size=0, max_size=3).map(tuple),
    min_size=1,
    max_size=4,
)


@settings(max_examples=60, deadline=None)
@given(
    shapes=shapes,
    seed=st.integers(0, 2**31 - 1),
    scale=st.sampled_from([1e-6, 1e-2, 1.0, 1e3, 1e20]),
    max_norm=st.sampled_from([1e-3, 0.5, 1.0, 10.0, math.inf]),
    dtype=st.sampled_from([torch.float32, torch.float64]),
    missing_grad=st.booleans(),
)
def test_equals_torch_bit_for_bit(shapes, seed, scale, max_norm, dtype, missing_grad):
    rng = np.random.default_rng(seed)
    grads = [torch.tensor(rng.normal(size=s) * scale, dtype=dtype) for s in shapes]
    mine = [torch.zeros_like(g, requires_grad=True) for g in grads]
    theirs = [torch.zeros_like(g, requires_grad=True) for g in grads]
    for m, t, g in zip(mine, theirs, grads):
        m.grad, t.grad = g.clone(), g.clone()
    if missing_grad:  # a parameter without a gradient is skipped by both
        mine[0].grad = theirs[0].grad = None
    norm = clip_grad_norm(mine, max_norm)
    reference = torch.nn.utils.clip_grad_norm_(theirs, max_norm)
    assert torch.equal(norm, reference) or (norm.isnan() and reference.isnan())
    for m, t in zip(mine, theirs):
        if m.grad is None:
            assert t.grad is None
        else:
            assert (
                torch.equal(m.grad, t.grad)
                or torch.equal(m.grad.isnan(), t.grad.isnan())
                and torch.equal(m.grad.nan_to_num(), t.grad.nan_to_num())
            )


def test_nan_gradients_give_a_nan_norm_as_torch():
    p = torch.zeros(3, requires_grad=True)
    p.grad = torch.tensor([1.0, float("nan"), 2.0])
    assert clip_grad_norm([p], 0.5).isnan()


def test_no_gradients_is_a_zero_norm():
    assert float(clip_grad_norm([torch.zeros(2, requires_grad=True)], 1.0)) == 0.0


def test_mixed_dtypes_go_to_torch():
    a = torch.zeros(2, requires_grad=True)
    b = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    a.grad, b.grad = (
        torch.tensor([3.0, 4.0]),
        torch.tensor([0.0, 0.0], dtype=torch.float64),
    )
    assert float(clip_grad_norm([a, b], 1.0)) == pytest.approx(5.0)
    assert float(a.grad.norm()) == pytest.approx(1.0, rel=1e-5)


def test_finite_check_passes_finite_values_whose_sum_overflows():
    big = torch.tensor(3e38)  # float32: big + big is inf
    check_finite_update("PPO", 0, loss=big, grad_norm=big)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_finite_check_names_the_non_finite_value(bad):
    with pytest.raises(NonFiniteError, match="grad_norm = "):
        check_finite_update(
            "PPO", 3, loss=torch.tensor(1.0), grad_norm=torch.tensor(bad)
        )
