"""parllel.cages.child_processes: the one parent-alive check."""

from __future__ import annotations

import multiprocessing

import pytest

from parllel.cages.child_processes import ParentGone, parent_check


class _Parent:
    pid = 4242

    def __init__(self) -> None:
        self.alive = True

    def is_alive(self) -> bool:
        return self.alive


def test_parent_check_raises_parent_gone_naming_the_parent_once_it_exited(
    monkeypatch,
):
    parent = _Parent()
    monkeypatch.setattr(multiprocessing, "parent_process", lambda: parent)
    check = parent_check()
    check()  # alive: nothing happens
    parent.alive = False
    with pytest.raises(ParentGone, match="parent process \\(pid 4242\\)"):
        check()


def test_parent_check_never_raises_in_a_process_multiprocessing_did_not_start():
    assert multiprocessing.parent_process() is None  # the test process
    parent_check()()
