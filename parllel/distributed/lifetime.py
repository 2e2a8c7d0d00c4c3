"""A RaySampler's checks before it starts, and its shutdown (actors, Ray, memory)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from parllel.arrays.shared_memory import remove_dead_owner_segments
from parllel.errors import ConfigError


def check_config(
    n_actors: int,
    max_lag: int | None,
    max_restarts: int,
    start_timeout: float | None,
    timeout_seconds: float | None,
    num_cpus_per_actor: float,
    node_ids: Sequence[str] | None,
    max_in_flight: int | None,
) -> None:
    """Raise ConfigError naming the first bad argument (before Ray starts)."""
    if int(n_actors) < 1:
        raise ConfigError(f"n_actors must be >= 1, got {n_actors}")
    if max_lag is not None and int(max_lag) < 0:
        raise ConfigError(f"max_lag must be >= 0 or None, got {max_lag}")
    if int(max_restarts) < 0:
        raise ConfigError(f"max_restarts must be >= 0, got {max_restarts}")
    if start_timeout is not None and not start_timeout > 0:
        raise ConfigError(f"start_timeout must be > 0 or None, got {start_timeout}")
    if timeout_seconds is not None and not timeout_seconds > 0:
        raise ConfigError(f"timeout_seconds must be > 0 or None, got {timeout_seconds}")
    if not num_cpus_per_actor >= 0:
        raise ConfigError(f"num_cpus_per_actor must be >= 0, got {num_cpus_per_actor}")
    if max_in_flight is not None and int(max_in_flight) < 1:
        raise ConfigError(f"max_in_flight must be >= 1 or None, got {max_in_flight}")
    if node_ids is not None and (
        isinstance(node_ids, str) or len(node_ids) != int(n_actors)
    ):
        raise ConfigError(
            f"node_ids needs one node id per actor ({n_actors}), got {node_ids!r}"
        )


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def free_dead_segments(pid: int, node_id: str | None, here: str | None) -> None:
    """Unlink the shared memory a killed actor process left, if it ran on this
    node (``here``) and is gone (its tree, with process cages, is shared)."""
    if node_id is not None and node_id == here and pid != os.getpid():
        if _process_gone(pid):
            remove_dead_owner_segments(pid)


def shutdown(
    ray: Any,
    actors: list[Any],
    infos: dict[int, tuple[int, str | None]],
    started_ray: bool,
    timeout: float,
) -> None:
    """Close the actors' samplers (up to ``timeout`` s), kill the actors, shut
    Ray down if the sampler started it, and unlink what killed actors left.

    Args:
        infos: actor index -> (pid, node id) of its current process.
    """
    if not ray.is_initialized():
        return
    here = ray.get_runtime_context().get_node_id()
    try:
        refs = [actor.close.remote() for actor in actors]
        ray.wait(refs, num_returns=len(refs), timeout=timeout)
    except Exception:
        pass
    for actor in actors:
        try:
            ray.kill(actor, no_restart=True)
        except Exception:
            pass
    if started_ray:
        ray.shutdown()
    for pid, node_id in infos.values():
        try:
            free_dead_segments(pid, node_id, here)
        except Exception:
            pass
