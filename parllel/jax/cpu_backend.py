"""JAX's CPU backend set up for reinforcement learning's many small calls.

Three settings are fixed when JAX starts its backends (its first
computation), so a program chooses them before that:

- **synchronous calls**: by default JAX's CPU client runs each compiled call
  on a dispatch thread of its own and the caller waits for it. A policy step
  between env steps finds that thread asleep and pays its wake-up, more
  than the small network's arithmetic; run on the calling thread, the step
  skips it (docs/jax.md, "The CPU backend");
- **devices**: how many CPU devices JAX makes, so that a seed group's
  ``[K, ...]`` updates split over the cores (docs/seeds.md);
- **threads**: the size of XLA's intra-op thread pool, e.g. one when the
  env workers (or a second run) have the other cores. No XLA flag sets it:
  XLA sizes the pool by the CPUs the starting thread may run on, so the
  backend starts under an affinity mask of that many CPUs, and every thread
  gets the process's mask back after (docs/jax.md, "The CPU backend").
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Literal

import jax
from jax._src import xla_bridge

from parllel._warnings import warn_at_caller
from parllel.cages.child_processes import usable_cores
from parllel.errors import ConfigError, ParllelWarning

__all__ = ["configure_cpu_backend"]

_ASYNC_OPTION = "jax_cpu_enable_async_dispatch"
_pool_threads_set: int | None = None  # the pool size this module started XLA with


def configure_cpu_backend(
    *,
    devices: int | Literal["cores"] | None = None,
    synchronous: bool = True,
    threads: int | None = None,
) -> int:
    """Set up JAX's CPU backend; call it before the program's first JAX computation.

    Args:
        devices: CPU devices for a seed group's split updates (``"cores"``:
            one per core this process may use); None keeps JAX's count (one,
            unless the user chose one through ``JAX_NUM_CPU_DEVICES``, which
            is kept whatever is asked here).
        synchronous: compiled calls run on the calling thread (JAX's
            ``jax_cpu_enable_async_dispatch`` off).
        threads: the threads of XLA's intra-op pool, shared by every CPU
            device (Linux: set through the CPU affinity the backend starts
            under, which starts it now); None leaves XLA's default, one
            thread per core this process may use.

    Returns:
        The CPU devices JAX uses.

    Raises:
        ConfigError: ``devices`` or ``threads`` is below 1 (or ``devices``
            another string).

    Once JAX has computed, nothing can change: a :class:`ParllelWarning`
    says which request was too late, and the backend stays as it is.

    Example:
        >>> configure_cpu_backend()  # a single run: calls on this thread
        >>> configure_cpu_backend(devices="cores")  # a seed group
    """
    if devices == "cores":
        devices = usable_cores()
    if devices is not None and (not isinstance(devices, int) or devices < 1):
        raise ConfigError(
            f'devices must be an int >= 1, "cores" or None, got {devices!r}'
        )
    if threads is not None and threads < 1:
        raise ConfigError(f"threads must be >= 1, got {threads}")
    started = xla_bridge.backends_are_initialized()
    late = []
    if threads is not None and started and threads != _pool_threads_set:
        late.append(f"threads={threads}")
    if synchronous != _async_dispatch_off():
        if started:
            late.append(f"synchronous={synchronous}")
        else:
            jax.config.update(_ASYNC_OPTION, not synchronous)
    chosen = getattr(jax.config, "jax_num_cpu_devices", -1)
    if devices is not None and chosen == -1:  # nobody has chosen a count yet
        if not started:
            jax.config.update("jax_num_cpu_devices", int(devices))
        elif devices != len(jax.devices("cpu")):
            late.append(f"devices={devices}")
    if late:
        calls = "synchronous" if _async_dispatch_off() else "asynchronous"
        warn_at_caller(
            f"JAX's CPU backend had already started (any JAX array, "
            f"jax.devices() or a built model starts it), so {', '.join(late)} "
            f"cannot apply: it keeps {len(jax.devices('cpu'))} CPU device(s), "
            f"{calls} calls and XLA's thread pool as it started. Call "
            "configure_cpu_backend (or prepare_jax_for_training) at the start "
            "of the program, before anything JAX runs",
            ParllelWarning,
        )
    if threads is not None and not started:
        _start_with_threads(threads)
    return len(jax.devices("cpu"))


def _async_dispatch_off() -> bool:
    """Whether JAX's CPU client is (or will be) made synchronous."""
    return not jax.config.read(_ASYNC_OPTION)


def _start_with_threads(threads: int) -> None:
    """Start JAX's backends with an XLA intra-op pool of ``threads`` threads.

    The pool's size is fixed when it is made, from the affinity mask of the
    thread that makes it: start under a mask of ``threads`` CPUs, then give
    this thread and every thread made meanwhile the process's mask back.
    """
    if not hasattr(os, "sched_setaffinity"):
        warn_at_caller(
            f"configure_cpu_backend(threads={threads}): {sys.platform} has no "
            "CPU affinity masks, through which XLA's thread pool is sized; "
            "it keeps one thread per core",
            ParllelWarning,
        )
        return
    global _pool_threads_set
    allowed = os.sched_getaffinity(0)
    _pool_threads_set = threads
    if threads >= len(allowed):
        jax.devices()
        return
    before = set(os.listdir("/proc/self/task"))
    os.sched_setaffinity(0, sorted(allowed)[:threads])
    try:
        jax.devices()
    finally:
        for task in os.listdir("/proc/self/task"):
            if task not in before or int(task) == threading.get_native_id():
                try:
                    os.sched_setaffinity(int(task), allowed)
                except OSError:  # the thread ended meanwhile
                    pass
