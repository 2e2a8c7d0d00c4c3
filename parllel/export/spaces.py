"""Gymnasium spaces as plain data (dicts, lists, numbers, strings) and back.

A policy file stores its spaces this way (``torch.load(weights_only=True)``
reads a torch export, a JAX export's header is JSON) and its spec is
readable JSON. ``Box``,
``Discrete``, ``MultiDiscrete``, ``MultiBinary``, ``Dict`` and ``Tuple`` are
built in; register a custom space with :func:`space_to_data` (a
``functools.singledispatch`` function) and :func:`register_space_reader`.

Example:
    >>> data = space_to_data(gym.spaces.Box(-1.0, 1.0, (3,)))
    >>> data["type"], data["low"], data["shape"]
    ('Box', -1.0, [3])
    >>> space_from_data(data) == gym.spaces.Box(-1.0, 1.0, (3,))
    True
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from parllel.errors import ConfigError, PolicyFileError

__all__ = ["register_space_reader", "space_from_data", "space_to_data"]

_READERS: dict[str, Callable[[Mapping[str, Any]], gym.Space]] = {}


def _bound(values: np.ndarray) -> Any:
    """One number if every entry is equal (the usual case), else nested lists."""
    flat = values.reshape(-1)
    if flat.size and np.all(flat == flat[0]):
        return flat[0].item()
    return values.tolist()


@functools.singledispatch
def space_to_data(space: Any) -> dict[str, Any]:
    """A space as a dict of plain values with its type name under ``"type"``.

    Raises:
        ConfigError: for a space type with no registered conversion.
    """
    raise ConfigError(
        f"cannot store space {space!r} in a policy file: register its conversion "
        "with parllel.export.spaces.space_to_data.register and "
        "register_space_reader"
    )


@space_to_data.register
def _(space: gym.spaces.Box) -> dict[str, Any]:
    return {
        "type": "Box",
        "low": _bound(space.low),
        "high": _bound(space.high),
        "shape": list(space.shape),
        "dtype": np.dtype(space.dtype).name,
    }


@space_to_data.register
def _(space: gym.spaces.Discrete) -> dict[str, Any]:
    return {
        "type": "Discrete",
        "n": int(space.n),
        "start": int(space.start),
        "dtype": np.dtype(space.dtype).name,
    }


@space_to_data.register
def _(space: gym.spaces.MultiDiscrete) -> dict[str, Any]:
    return {
        "type": "MultiDiscrete",
        "nvec": space.nvec.tolist(),
        "start": space.start.tolist(),
        "dtype": np.dtype(space.dtype).name,
    }


@space_to_data.register
def _(space: gym.spaces.MultiBinary) -> dict[str, Any]:
    return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}


@space_to_data.register
def _(space: gym.spaces.Dict) -> dict[str, Any]:
    return {
        "type": "Dict",
        "spaces": {str(k): space_to_data(s) for k, s in space.spaces.items()},
    }


@space_to_data.register
def _(space: gym.spaces.Tuple) -> dict[str, Any]:
    return {"type": "Tuple", "spaces": [space_to_data(s) for s in space.spaces]}


def register_space_reader(
    type_name: str, reader: Callable[[Mapping[str, Any]], gym.Space]
) -> None:
    """Rebuild spaces stored with ``"type": type_name`` by ``reader(data)``."""
    _READERS[type_name] = reader


def space_from_data(data: Mapping[str, Any]) -> gym.Space:
    """The space :func:`space_to_data` described.

    Raises:
        PolicyFileError: for data that describes no known space.
    """
    if not isinstance(data, Mapping) or "type" not in data:
        raise PolicyFileError(f"not a stored space: {data!r}")
    reader = _READERS.get(str(data["type"]))
    if reader is None:
        raise PolicyFileError(
            f"unknown space type {data['type']!r} (known: {sorted(_READERS)}); "
            "register a reader with register_space_reader"
        )
    try:
        return reader(data)
    except (KeyError, TypeError, ValueError) as error:
        raise PolicyFileError(f"bad stored {data['type']} space: {error}") from error


def _read_box(data: Mapping[str, Any]) -> gym.Space:
    dtype = np.dtype(data["dtype"])
    shape = tuple(data["shape"])
    low = np.broadcast_to(np.asarray(data["low"], dtype=dtype), shape)
    high = np.broadcast_to(np.asarray(data["high"], dtype=dtype), shape)
    return gym.spaces.Box(low, high, shape, dtype)


register_space_reader("Box", _read_box)


def _read_discrete(data: Mapping[str, Any]) -> gym.Space:
    dtype = np.dtype(data.get("dtype", "int64"))
    extra = {} if dtype == np.int64 else {"dtype": dtype}  # gymnasium >= 1.0
    return gym.spaces.Discrete(int(data["n"]), start=int(data["start"]), **extra)


register_space_reader("Discrete", _read_discrete)
register_space_reader(
    "MultiDiscrete",
    lambda d: gym.spaces.MultiDiscrete(
        np.asarray(d["nvec"]), dtype=np.dtype(d["dtype"]), start=np.asarray(d["start"])
    ),
)
register_space_reader("MultiBinary", lambda d: gym.spaces.MultiBinary(d["n"]))
register_space_reader(
    "Dict",
    lambda d: gym.spaces.Dict({k: space_from_data(s) for k, s in d["spaces"].items()}),
)
register_space_reader(
    "Tuple", lambda d: gym.spaces.Tuple([space_from_data(s) for s in d["spaces"]])
)
