"""Named OS shared-memory segments with strict ownership.

A :class:`SharedSegment` is created by one process (its owner) and attached
by name from any other (fork, spawn or forkserver children). Only the owner
unlinks it (on close, garbage collection, exit, or through the resource
tracker if the owner is killed); attaching processes never do. See
docs/arrays.md ("Shared memory and ownership").
"""

from __future__ import annotations

import itertools
import mmap
import os
import secrets
import tempfile
import weakref
from collections.abc import Sequence
from multiprocessing import resource_tracker
from typing import Any

_SHM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
NAME_PREFIX = "parllel_"
_counter = itertools.count()

# Attached (not owned) mappings of this process, by segment name, so that
# unpickling many arrays of one segment maps it once.
_attached: weakref.WeakValueDictionary[str, SharedSegment] = (
    weakref.WeakValueDictionary()
)


def segment_path(name: str) -> str:
    """Return the file path that backs the segment called ``name``."""
    return os.path.join(_SHM_DIR, name)


# The resource tracker removes POSIX shared memory by name ("/" + file name
# in /dev/shm); elsewhere segments are plain files and are not tracked.
_TRACKED = _SHM_DIR == "/dev/shm"


def _unlink_if_owner(path: str, owner_pid: int) -> None:
    # Called by weakref.finalize (also at exit). A forked child inherits the
    # finalizer but is not the owner, so it must never unlink.
    if os.getpid() == owner_pid:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        if _TRACKED:
            resource_tracker.unregister("/" + os.path.basename(path), "shared_memory")


class SharedSegment:
    """A block of shared memory, owned by its creator, attachable by name.

    Use :meth:`create` in the owning process and :meth:`attach` elsewhere.
    ``segment.buffer`` is a writable ``mmap`` to build numpy views on.

    Example:
        >>> seg = SharedSegment.create(1024)
        >>> other = SharedSegment.attach(seg.name, seg.size)  # e.g. in a child
        >>> seg.close()  # owner: the name disappears from /dev/shm
    """

    def __init__(
        self, name: str, size: int, buffer: mmap.mmap, owner_pid: int, owns: bool
    ) -> None:
        self.name = name
        self.size = size
        self.buffer = buffer
        self.owner_pid = owner_pid
        self._owns = owns
        self._finalizer = weakref.finalize(
            self, _unlink_if_owner, segment_path(name), owner_pid
        )
        if not owns:
            self._finalizer.detach()

    @classmethod
    def create(cls, size: int, suffix: str = "") -> SharedSegment:
        """Create a new zero-filled segment of ``size`` bytes owned by this process
        (``suffix`` ends its name)."""
        size = max(int(size), 1)
        while True:
            name = (
                f"{NAME_PREFIX}{os.getpid()}_{next(_counter)}_{secrets.token_hex(4)}"
                f"{suffix}"
            )
            path = segment_path(name)
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
            except FileExistsError:
                continue
            break
        try:
            os.ftruncate(fd, size)
            buffer = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            os.unlink(path)
            raise
        os.close(fd)
        if _TRACKED:  # removed by the tracker if this process dies unclosed
            resource_tracker.register("/" + name, "shared_memory")
        return cls(name, size, buffer, owner_pid=os.getpid(), owns=True)

    @classmethod
    def attach(cls, name: str, size: int, owner_pid: int = -1) -> SharedSegment:
        """Map an existing segment by name (never unlinks it).

        Raises:
            FileNotFoundError: the owner already closed the segment.
        """
        segment = _attached.get(name)
        if segment is not None:
            return segment
        try:
            fd = os.open(segment_path(name), os.O_RDWR)
        except FileNotFoundError:
            raise FileNotFoundError(
                f"shared-memory segment {name!r} no longer exists: its owner "
                "closed it (or exited) before this process attached"
            ) from None
        try:
            buffer = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        segment = cls(name, size, buffer, owner_pid=owner_pid, owns=False)
        _attached[name] = segment
        return segment

    @property
    def is_owner(self) -> bool:
        """True in the process that created (and will unlink) the segment."""
        return self._owns and self.owner_pid == os.getpid()

    @property
    def closed(self) -> bool:
        """True once the owner has unlinked the segment."""
        if self.is_owner:
            return not self._finalizer.alive
        return not os.path.exists(segment_path(self.name))

    def close(self) -> None:
        """Owner: unlink the name now (idempotent). Attachers: no-op.

        The mapping itself stays valid for views that are still alive; the
        kernel frees the memory when the last view is gone.
        """
        if self.is_owner:
            self._finalizer()


SEMAPHORE_LIST_SUFFIX = "_semaphores"
"""Ends the name of a segment that lists named semaphores of its owner."""


def record_semaphores(semaphores: Sequence[Any]) -> SharedSegment | None:
    """A segment of this process listing the names of ``semaphores``
    (multiprocessing semaphores), or None if none has a name in /dev/shm.

    Named semaphores (``/dev/shm/sem.*``, made by the forkserver and spawn
    start methods) are removed by the resource tracker when their process
    dies unclosed, unless the tracker dies with it (a Ray actor killed with
    its process group). :func:`remove_dead_owner_segments` then unlinks the
    listed semaphores too. Close the segment when the semaphores are done
    with (the owner unlinks it; the semaphores clean up themselves).
    """
    names = []
    for semaphore in semaphores:
        name = getattr(getattr(semaphore, "_semlock", None), "name", None)
        if name and os.path.exists(_semaphore_path(name)):
            names.append(name)
    if not names or not _TRACKED:
        return None
    data = "\n".join(names).encode()
    segment = SharedSegment.create(len(data), suffix=SEMAPHORE_LIST_SUFFIX)
    segment.buffer[: len(data)] = data
    return segment


def _semaphore_path(name: str) -> str:
    return os.path.join(_SHM_DIR, "sem." + name.lstrip("/"))


def _unlink_listed_semaphores(path: str) -> None:
    try:
        with open(path, "rb") as listing:
            names = listing.read().rstrip(b"\0").decode().split("\n")
    except (OSError, UnicodeDecodeError):
        return
    for name in names:
        if name.startswith("/mp-") and "/" not in name[1:]:
            try:
                os.unlink(_semaphore_path(name))
            except OSError:
                pass


def list_segments(pid: int | None = None) -> list[str]:
    """Names of the parllel segments that exist now, optionally of one owner pid."""
    prefix = NAME_PREFIX if pid is None else f"{NAME_PREFIX}{pid}_"
    try:
        return sorted(n for n in os.listdir(_SHM_DIR) if n.startswith(prefix))
    except FileNotFoundError:
        return []


def remove_dead_owner_segments(pid: int) -> list[str]:
    """Unlink the segments a dead process created and never closed, and the
    named semaphores it listed (:func:`record_semaphores`); return the
    segments' names.

    A process killed before it could close its segments leaves them until the
    resource tracker removes them when the whole program exits. A long-lived
    parent that restarts such a child calls this once the child is gone (and
    stops the tracker from removing them a second time at exit). Processes
    still attached keep their mappings.

    Raises:
        ValueError: ``pid`` is this process.
    """
    if int(pid) == os.getpid():
        raise ValueError("remove_dead_owner_segments is for segments of a dead process")
    names = list_segments(int(pid))
    for name in names:
        if name.endswith(SEMAPHORE_LIST_SUFFIX):
            _unlink_listed_semaphores(segment_path(name))
        try:
            os.unlink(segment_path(name))
        except FileNotFoundError:
            continue
        if _TRACKED:
            resource_tracker.unregister("/" + name, "shared_memory")
    return names
