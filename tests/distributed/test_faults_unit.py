"""How a RaySampler waits and words its reports, without Ray: a fake ``ray.wait``."""

from __future__ import annotations

from parllel.distributed.faults import plain_text, wait_ready


class FakeRay:
    """``wait`` says the object is ready after ``ready_after`` calls."""

    def __init__(self, ready_after: int) -> None:
        self.ready_after, self.calls, self.timeouts = ready_after, 0, []

    def wait(self, refs, timeout):
        self.calls += 1
        self.timeouts.append(timeout)
        return (refs if self.calls > self.ready_after else []), []


def test_reports_give_the_total_seconds_waited():
    ray, reports = FakeRay(ready_after=5), []
    wait_ready(ray, "ref", 0.5, reports.append)
    # never more than one second per wait (Ctrl-C), never past the period
    assert ray.timeouts == [0.5] * 6
    assert reports == [0.5, 1.0, 1.5, 2.0, 2.5]


def test_a_long_period_is_waited_in_steps_of_a_second():
    ray, reports = FakeRay(ready_after=3), []
    wait_ready(ray, "ref", 2.5, reports.append)
    assert ray.timeouts == [1.0, 1.0, 0.5, 1.0]
    assert reports == [2.5]


def test_without_a_period_nothing_is_reported():
    ray, reports = FakeRay(ready_after=4), []
    wait_ready(ray, "ref", None, reports.append)
    assert ray.calls == 5 and reports == []


def test_a_limit_ends_the_wait_unready():
    ray, reports = FakeRay(ready_after=10), []
    assert not wait_ready(ray, "ref", 1.0, reports.append, limit=2.5)
    assert ray.timeouts == [1.0, 1.0, 0.5] and reports == [1.0, 2.0]


def test_ready_within_the_limit_and_a_spent_limit_looks_once():
    ray = FakeRay(ready_after=2)
    assert wait_ready(ray, "ref", None, lambda waited: None, limit=5.0)
    assert ray.timeouts == [1.0, 1.0, 1.0]
    spent = FakeRay(ready_after=0)
    assert wait_ready(spent, "ref", None, lambda waited: None, limit=-1.0)
    assert spent.timeouts == [0.0]


def test_terminal_colour_codes_are_removed():
    coloured = "\x1b[36mray::SamplerActor.collect()\x1b[39m failed\x1b[0m"
    assert plain_text(coloured) == "ray::SamplerActor.collect() failed"
