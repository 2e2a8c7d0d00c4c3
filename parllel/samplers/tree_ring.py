"""TreeRing: K preallocated sample trees handed in turn to one writer and one reader.

A sampler (the *writer*) fills trees ``0, 1, ..., K - 1, 0, ...`` in turn;
a learner (the *reader*) reads them in the same order, usually in another
process. Two process-shared semaphores hand trees over: ``free`` counts the
trees the writer may take, ``filled`` the trees waiting for the reader. So
the writer never writes a tree the reader holds or has not read yet, and
the reader blocks until a filled tree is ready; nothing is copied. Every
filled tree carries a *stamp* (an integer the writer chooses, e.g. the
policy version that collected it).

It lives with the samplers, not in :mod:`parllel.tree`, because it is a
protocol between processes: it reuses the cages' process-synchronization
helpers (:mod:`parllel.cages.child_processes`, :func:`parllel.cages.process.channel.wait_for`),
which the tree layer sits below.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from parllel.arrays import Array
from parllel.cages.child_processes import start_context
from parllel.cages.process.channel import wait_for
from parllel.errors import ConfigError, TreeRingError
from parllel.tree import ArrayDict

# header slots of the shared int64 array; the K stamps follow
_CLOSED, _WRITTEN, _READ, _HEADER = 0, 1, 2, 3


@dataclass(frozen=True)
class LeafLayout:
    """Geometry of one Array leaf, enough to allocate another like it."""

    batch_shape: tuple[int, ...]
    feature_shape: tuple[int, ...]
    dtype: str
    padding: int
    full_size: int

    def allocate(self) -> Array:
        """A new zero-filled shared-memory Array of this geometry."""
        return Array(
            self.batch_shape,
            self.feature_shape,
            self.dtype,
            storage="shared",
            padding=self.padding,
            full_size=self.full_size,
        )


def tree_layout(tree: ArrayDict) -> ArrayDict:
    """The tree's nesting with a picklable :class:`LeafLayout` at every leaf.

    Raises:
        ConfigError: a leaf is not an :class:`~parllel.arrays.Array`.
    """

    def layout(leaf: Any) -> LeafLayout:
        if not isinstance(leaf, Array):
            raise ConfigError(
                f"tree leaves must be parllel Arrays to be allocated again, got "
                f"{type(leaf).__name__}"
            )
        return LeafLayout(
            leaf.batch_shape,
            leaf.feature_shape,
            leaf.dtype.str,
            leaf.padding,
            leaf.full_size,
        )

    return tree.map(layout)


def allocate_like(tree_or_layout: ArrayDict) -> ArrayDict:
    """A new shared-memory tree with the layout of a tree (or of its :func:`tree_layout`)."""
    first = next(iter(tree_or_layout.items_flat()), (None, None))[1]
    layout = (
        tree_or_layout if isinstance(first, LeafLayout) else tree_layout(tree_or_layout)
    )
    return layout.map(lambda leaf: leaf.allocate())


class Handover:
    """The cross-process part of a :class:`TreeRing`: semaphores and a shared header.

    Create it before starting the peer process and pass it as a process
    argument (semaphores travel only at process start); the trees may follow
    later, e.g. through a pipe, and both sides then build
    ``TreeRing(trees, handover=handover)``.

    Args:
        k: number of trees (>= 2).
        start_method: multiprocessing start method of the peer process
            (default: the cages' default, forkserver where available).
    """

    def __init__(self, k: int, start_method: str | None = None) -> None:
        if int(k) < 2:
            raise ConfigError(f"a TreeRing needs k >= 2 trees, got {k}")
        self.k = int(k)
        ctx = start_context(start_method)
        self.free = ctx.Semaphore(self.k)
        self.filled = ctx.Semaphore(0)
        self.header = Array((_HEADER + self.k,), dtype=np.int64, storage="shared")

    def for_new_writer(
        self, reader_holding: bool, start_method: str | None = None
    ) -> Handover:
        """A handover for a new writer process, after the old writer died.

        The reader's side builds it: the header (counters and stamps) is
        kept, so the trees filled and not yet read stay filled in order; the
        semaphores are made anew from the counters (the dead writer may have
        left the old ones anywhere): ``written - read`` trees are filled or
        held by the reader, the others free; a tree the dead writer was
        filling counts as free. Pass the new handover to the new writer's
        process and set it as the reader's ``ring.handover``.

        Args:
            reader_holding: the reader holds a tree (``begin_read`` without
                ``end_read``).
            start_method: start method of the new writer's process.
        """
        header = self.header.to_ndarray()
        waiting = int(header[_WRITTEN] - header[_READ])
        if not 0 <= waiting - int(reader_holding) <= waiting <= self.k:
            raise TreeRingError(
                f"inconsistent ring counters: {int(header[_WRITTEN])} written, "
                f"{int(header[_READ])} read, k={self.k}"
            )
        new = Handover.__new__(Handover)
        new.k = self.k
        ctx = start_context(start_method)
        new.free = ctx.Semaphore(self.k - waiting)
        new.filled = ctx.Semaphore(waiting - int(reader_holding))
        new.header = self.header
        return new

    def close(self) -> None:
        """Mark closed and wake a blocked writer and reader; the owner frees the header."""
        if not self.header.closed:
            self.header[_CLOSED] = 1
        self.free.release()
        self.filled.release()
        self.header.close()


class TreeRing:
    """K preallocated shared-memory trees handed in turn to a writer and a reader.

    One process writes (``begin_write`` / ``end_write``), one reads
    (``begin_read`` / ``end_read``), each holding at most one tree at a
    time. Pickle the ring into the peer process at its start (as a
    ``Process`` argument); each side then uses its own copy.

    Args:
        trees: K >= 2 trees of the same layout, every leaf a shared-memory
            Array (:meth:`allocate` builds them); the ring closes them in
            :meth:`close`.
        handover: the ring's :class:`Handover` if made beforehand (default: a new one).
        start_method: start method of the peer process (for a new handover).

    Example:
        >>> ring = TreeRing.allocate(sample_tree, k=2)
        >>> with ring.writing(stamp=version) as tree:   # in the sampler
        ...     fill(tree)
        >>> with ring.reading() as (tree, stamp):        # in the learner
        ...     train(tree)
    """

    def __init__(
        self,
        trees: Sequence[ArrayDict],
        *,
        handover: Handover | None = None,
        start_method: str | None = None,
    ) -> None:
        trees = list(trees)
        if len(trees) < 2:
            raise ConfigError(f"a TreeRing needs k >= 2 trees, got {len(trees)}")
        first = tree_layout(trees[0])
        for index, tree in enumerate(trees):
            if tree_layout(tree) != first:
                raise ConfigError(
                    f"tree {index} of the ring has another layout than tree 0"
                )
            for path, leaf in tree.items_flat():
                if leaf.storage != "shared":
                    raise ConfigError(
                        f"leaf {path!r} of tree {index} is in local memory; ring "
                        "trees must be shared (TreeRing.allocate makes them so)"
                    )
        self.handover = (
            handover if handover is not None else Handover(len(trees), start_method)
        )
        if self.handover.k != len(trees):
            raise ConfigError(
                f"the handover is for {self.handover.k} trees, got {len(trees)}"
            )
        self.trees = trees
        self._writing: int | None = None
        self._reading: int | None = None

    @classmethod
    def allocate(
        cls, tree_or_layout: ArrayDict, k: int = 2, *, start_method: str | None = None
    ) -> TreeRing:
        """A ring of ``k`` new shared trees with the layout of ``tree_or_layout``."""
        if int(k) < 2:
            raise ConfigError(f"a TreeRing needs k >= 2 trees, got {k}")
        trees: list[ArrayDict] = []
        try:
            for _ in range(int(k)):
                trees.append(allocate_like(tree_or_layout))
            return cls(trees, start_method=start_method)
        except BaseException:
            for tree in trees:
                tree.close()
            raise

    def __getstate__(self) -> dict[str, Any]:
        return {"trees": self.trees, "handover": self.handover}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.trees, self.handover = state["trees"], state["handover"]
        self._writing = self._reading = None

    # -- state -------------------------------------------------------------
    @property
    def k(self) -> int:
        """Number of trees."""
        return len(self.trees)

    @property
    def closed(self) -> bool:
        """True once either side closed the ring."""
        header = self.handover.header
        return header.closed or bool(header.to_ndarray()[_CLOSED])

    @property
    def written(self) -> int:
        """Trees filled so far (``end_write`` calls, by any process)."""
        return int(self.handover.header.to_ndarray()[_WRITTEN])

    @property
    def read(self) -> int:
        """Trees read and given back so far (``end_read`` calls)."""
        return int(self.handover.header.to_ndarray()[_READ])

    def _counter(self, slot: int) -> int:
        return int(self.handover.header.to_ndarray()[slot])

    def _acquire(
        self, semaphore: Any, block: bool, check_alive: Callable[[], None] | None
    ) -> bool:
        def check() -> None:
            if self.closed:
                raise TreeRingError("the TreeRing was closed while waiting on it")
            if check_alive is not None:
                check_alive()

        check()
        if not block:
            if not semaphore.acquire(False):
                return False
        else:
            wait_for(semaphore, 0.0, check)
        if self.closed:  # woken by close()
            raise TreeRingError("the TreeRing was closed while waiting on it")
        return True

    # -- writer ------------------------------------------------------------
    def begin_write(
        self, *, block: bool = True, check_alive: Callable[[], None] | None = None
    ) -> int | None:
        """Take the next tree to fill; return its index (None if ``block=False``
        and every tree is filled or held by the reader).

        ``check_alive()`` runs while blocked (every 0.1 s) and may raise to
        stop waiting, e.g. when the reader's process is gone.
        """
        if self._writing is not None:
            raise TreeRingError("begin_write twice: call end_write first")
        if not self._acquire(self.handover.free, block, check_alive):
            return None
        self._writing = self._counter(_WRITTEN) % self.k
        return self._writing

    def end_write(self, stamp: int = 0) -> None:
        """Hand the tree being written to the reader, stamped with ``stamp``."""
        index = self._writing
        if index is None:
            raise TreeRingError("end_write without begin_write")
        header = self.handover.header.to_ndarray()
        header[_HEADER + index] = int(stamp)
        header[_WRITTEN] += 1
        self._writing = None
        self.handover.filled.release()

    def cancel_write(self) -> None:
        """Give the tree being written back unfilled (the next ``begin_write`` gets it again)."""
        if self._writing is None:
            raise TreeRingError("cancel_write without begin_write")
        self._writing = None
        self.handover.free.release()

    # -- reader ------------------------------------------------------------
    def begin_read(
        self, *, block: bool = True, check_alive: Callable[[], None] | None = None
    ) -> int | None:
        """Take the oldest filled tree; return its index (None if ``block=False``
        and none is filled). ``check_alive`` as in :meth:`begin_write`."""
        if self._reading is not None:
            raise TreeRingError("begin_read twice: call end_read first")
        if not self._acquire(self.handover.filled, block, check_alive):
            return None
        self._reading = self._counter(_READ) % self.k
        return self._reading

    def end_read(self) -> None:
        """Give the tree being read back to the writer."""
        if self._reading is None:
            raise TreeRingError("end_read without begin_read")
        self.handover.header.to_ndarray()[_READ] += 1
        self._reading = None
        self.handover.free.release()

    def stamp(self, index: int) -> int:
        """The stamp ``end_write`` gave tree ``index``."""
        return int(self.handover.header.to_ndarray()[_HEADER + int(index)])

    @contextmanager
    def writing(self, stamp: int = 0) -> Iterator[ArrayDict]:
        """Context manager: the next tree to fill, handed over with ``stamp`` on exit
        (not handed over if the block raises)."""
        index = self.begin_write()
        assert index is not None
        try:
            yield self.trees[index]
        except BaseException:
            self.cancel_write()
            raise
        self.end_write(stamp)

    @contextmanager
    def reading(self) -> Iterator[tuple[ArrayDict, int]]:
        """Context manager: the oldest filled tree and its stamp, given back on exit."""
        index = self.begin_read()
        assert index is not None
        try:
            yield self.trees[index], self.stamp(index)
        finally:
            self.end_read()

    def replace_tree(self, index: int) -> None:
        """Put a new tree of the same layout at ``index`` and free the old one.

        The reader's side uses it after the writer's process died while
        filling tree ``index``: processes the dead writer started (e.g. cage
        workers) may still write into the old tree until they notice.
        """
        if index == self._reading:
            raise TreeRingError(f"tree {index} is held by the reader")
        old = self.trees[int(index)]
        self.trees[int(index)] = allocate_like(old)
        old.close()

    def close(self) -> None:
        """Close the ring for both sides (waiters raise TreeRingError);
        in the process that allocated them, free the trees and the header."""
        self.handover.close()
        for tree in self.trees:
            tree.close()
