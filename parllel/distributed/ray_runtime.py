"""Ray, imported when first needed, and the local Ray a RaySampler may start.

Nothing else in parllel imports ray; importing :mod:`parllel.distributed`
does not either (the runners can refer to a RaySampler without ray
installed).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from parllel.errors import MissingDependencyError
from parllel.errors.base import install_hint


def import_ray() -> Any:
    """The ``ray`` module.

    Raises:
        MissingDependencyError: ray is not installed.
    """
    try:
        import ray
    except ImportError as error:
        raise MissingDependencyError(
            f"sampling on Ray needs the 'ray' package: {install_hint('ray')}"
        ) from error
    return ray


@contextmanager
def kept_signal_handlers() -> Iterator[None]:
    """Restore this process's SIGINT and SIGTERM handlers on exit.

    Starting or joining Ray (``ray.init``, a ``ray.cluster_utils.Cluster``'s
    head node) installs a SIGTERM handler in the driver that outlives
    ``ray.shutdown``; the runners' graceful stop on SIGTERM, and code run
    after the sampler, expect the handlers they had. Outside the main thread
    (where handlers cannot change) it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)


def init_ray(**kwargs: Any) -> None:
    """``ray.init(**kwargs)``, keeping this process's SIGINT and SIGTERM handlers."""
    ray = import_ray()
    with kept_signal_handlers():
        ray.init(**kwargs)


# Ray runs its workers at nice 15 by default: on a machine whose cores are
# all busy (the learner, another job) the sampler actors then get almost no
# CPU, and sampling stalls for minutes. Sampling is the work here: nice 0.
SAMPLER_SYSTEM_CONFIG = {"worker_niceness": 0}


def start_local_ray(num_cpus: int, **kwargs: Any) -> None:
    """Start a new local Ray of this process's own (never joining another one
    running on the machine) with ``num_cpus`` CPUs, no dashboard, and the
    actors at the same priority as this process (``worker_niceness`` 0).
    ``kwargs`` go to ``ray.init``."""
    options: dict[str, Any] = {"include_dashboard": False, **kwargs}
    options["_system_config"] = {
        **SAMPLER_SYSTEM_CONFIG,
        **options.get("_system_config", {}),
    }
    init_ray(address="local", num_cpus=num_cpus, **options)


def connect(address: str | None, num_cpus: int) -> bool:
    """Join the Ray cluster at ``address``, or start a local Ray if none runs.

    Args:
        address: ``"auto"`` (the cluster this machine belongs to) or the
            address of a running cluster; None: this process's Ray if it is
            initialized, else a new local Ray of its own (never another one
            running on the machine) with ``num_cpus`` CPUs and no dashboard
            (:func:`start_local_ray`).

    Returns:
        Whether this call started Ray (the caller shuts it down then).
    """
    ray = import_ray()
    if ray.is_initialized():
        return False
    if address is None:  # a new Ray of our own, even if the machine runs a cluster
        start_local_ray(num_cpus)
    else:
        init_ray(address=address)
    return True


def node_affinity(node_id: str) -> Any:
    """A scheduling strategy that places an actor on the node ``node_id`` (hard)."""
    ray = import_ray()
    strategies = ray.util.scheduling_strategies
    return strategies.NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
