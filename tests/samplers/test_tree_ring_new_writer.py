"""TreeRing after its writer died: a handover for a new writer, a replaced tree.

The dead writer is simulated in this process: a writer ring that took a tree
and never gives it back. A hypothesis test checks the rebuilt semaphores
against the counters for every state the ring can be left in.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel.arrays import Array
from parllel.errors import TreeRingError
from parllel.samplers.tree_ring import TreeRing
from parllel.tree import ArrayDict


def make_layout() -> ArrayDict:
    return ArrayDict({"reward": Array((3, 2), dtype=np.float32)})


def semaphore_count(semaphore) -> int:
    """The semaphore's count (taken, then given back)."""
    count = 0
    while semaphore.acquire(False):
        count += 1
    for _ in range(count):
        semaphore.release()
    return count


@settings(max_examples=30, deadline=None)
@given(
    k=st.integers(2, 4),
    written=st.integers(0, 6),
    read_ahead=st.integers(0, 4),
    holding=st.booleans(),
    writing=st.booleans(),
)
def test_new_handover_counts_follow_the_ring_counters(
    k, written, read_ahead, holding, writing
):
    ring = TreeRing.allocate(make_layout(), k=k)
    try:
        writer = TreeRing(ring.trees, handover=ring.handover)
        read = max(written - min(read_ahead, k), 0)
        for n in range(written):  # fill and read in turn up to the state asked
            writer.begin_write(block=False)
            writer.end_write(stamp=n)
            if n < read:
                ring.begin_read(block=False)
                ring.end_read()
        while ring.read < read:
            ring.begin_read(block=False)
            ring.end_read()
        holding = holding and written > read
        if holding:
            ring.begin_read(block=False)
        if writing:  # the writer dies holding a tree, if there is a free one
            writer.begin_write(block=False)
        ring.handover = ring.handover.for_new_writer(holding)
        new_writer = TreeRing(ring.trees, handover=ring.handover)
        waiting = written - read
        assert semaphore_count(ring.handover.free) == k - waiting
        assert semaphore_count(ring.handover.filled) == waiting - int(holding)
        # the new writer takes the tree after the last one written
        if waiting < k:
            assert new_writer.begin_write(block=False) == written % k
            new_writer.end_write(stamp=99)
        # the reader gets the filled trees in order, then the new writer's
        if holding:
            ring.end_read()
        stamps = []
        while (index := ring.begin_read(block=False)) is not None:
            stamps.append(ring.stamp(index))
            ring.end_read()
        expected = list(range(read + int(holding), written))
        assert stamps == expected + ([99] if waiting < k else [])
    finally:
        ring.close()


def test_replace_tree_swaps_in_a_new_tree_and_refuses_the_held_one():
    ring = TreeRing.allocate(make_layout(), k=2)
    try:
        with ring.writing(stamp=1) as tree:
            tree["reward"][:] = 1.0
        held = ring.begin_read()
        with pytest.raises(TreeRingError, match="held by the reader"):
            ring.replace_tree(held)
        old = ring.trees[1]
        ring.replace_tree(1)
        assert ring.trees[1] is not old and old["reward"].closed
        assert ring.trees[1]["reward"].to_ndarray().shape == (3, 2)
        assert ring.trees[held]["reward"].to_ndarray().sum() == 6.0
        ring.end_read()
    finally:
        ring.close()


def test_inconsistent_counters_are_refused():
    ring = TreeRing.allocate(make_layout(), k=2)
    try:
        ring.handover.header.to_ndarray()[1] = 5  # written 5, read 0: impossible
        with pytest.raises(TreeRingError, match="inconsistent ring counters"):
            ring.handover.for_new_writer(False)
    finally:
        ring.close()
