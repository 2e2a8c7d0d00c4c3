"""PhaseTimes sums per phase until taken; sampler_metrics turns them into ms per batch."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from parllel.timing import SAMPLER_PHASES, PhaseTimes, sampler_metrics

phases = st.sampled_from(["batch", *SAMPLER_PHASES, "custom"])
seconds = st.floats(0.0, 10.0, allow_nan=False)
recordings = st.lists(st.dictionaries(phases, seconds, max_size=6), max_size=20)


@given(recordings, st.integers(0, 19))
def test_take_returns_the_sums_since_the_last_take(records, split):
    times = PhaseTimes()
    for record in records[:split]:
        times.record(record)
    times.take()
    for record in records[split:]:
        times.record(record)
    taken = times.take()
    rest = records[split:]
    assert taken["count"] == len(rest)
    expected: dict[str, float] = {}
    for record in rest:  # a plain reference
        for phase, value in record.items():
            expected[phase] = expected.get(phase, 0.0) + value
    assert taken["seconds"].keys() == expected.keys()
    for phase, value in expected.items():
        assert abs(taken["seconds"][phase] - value) <= 1e-9 * max(1.0, value)
    assert times.take() == {"count": 0, "seconds": {}}


@given(recordings, recordings)
def test_merging_what_another_took_equals_recording_here(first, second):
    here, there, both = PhaseTimes(), PhaseTimes(), PhaseTimes()
    for record in first:
        here.record(record)
        both.record(record)
    for record in second:
        there.record(record)
        both.record(record)
    here.merge(there.take())
    assert here.count == both.count
    assert here.seconds.keys() == both.seconds.keys()
    for phase, value in both.seconds.items():
        assert abs(here.seconds[phase] - value) <= 1e-9 * max(1.0, value)


def test_sampler_metrics_are_milliseconds_per_batch_with_the_rest_as_other():
    taken = {
        "count": 4,
        "seconds": {
            "batch": 0.4,
            "env_step": 0.2,
            "inference": 0.1,
            "transforms": 0.02,
        },
    }
    metrics = sampler_metrics(taken)
    assert metrics == {
        "time/sampler/batch_ms": 100.0,
        "time/sampler/env_step_ms": 50.0,
        "time/sampler/inference_ms": 25.0,
        "time/sampler/transforms_ms": 5.0,
        "time/sampler/other_ms": 20.0,
    }
    assert sampler_metrics({"count": 0, "seconds": {}}) == {}


def test_other_is_never_negative():
    taken = {"count": 1, "seconds": {"batch": 1.0, "env_step": 0.7, "worker_wait": 0.4}}
    assert sampler_metrics(taken)["time/sampler/other_ms"] == 0.0
