"""Ray, imported when first needed, and the local Ray a RaySampler may start.

Nothing else in parllel imports ray; importing :mod:`parllel.distributed`
does not either (the runners can refer to a RaySampler without ray
installed).
"""

from __future__ import annotations

import signal
import threading
from typing import Any

from parllel.errors import MissingDependencyError


def import_ray() -> Any:
    """The ``ray`` module.

    Raises:
        MissingDependencyError: ray is not installed.
    """
    try:
        import ray
    except ImportError as error:
        raise MissingDependencyError(
            "sampling on Ray needs the 'ray' package: pip install 'parllel[ray]'"
        ) from error
    return ray


def init_ray(**kwargs: Any) -> None:
    """``ray.init(**kwargs)``, keeping this process's SIGINT and SIGTERM handlers.

    ``ray.init`` installs its own SIGTERM handler in the driver and leaves it
    after ``ray.shutdown``; the runners' graceful stop on SIGTERM, and code
    run after the sampler, expect the handlers they had.
    """
    ray = import_ray()
    if threading.current_thread() is not threading.main_thread():
        ray.init(**kwargs)
        return
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        ray.init(**kwargs)
    finally:
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)


def connect(address: str | None, num_cpus: int) -> bool:
    """Join the Ray cluster at ``address``, or start a local Ray if none runs.

    Args:
        address: ``"auto"`` (the cluster this machine belongs to) or the
            address of a running cluster; None: this process's Ray if it is
            initialized, else a new local Ray of its own (never another one
            running on the machine) with ``num_cpus`` CPUs and no dashboard.

    Returns:
        Whether this call started Ray (the caller shuts it down then).
    """
    ray = import_ray()
    if ray.is_initialized():
        return False
    if address is None:  # a new Ray of our own, even if the machine runs a cluster
        init_ray(address="local", num_cpus=num_cpus, include_dashboard=False)
    else:
        init_ray(address=address)
    return True


def node_affinity(node_id: str) -> Any:
    """A scheduling strategy that places an actor on the node ``node_id`` (hard)."""
    ray = import_ray()
    strategies = ray.util.scheduling_strategies
    return strategies.NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
