"""TreeRing: the hand-over protocol of K shared trees between a writer and a reader."""

from __future__ import annotations

import multiprocessing as mp
import os
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel.arrays import Array
from parllel.arrays.shared_memory import list_segments
from parllel.errors import ConfigError, TreeRingError
from parllel.samplers.tree_ring import Handover, TreeRing, allocate_like, tree_layout
from parllel.tree import ArrayDict


def make_tree(storage: str = "shared", T: int = 3) -> ArrayDict:
    return ArrayDict(
        {
            "observation": Array((T, 2), (4,), np.float32, storage=storage, padding=1),
            "agent_info": {"value": Array((T, 2), (), np.float32, storage=storage)},
            "done": Array((T, 2), (), np.bool_, storage=storage),
        }
    )


def fill(tree: ArrayDict, value: int) -> None:
    for _, leaf in tree.items_flat():
        leaf.padded_ndarray()[...] = value


def value_of(tree: ArrayDict) -> int:
    """The value every float leaf holds; raises if the leaves disagree."""
    values = {
        float(v)
        for _, leaf in tree.items_flat()
        if leaf.dtype.kind == "f"
        for v in np.unique(leaf.padded_ndarray())
    }
    assert len(values) == 1, f"a tree holds mixed values {sorted(values)}"
    return int(values.pop())


# -- construction --------------------------------------------------------------
def test_allocate_copies_the_layout_into_shared_memory():
    local = make_tree("local")
    with_ring = TreeRing.allocate(local, k=3)
    try:
        assert with_ring.k == 3
        for tree in with_ring.trees:
            assert tree_layout(tree) == tree_layout(local)
            assert all(leaf.storage == "shared" for _, leaf in tree.items_flat())
        segments = {
            leaf.segment_name for t in with_ring.trees for _, leaf in t.items_flat()
        }
        assert len(segments) == 3 * 3  # nothing shared between trees
    finally:
        with_ring.close()


def test_bad_rings_are_refused_with_clear_errors():
    with pytest.raises(ConfigError, match="k >= 2"):
        TreeRing.allocate(make_tree("local"), k=1)
    local = [make_tree("local"), make_tree("local")]
    with pytest.raises(ConfigError, match="local memory"):
        TreeRing(local)
    mixed = [
        allocate_like(make_tree("local", T=3)),
        allocate_like(make_tree("local", T=4)),
    ]
    try:
        with pytest.raises(ConfigError, match="another layout"):
            TreeRing(mixed)
    finally:
        for tree in mixed:
            tree.close()
    with pytest.raises(ConfigError, match="parllel Arrays"):
        tree_layout(ArrayDict({"x": np.zeros((3, 2))}))


def test_out_of_turn_calls_raise():
    ring = TreeRing.allocate(make_tree("local"), k=2)
    try:
        with pytest.raises(TreeRingError, match="without begin_write"):
            ring.end_write()
        with pytest.raises(TreeRingError, match="without begin_read"):
            ring.end_read()
        ring.begin_write()
        with pytest.raises(TreeRingError, match="twice"):
            ring.begin_write()
        ring.end_write()
        ring.begin_read()
        with pytest.raises(TreeRingError, match="twice"):
            ring.begin_read()
    finally:
        ring.close()


def test_close_frees_every_segment_and_refuses_waits():
    ring = TreeRing.allocate(make_tree("local"), k=2)
    names = [leaf.segment_name for t in ring.trees for _, leaf in t.items_flat()]
    names.append(ring.handover.header.segment_name)
    ring.close()
    assert not set(names) & set(list_segments(os.getpid()))
    assert ring.closed
    with pytest.raises(TreeRingError):
        ring.begin_write()
    with pytest.raises(TreeRingError):
        ring.begin_read()
    ring.close()  # idempotent


def test_a_failed_write_gives_the_tree_back():
    ring = TreeRing.allocate(make_tree("local"), k=2)
    try:
        with pytest.raises(ValueError, match="boom"):
            with ring.writing(stamp=7):
                raise ValueError("boom")
        assert ring.written == 0
        assert ring.begin_read(block=False) is None
        with ring.writing(stamp=8) as tree:
            assert tree is ring.trees[0]
        with ring.reading() as (tree, stamp):
            assert tree is ring.trees[0] and stamp == 8
    finally:
        ring.close()


# -- the protocol against a model (one process, non-blocking calls) ---------------
# writes twice as likely as reads, so the ring often fills up
OPERATIONS = st.lists(
    st.sampled_from(["bw", "ew", "bw", "ew", "br", "er"]), max_size=60
)


@settings(max_examples=100, deadline=None)
@given(k=st.integers(2, 4), operations=OPERATIONS)
def test_ring_follows_the_single_producer_single_consumer_model(k, operations):
    ring = TreeRing.allocate(make_tree("local", T=2), k=k)
    try:
        written = read = 0  # model: trees handed over / given back
        writing = reading = None  # model: sequence number held by each side
        for op in operations:
            if op == "bw" and writing is None:
                index = ring.begin_write(block=False)
                if written - read >= k:  # every tree filled or held by the reader
                    assert index is None
                else:
                    assert index == written % k
                    assert reading is None or index != reading % k
                    writing = written
                    fill(ring.trees[index], written + 1)
            elif op == "ew" and writing is not None:
                ring.end_write(stamp=100 + writing)
                written, writing = written + 1, None
            elif op == "br" and reading is None:
                index = ring.begin_read(block=False)
                if read == written:
                    assert index is None
                else:
                    assert index == read % k
                    assert writing is None or index != writing % k
                    reading = read
                    assert value_of(ring.trees[index]) == read + 1
                    assert ring.stamp(index) == 100 + read
            elif op == "er" and reading is not None:
                ring.end_read()
                read, reading = read + 1, None
            assert (ring.written, ring.read) == (written, read)
    finally:
        ring.close()


@pytest.mark.parametrize("k", [2, 3, 5])
def test_writer_gets_no_tree_once_k_are_waiting_for_the_reader(k):
    ring = TreeRing.allocate(make_tree("local", T=2), k=k)
    try:
        for n in range(k):
            assert ring.begin_write(block=False) == n
            ring.end_write(stamp=n)
        assert ring.begin_write(block=False) is None
        assert ring.begin_read(block=False) == 0
        assert ring.begin_write(block=False) is None  # the reader holds tree 0
        ring.end_read()
        assert ring.begin_write(block=False) == 0
    finally:
        ring.close()


# -- two processes ---------------------------------------------------------------
def _writer(ring: TreeRing, batches: int) -> None:
    for n in range(batches):
        with ring.writing(stamp=n) as tree:
            fill(tree, n + 1)


def _wait_until_written(ring: TreeRing, count: int, process) -> None:
    while ring.written < count:
        assert process.exitcode in (None, 0), "the writer failed"
        time.sleep(0.001)


@pytest.mark.parametrize("k", [2, 3])
def test_writer_never_touches_a_tree_the_reader_holds(k):
    """The reader holds each tree until the writer has gone as far as it can
    (every other tree filled), then checks the held tree is unchanged."""
    batches = 4 * k + 1
    ring = TreeRing.allocate(make_tree("local"), k=k)
    process = mp.get_context("forkserver").Process(target=_writer, args=(ring, batches))
    process.start()
    try:
        for n in range(batches):
            index = ring.begin_read()
            tree = ring.trees[index]
            assert ring.stamp(index) == n and value_of(tree) == n + 1
            furthest = min(n + k, batches)  # the writer blocks after filling these
            _wait_until_written(ring, furthest, process)
            assert value_of(tree) == n + 1 and ring.stamp(index) == n
            assert ring.written == furthest
            ring.end_read()
        process.join(30)
        assert process.exitcode == 0
    finally:
        ring.close()
        process.join(30)


def _blocked_reader(ring: TreeRing, ready, result) -> None:
    ready.set()
    try:
        ring.begin_read()
    except TreeRingError:
        result.value = 1


def test_close_wakes_a_reader_blocked_in_another_process():
    ring = TreeRing.allocate(make_tree("local"), k=2)
    ctx = mp.get_context("forkserver")
    ready, result = ctx.Event(), ctx.Value("i", 0)
    process = ctx.Process(target=_blocked_reader, args=(ring, ready, result))
    process.start()
    ready.wait(30)  # attached: closing now wakes (or pre-empts) its wait
    ring.close()
    process.join(30)
    assert process.exitcode == 0 and result.value == 1


def test_check_alive_stops_a_wait_for_a_dead_peer():
    ring = TreeRing.allocate(make_tree("local"), k=2)
    process = mp.get_context("forkserver").Process(target=_writer, args=(ring, 0))
    process.start()
    process.join(30)

    def writer_alive() -> None:
        if not process.is_alive():
            raise RuntimeError("the writer is gone")

    try:
        with pytest.raises(RuntimeError, match="writer is gone"):
            ring.begin_read(check_alive=writer_alive)
    finally:
        ring.close()


def test_handover_made_first_and_trees_sent_later():
    handover = Handover(2)
    trees = [allocate_like(make_tree("local")) for _ in range(2)]
    ring = TreeRing(trees, handover=handover)
    try:
        with ring.writing(stamp=3) as tree:
            fill(tree, 5)
        with ring.reading() as (tree, stamp):
            assert value_of(tree) == 5 and stamp == 3
        with pytest.raises(ConfigError, match="handover is for 2"):
            TreeRing([*trees, trees[0]], handover=handover)
    finally:
        ring.close()
