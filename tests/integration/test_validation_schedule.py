"""check_positive_or_schedule: numbers, schedules, None, as both PPOs use it."""

from __future__ import annotations

import pytest

from parllel.errors import ConfigError
from parllel.schedules import linear_schedule
from parllel.validation import check_positive_or_schedule


def test_accepts_positive_numbers_and_schedules_ending_at_zero() -> None:
    check_positive_or_schedule("learning_rate", 3e-4)
    check_positive_or_schedule("learning_rate", linear_schedule(3e-4, 0.0))
    check_positive_or_schedule("value_clip_range", None, allow_none=True)


@pytest.mark.parametrize(
    "value, message",
    [
        (None, "must be given"),
        (0.0, "learning_rate"),
        (True, "a number or a schedule"),
        (linear_schedule(0.0, 1.0), "positive value at progress 0"),
        (linear_schedule(1.0, -1.0), "non-negative one at progress 1"),
        (lambda progress: 1 / 0, "failed when called"),
    ],
)
def test_refuses_what_no_schedule_can_be(value, message) -> None:
    with pytest.raises(ConfigError, match=message):
        check_positive_or_schedule("learning_rate", value)
