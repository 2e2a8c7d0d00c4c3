"""Spaces of caged envs, example values for allocation, and action checks."""

from __future__ import annotations

from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

from parllel.errors import InvalidActionError, SpaceMismatchError


class EnvSpaces(NamedTuple):
    """The observation and action space shared by every env of a cage."""

    observation: gym.Space
    action: gym.Space


def check_spaces_agree(first: EnvSpaces, other: EnvSpaces, env_index: int) -> None:
    """Raise :class:`SpaceMismatchError` if ``other`` differs from ``first``."""
    for name in ("observation", "action"):
        a, b = getattr(first, name), getattr(other, name)
        if a != b:
            raise SpaceMismatchError(
                f"env {env_index} has {name} space {b}, but env 0 has {a}: all envs "
                "of a cage must have the same spaces"
            )


def zero_example(space: gym.Space) -> Any:
    """A zero-valued example of a space's elements, with the right dtypes."""
    if isinstance(space, gym.spaces.Dict):
        return {k: zero_example(s) for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(zero_example(s) for s in space.spaces)
    if isinstance(space, gym.spaces.Discrete):
        return np.zeros((), dtype=space.dtype)[()]
    if space.shape is None or space.dtype is None:
        raise SpaceMismatchError(f"cannot preallocate elements of space {space}")
    value = np.zeros(space.shape, dtype=space.dtype)
    return value[()] if value.ndim == 0 else value


class ActionChecker:
    """Checks the per-step action array of a cage against the action space.

    Only shapes and dtype kinds are checked (cheap enough for every step);
    bounds are the env's business.
    """

    def __init__(self, space: gym.Space, n_envs: int) -> None:
        self.space = space
        self.n_envs = n_envs
        self._leaves = _space_leaves(space)

    def check(self, action: Any) -> None:
        """Raise :class:`InvalidActionError` if ``action`` cannot be the cage's actions."""
        if len(self._leaves) == 1 and self._leaves[0][0] == "":
            self._check_leaf("", self._leaves[0][1], action)
            return
        for path, leaf_space in self._leaves:
            value = action
            for key in path.split("."):
                try:
                    value = value[key]
                except (KeyError, TypeError, IndexError):
                    raise InvalidActionError(f"action has no leaf {path!r}") from None
            self._check_leaf(path, leaf_space, value)

    def _check_leaf(self, path: str, space: gym.Space, value: Any) -> None:
        expected = (self.n_envs,) + tuple(space.shape or ())
        where = f" at {path!r}" if path else ""
        shape = getattr(value, "shape", None)
        if shape != expected:
            raise InvalidActionError(
                f"actions{where} must have shape {expected} (n_envs, *action_shape), "
                f"got {shape if shape is not None else type(value).__name__}"
            )
        kind, expected_kind = value.dtype.kind, np.dtype(space.dtype).kind
        integral = "iub"
        if (expected_kind in integral) != (kind in integral):
            raise InvalidActionError(
                f"actions{where} have dtype {value.dtype}, but the action space "
                f"{space} needs dtype {space.dtype}"
            )


def _space_leaves(space: gym.Space, prefix: str = "") -> list[tuple[str, gym.Space]]:
    if isinstance(space, gym.spaces.Dict):
        out = []
        for key, sub in space.spaces.items():
            out += _space_leaves(sub, f"{prefix}.{key}" if prefix else key)
        return out
    if isinstance(space, gym.spaces.Tuple):
        out = []
        for i, sub in enumerate(space.spaces):
            out += _space_leaves(sub, f"{prefix}.{i}" if prefix else str(i))
        return out
    return [(prefix, space)]


def action_reader(space: gym.Space) -> Any:
    """Return ``read(actions) -> list`` giving each env's action in the space's form.

    Discrete actions become numpy integer scalars (what gymnasium's own
    vector envs pass; ``Discrete.contains`` checks them faster than Python
    ints), arrays are copied (the env may keep them; the buffer will be
    overwritten), Dict/Tuple actions are rebuilt.
    One call per step converts all envs' actions at once.
    """
    if isinstance(space, gym.spaces.Dict):
        readers = {k: action_reader(s) for k, s in space.spaces.items()}

        def read_dict(views: Any) -> list:
            columns = {k: r(views[k]) for k, r in readers.items()}
            n = len(next(iter(columns.values())))
            return [{k: column[i] for k, column in columns.items()} for i in range(n)]

        return read_dict
    if isinstance(space, gym.spaces.Tuple):
        readers = [action_reader(s) for s in space.spaces]

        def read_tuple(views: Any) -> list:
            columns = [r(views[str(j)]) for j, r in enumerate(readers)]
            return list(zip(*columns))

        return read_tuple
    if isinstance(space, gym.spaces.Discrete):
        return lambda view: list(view)
    return lambda view: list(np.array(view))


def numeric_info_example(info: dict[str, Any]) -> dict[str, Any]:
    """The entries of an env-info dict that can be preallocated (numbers, arrays).

    Other entries (strings, nested objects, ``final_info``...) are left to
    TrajInfo. Keys keep their names, dots included (``"ale.lives"``).
    """
    example = {}
    for key, value in info.items():
        if isinstance(value, (bool, int, float, np.number, np.bool_)):
            example[str(key)] = np.asarray(value)[()]
        elif isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
            example[str(key)] = value
    return example
