"""``check_object`` reads an object's counted entries and its state for the
check through the typed protocols ``CountedState`` and ``CheckedState``."""

from __future__ import annotations

import numpy as np
import pytest

from parllel.checkpoints.compatibility import CheckedState, CountedState, check_object
from parllel.errors import CheckpointMismatchError
from parllel.replays import UniformReplay
from parllel.runners.off_policy import ReplayCheckpoint
from tests.helpers.replay_helpers import build_replay_tree


def table_state(rows: int, width: int = 3) -> dict:
    return {"table": {"rows": np.zeros((rows, width), np.float32)}, "n": np.zeros(2)}


class Table:
    """Implements both protocols without importing them; its ``state_dict``
    must not be called by the check (the state would be copied)."""

    counted_state_entries = ("table.rows",)

    def __init__(self, rows: int) -> None:
        self.rows = rows

    def state_for_check(self) -> dict:
        return table_state(self.rows)

    def state_dict(self) -> dict:
        raise AssertionError("check_object copied the state: state_for_check unused")


class PlainTable:
    """Neither protocol: its counted-looking entry is compared whole."""

    def state_dict(self) -> dict:
        return table_state(5)


def test_an_object_implementing_the_protocols_is_checked_through_them():
    table = Table(rows=5)
    assert isinstance(table, CountedState) and isinstance(table, CheckedState)
    check_object("table", table, table_state(rows=9))  # the count may differ
    with pytest.raises(CheckpointMismatchError, match=r"'table.rows'.*\(4,\)"):
        check_object("table", table, table_state(rows=9, width=4))


def test_an_object_outside_the_protocols_is_checked_by_its_state_dict():
    plain = PlainTable()
    assert not isinstance(plain, CountedState)
    assert not isinstance(plain, CheckedState)
    check_object("table", plain, table_state(rows=5))
    with pytest.raises(CheckpointMismatchError, match=r"'table.rows': shape \(9, 3\)"):
        check_object("table", plain, table_state(rows=9))


def test_replays_and_their_checkpoint_objects_implement_the_protocols():
    replay = UniformReplay(
        build_replay_tree(4, 2, 12, final_slot=True), 4, np.random.default_rng(0)
    )
    assert isinstance(replay, CountedState)
    assert not isinstance(replay, CheckedState)
    checkpoint = ReplayCheckpoint(replay, include_contents=True)
    assert isinstance(checkpoint, CountedState)
    assert isinstance(checkpoint, CheckedState)
    assert checkpoint.counted_state_entries == replay.counted_state_entries
