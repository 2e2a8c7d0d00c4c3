"""The shared argument checks (parllel.validation)."""

from __future__ import annotations

import math

import pytest

from parllel.errors import ConfigError
from parllel.validation import (
    check_at_least,
    check_count,
    check_fraction,
    check_positive,
)


@pytest.mark.parametrize("x", [1e-9, 1, 2.5])
def test_positive_accepts_and_returns_a_float(x):
    assert check_positive("x", x) == float(x)


@pytest.mark.parametrize("x", [0, -1, math.nan, math.inf, "a", None])
def test_positive_refuses(x):
    with pytest.raises(ConfigError, match="x must be a positive number"):
        check_positive("x", x)


def test_positive_allows_inf_when_asked():
    assert check_positive("clip", math.inf, allow_inf=True) == math.inf


@pytest.mark.parametrize(
    ("x", "allow_zero", "allow_one", "ok"),
    [
        (0.0, True, True, True),
        (0.0, False, True, False),
        (1.0, True, True, True),
        (1.0, True, False, False),
        (0.5, False, False, True),
        (-0.1, True, True, False),
        (1.1, True, True, False),
        (math.nan, True, True, False),
    ],
)
def test_fraction_intervals(x, allow_zero, allow_one, ok):
    if ok:
        assert check_fraction("f", x, allow_zero=allow_zero, allow_one=allow_one) == x
    else:
        with pytest.raises(ConfigError, match="f must be"):
            check_fraction("f", x, allow_zero=allow_zero, allow_one=allow_one)


def test_fraction_names_the_interval():
    with pytest.raises(ConfigError, match=r"tau must be in \(0, 1\], got 0.0"):
        check_fraction("tau", 0, allow_zero=False)


def test_at_least():
    assert check_at_least("n", 1) == 1
    assert check_at_least("margin", 0.0, minimum=0) == 0.0
    for bad in (0, 0.5, math.nan):
        with pytest.raises(ConfigError, match="n must be >= 1"):
            check_at_least("n", bad)


@pytest.mark.parametrize("x", [0, 1.0, True, "2", None])
def test_count_refuses_non_integers_and_small_ones(x):
    with pytest.raises(ConfigError, match="epochs must be an integer >= 1"):
        check_count("epochs", x)


def test_count_accepts_integers():
    assert check_count("epochs", 3) == 3
