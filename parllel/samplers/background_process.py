"""The background sampler's process: build the sampler, then fill the ring's trees.

:class:`~parllel.samplers.BackgroundSampler` starts :func:`run_background_sampler`
in its own process. The protocol with the learner, over a pipe (the trees
themselves are handed over by the :class:`~parllel.samplers.tree_ring.TreeRing`):

- to the learner: ``("layout", tree layout, sampler state, follows weights)``
  once built;
  ``("started", base version)`` once sampling starts; per batch ``("begin",
  n)`` before it writes tree data and ``("batch", n, completed episodes,
  sampler state, phase times)`` before it hands the tree over; ``("waiting", version)`` /
  ``("resumed", version)`` around a wait for weights; ``("error", message,
  traceback)`` if it raised.
- from the learner: the K trees, then ``("start", state to load or None)``
  at the first ``collect_batch``.
"""

from __future__ import annotations

import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any

from parllel.cages.child_processes import ParentGone, parent_check
from parllel.errors import ConfigError, TreeRingError
from parllel.samplers.tree_ring import Handover, TreeRing, tree_layout


def _follows_weights(handler: Any) -> bool:
    return (
        callable(getattr(handler, "refresh_weights", None))
        and getattr(handler, "policy_version", None) is not None
    )


def _stateful_parts(sampler: Any) -> dict[str, Any]:
    """The sampler's parts with state: its transform and observation normalizer."""
    parts = {
        "transform": getattr(sampler, "transform", None),
        "observation_normalizer": getattr(sampler, "observation_normalizer", None),
    }
    return {
        name: part
        for name, part in parts.items()
        if callable(getattr(part, "state_dict", None))
    }


#: key of the handler's action generator state in :func:`sampler_state`
ACTION_GENERATOR = "action_generator"


def _action_generator(sampler: Any) -> Any:
    """The handler's generator of actions (a ``torch.Generator``), or None."""
    generator = getattr(getattr(sampler, "handler", None), "generator", None)
    return generator if callable(getattr(generator, "get_state", None)) else None


def sampler_state(sampler: Any) -> dict[str, Any]:
    """``state_dict()`` of the sampler's transform and observation normalizer,
    and the state of the handler's action generator (if it has one)."""
    state = {name: part.state_dict() for name, part in _stateful_parts(sampler).items()}
    generator = _action_generator(sampler)
    if generator is not None:  # numpy bytes: a tensor would travel by shared memory
        state[ACTION_GENERATOR] = generator.get_state().numpy().copy()
    return state


def load_sampler_state(sampler: Any, state: dict[str, Any]) -> None:
    """Restore what :func:`sampler_state` returned into the sampler's parts."""
    parts = _stateful_parts(sampler)
    generator = _action_generator(sampler)
    if generator is not None:
        parts[ACTION_GENERATOR] = generator
    unknown = sorted(set(state) - set(parts))
    if unknown:
        raise ConfigError(
            f"the background sampler has no {unknown} to load state into "
            f"(it has {sorted(parts)})"
        )
    for name, part_state in state.items():
        if name == ACTION_GENERATOR:
            current = generator.get_state()  # a fresh byte tensor to fill
            current.numpy()[:] = part_state
            generator.set_state(current)
        else:
            parts[name].load_state_dict(part_state)


def _wait_for_weights(
    handler: Any, least: int, conn: Any, check_alive: Callable[[], None]
) -> int:
    """Refresh the handler's weights to version ``>= least``; tell the learner
    while waiting for it (so a learner that never publishes is told so)."""
    waiting: list[int] = []

    def check() -> None:
        check_alive()
        if not waiting:  # runs only when the version is not there yet
            conn.send(("waiting", least))
            waiting.append(least)

    version = handler.refresh_weights(max(least, 0), check)
    if waiting:
        conn.send(("resumed", version))
    return version


def run_background_sampler(
    build: Callable[..., Any],
    args: tuple,
    conn: Any,
    handover: Handover,
    max_lag: int | None,
    resume: tuple[int, int | None] | None = None,
    torch_threads: int | None = None,
) -> None:
    """The background process: build the sampler, then fill the ring's trees.

    ``torch_threads``: the learner's torch thread count, set here once the
    builder has loaded torch.

    ``resume``: (first batch number, first policy version or None) when it
    replaces a process that died; batch ``n`` needs version ``>= first
    version + n - max_lag`` across restarts.
    """
    # Ctrl-C in a terminal reaches the whole process group: the learner
    # decides when this process stops (it closes the ring).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    check_parent = parent_check()
    sampler = ring = None
    try:
        sampler = build(*args)
        torch = sys.modules.get("torch")  # loaded by the builder, if it uses torch
        if torch is not None and torch_threads is not None:
            torch.set_num_threads(torch_threads)
        original = sampler.sample_tree
        conn.send(
            (
                "layout",
                tree_layout(original),
                sampler_state(sampler),
                _follows_weights(sampler.handler),
            )
        )
        ring = TreeRing(conn.recv(), handover=handover)

        def check_alive() -> None:
            if ring.closed:
                raise TreeRingError("the learner closed the background sampler")
            check_parent()

        while not conn.poll(0.1):  # sampling starts at the first collect_batch
            check_alive()
        start = conn.recv()
        assert start[0] == "start", start
        if start[1] is not None:
            load_sampler_state(sampler, start[1])
        follows = _follows_weights(sampler.handler)
        first_version = (
            sampler.handler.refresh_weights(0, check_alive) if follows else 0
        )
        n, base = resume if resume is not None else (0, None)
        if base is None:
            base = first_version
        conn.send(("started", base))
        while True:
            index = ring.begin_write(check_alive=check_alive)
            assert index is not None  # a blocking call
            version = 0
            if follows:
                least = 0 if max_lag is None else base + n - max_lag
                version = _wait_for_weights(sampler.handler, least, conn, check_alive)
            conn.send(("begin", n))  # the tree is being written from now on
            sampler.use_tree(ring.trees[index])  # (a restart's first: any of them)
            if original is not None:
                original.close()  # the ring's trees replace it for good
                original = None
            _, completed = sampler.collect_batch()
            # sent before the hand-over: the learner reads it after begin_read
            times = sampler.phase_times.take()
            conn.send(("batch", n, completed, sampler_state(sampler), times))
            ring.end_write(stamp=version)
            n += 1
    except (ParentGone, BrokenPipeError, ConnectionResetError):
        pass  # the learner is gone: a normal end
    except BaseException as exc:
        if isinstance(exc, TreeRingError) and ring is not None and ring.closed:
            return  # the learner closed the ring: a normal end (finally runs)
        try:
            conn.send(("error", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        except Exception:
            pass
    finally:
        if sampler is not None:
            for cage in sampler.cages:
                cage.close()
