"""The process's registry of page-locked memory (parllel.torch.page_locks),
against a fake CUDA runtime that enforces the driver's rules
(tests/helpers/fake_cudart.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from parllel.errors import ConfigError, ParllelError
from parllel.torch.page_locks import PAGE, PageLocks, _uncovered, page_span
from tests.helpers.fake_cudart import (
    ALREADY_REGISTERED,
    NOT_REGISTERED,
    FakeCudaError,
    FakeCudart,
)


def pages(n: int) -> np.ndarray:
    """``n`` page-aligned pages of host memory."""
    raw = np.zeros((n + 1) * PAGE, np.uint8)
    offset = -raw.__array_interface__["data"][0] % PAGE
    return raw[offset : offset + n * PAGE]


def test_the_fake_enforces_cudas_rules():
    cuda = FakeCudart()
    memory = pages(4)
    base = memory.__array_interface__["data"][0]
    assert cuda.host_register(base, 2 * PAGE) == 0
    # an overlapping range is refused with 712, and the error stays pending
    assert cuda.host_register(base + PAGE, 2 * PAGE) == ALREADY_REGISTERED
    with pytest.raises(FakeCudaError, match="712"):
        cuda.copy(torch.zeros(1), torch.ones(1), non_blocking=False)
    assert cuda.get_last_error() == 0  # the copy read it
    assert cuda.host_unregister(base + PAGE) == NOT_REGISTERED
    assert cuda.get_last_error() == NOT_REGISTERED
    assert cuda.get_last_error() == 0
    # a copy into locked memory is deferred until a wait, into unlocked memory not
    locked = torch.from_numpy(memory[:4].view(np.float32))
    unlocked = torch.from_numpy(memory[3 * PAGE : 3 * PAGE + 4].view(np.float32))
    cuda.copy(locked, torch.ones(1), non_blocking=True)
    cuda.copy(unlocked, torch.ones(1), non_blocking=True)
    assert locked.item() == 0 and unlocked.item() == 1
    cuda.event().synchronize()
    assert locked.item() == 1


def test_only_the_pages_under_a_view_are_locked_not_its_whole_buffer():
    cuda = FakeCudart()
    replay = np.zeros((1000, 4, 256), np.float32)  # full size: 4 MB
    window = replay[100:108]  # the [T, B] window copied: 32 kB
    hold = cuda.locks.lock(window)
    assert cuda.locks.nbytes <= window.nbytes + 2 * PAGE
    lo, hi = page_span(window)
    assert cuda.locks.ranges == [(lo, hi)]
    hold.release()
    assert cuda.registered == {}


def test_holders_share_ranges_and_the_last_release_unregisters_after_a_sync():
    cuda = FakeCudart()
    memory = pages(6)
    first = cuda.locks.lock(memory[: 4 * PAGE])
    second = cuda.locks.lock(memory[2 * PAGE :])  # overlaps: only 2 pages are new
    assert len(cuda.registered) == 2  # never an overlapping registration
    first.release()
    assert cuda.locks.nbytes == 6 * PAGE  # the second still holds both ranges
    second.release()
    second.release()  # idempotent
    assert cuda.registered == {}
    assert cuda.log == ["sync"]  # one synchronize before the unregisters


@given(
    st.lists(st.tuples(st.integers(0, 30), st.integers(1, 10)), min_size=1, max_size=8),
    st.randoms(),
)
def test_any_views_in_any_order_register_disjoint_ranges_and_release_them_all(
    spans, rng
):
    cuda = FakeCudart()
    memory = pages(40)
    holds = [cuda.locks.lock(memory[lo * PAGE : (lo + n) * PAGE]) for lo, n in spans]
    covered = {
        page for start, end in cuda.locks.ranges for page in range(start, end, PAGE)
    }
    base = memory.__array_interface__["data"][0]
    wanted = {
        base + page * PAGE for lo, n in spans for page in range(lo, lo + n)
    }  # fmt: skip
    assert covered == wanted
    rng.shuffle(holds)
    for hold in holds:
        hold.release()
    assert cuda.registered == {} and cuda.locks.ranges == []


@given(
    st.lists(
        st.tuples(st.integers(0, 40), st.integers(1, 10)).map(
            lambda r: (r[0] * PAGE, (r[0] + r[1]) * PAGE)
        ),
        max_size=8,
    )
)
def test_uncovered_pieces_stay_disjoint_and_cover_every_request(requests):
    ranges: list[tuple[int, int]] = []
    for lo, hi in requests:
        for piece in _uncovered(lo, hi, ranges):
            ranges.append(piece)
        ranges.sort()
    for (_, end), (start, _) in zip(ranges, ranges[1:]):
        assert end <= start
    covered = {page for lo, hi in ranges for page in range(lo, hi, PAGE)}
    wanted = {page for lo, hi in requests for page in range(lo, hi, PAGE)}
    assert covered == wanted


@pytest.mark.parametrize(
    ("code", "meaning"),
    [
        (712, "cudaErrorHostMemoryAlreadyRegistered"),
        (2, "/dev/shm"),
        (801, "virtualized runtime"),
    ],
)
def test_a_refused_registration_says_what_the_code_means_and_clears_it(code, meaning):
    cuda = FakeCudart()
    cuda.fail_next = code
    with pytest.raises(ConfigError, match=meaning) as error:
        cuda.locks.lock(pages(1))
    assert "ulimit" not in str(error.value)
    assert "pin_memory=False" in str(error.value)
    assert "was cleared" in str(error.value)
    assert cuda.last_error == 0  # the next CUDA call does not raise it
    cuda.copy(torch.zeros(1), torch.ones(1), non_blocking=False)
    assert cuda.registered == {} and cuda.locks.ranges == []


def test_a_refusal_that_cannot_be_cleared_says_to_restart(monkeypatch):
    cuda = FakeCudart()
    monkeypatch.setattr(cuda, "get_last_error", lambda: None)
    cuda.fail_next = 712
    with pytest.raises(ConfigError, match="restart the process"):
        cuda.locks.lock(pages(1))


def test_a_refusal_midway_unregisters_what_the_same_call_registered():
    cuda = FakeCudart()
    memory = pages(5)
    held = cuda.locks.lock(memory[2 * PAGE : 3 * PAGE])
    real = cuda.host_register
    calls = [0]

    def second_fails(pointer: int, size: int) -> int:
        calls[0] += 1
        if calls[0] == 2:
            cuda.fail_next = 2
        return real(pointer, size)

    cuda.host_register = second_fails  # type: ignore[method-assign]
    with pytest.raises(ConfigError):
        cuda.locks.lock(memory)  # pages 0-1 register, pages 3-4 fail
    assert cuda.locks.ranges == list(cuda.registered_ranges())
    assert cuda.locks.nbytes == PAGE
    held.release()
    assert cuda.registered == {}


def test_an_unregister_the_runtime_refuses_is_reported():
    cuda = FakeCudart()
    hold = cuda.locks.lock(pages(1))
    cuda.registered.clear()  # unregistered behind the registry's back
    with pytest.raises(ParllelError, match="cudaErrorHostMemoryNotRegistered"):
        hold.release()
    assert cuda.last_error == 0
    assert cuda.locks.ranges == []


def test_the_process_registry_is_one_per_process(monkeypatch):
    from parllel.torch import page_locks

    monkeypatch.setattr(page_locks, "_process_locks", None)
    first = page_locks.process_page_locks()
    assert page_locks.process_page_locks() is first
    assert isinstance(first, PageLocks)
