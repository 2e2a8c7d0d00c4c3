"""Checks a cage makes before it uses its arguments: env factories and slot trees."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NoReturn

import cloudpickle
import numpy as np

from parllel import fields
from parllel.arrays import Array
from parllel.arrays.views import describe_view
from parllel.arrays.writing import closed_error
from parllel.cages.code_sources import collect_sources
from parllel.errors import ArrayClosedError, ConfigError
from parllel.tree import tree_items

# sample-tree fields a cage reads (action) or writes
SLOT_FIELDS = (
    fields.OBSERVATION,
    fields.ACTION,
    fields.REWARD,
    fields.TERMINATED,
    fields.TRUNCATED,
    fields.ENV_INFO,
    fields.FINAL_OBSERVATION,
)


def _is_shared(leaf: Any) -> bool:
    """True if ``leaf`` (an Array or a numpy view) lies in parllel shared memory."""
    if isinstance(leaf, Array):
        return leaf.storage == "shared"
    try:
        describe_view(np.asarray(leaf))
    except ConfigError:
        return False
    return True


def read_only_slot_error(slots: Any) -> ArrayClosedError | None:
    """ArrayClosedError naming the first read-only leaf of ``slots``, or None.

    Views of an Array taken after its ``close()`` are read-only; a cage that
    failed writing into one reports this instead of blaming the env.
    """
    for path, leaf in tree_items(slots):
        view = leaf.to_ndarray() if isinstance(leaf, Array) else leaf
        if isinstance(view, np.ndarray) and not view.flags.writeable:
            return closed_error(f"write into slot {path!r}")
    return None


def raise_closed_slot(slots: Any, exc: BaseException) -> NoReturn:
    """Raise ArrayClosedError if a slot of ``slots`` was closed (from ``exc``),
    else ``exc`` itself: call in the ``except`` block of a failed write."""
    closed = read_only_slot_error(slots)
    if closed is None:
        raise exc
    raise closed from exc


def check_factory(env_factory: Callable[..., Any]) -> None:
    """Raise ConfigError unless ``env_factory`` is callable."""
    if not callable(env_factory):
        raise ConfigError(
            f"env_factory must be a callable that builds one env (e.g. "
            f'lambda: gym.make("CartPole-v1")), got {env_factory!r}'
        )


def check_factory_pickles(env_factory: Callable[..., Any], env_kwargs: dict) -> bytes:
    """Cloudpickle the env factory and kwargs, or raise ConfigError naming them.

    The payload also holds the sources of the main script's code they use
    (:func:`~parllel.cages.code_sources.collect_sources`), for the workers'
    tracebacks.

    Only cages that build envs in other processes need this; a
    :class:`~parllel.cages.SerialCage` takes any callable.
    """
    check_factory(env_factory)
    try:
        return cloudpickle.dumps(
            (env_factory, env_kwargs, collect_sources(env_factory, env_kwargs))
        )
    except Exception as exc:
        name = getattr(env_factory, "__qualname__", repr(env_factory))
        raise ConfigError(
            f"env factory {name!r} (or its env_kwargs) cannot be pickled with "
            f"cloudpickle: {type(exc).__name__}: {exc}. Pass a function or class "
            "that builds the env, not a live env or an object holding locks/sockets"
        ) from exc


def check_slot_tree(
    sample_tree: Mapping[str, Any], needs_shared_memory: bool, cage_name: str
) -> None:
    """Raise unless a cage can use ``sample_tree``'s fields as its slots.

    See :meth:`~parllel.cages.Cage.check_tree`; ``cage_name`` names the cage
    type in the error.
    """
    for key in SLOT_FIELDS:
        value = sample_tree.get(key)
        if value is None:
            continue
        for path, leaf in tree_items(value, key):
            if isinstance(leaf, Array) and leaf.closed:
                raise closed_error(f"hand sample-tree leaf {path!r} to a cage")
            if needs_shared_memory and not _is_shared(leaf):
                raise ConfigError(
                    f"sample-tree leaf {path!r} is not in shared memory, but "
                    f"{cage_name} workers write into it (or read "
                    "actions from it); allocate it with storage='shared'"
                )
