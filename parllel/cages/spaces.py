"""Spaces of caged envs: example values, leaves, action reading and checks.

Every operation on a space is a :func:`functools.singledispatch` function
(as gymnasium's shared-memory helpers are), so a custom space plugs in by
registration, without editing parllel::

    @zero_example.register
    def _(space: MySpace):
        return ...

``Dict``, ``Tuple``, ``Discrete`` and every space with a fixed ``shape`` and
``dtype`` (``Box``, ``MultiDiscrete``, ``MultiBinary``) are built in; the
registration points are listed in docs/cages.md.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

from parllel.errors import (
    ConfigError,
    InvalidActionError,
    SpaceMismatchError,
)
from parllel.tree.nodes import tree_get


class EnvSpaces(NamedTuple):
    """The observation and action space shared by every env of a cage.

    ``env_name`` (the env's registered id, or its class name) is used in
    error messages.
    """

    observation: gym.Space
    action: gym.Space
    env_name: str = "env"


def env_name(env: Any) -> str:
    """A readable name of an env: its registered id, else its class name."""
    spec = getattr(env, "spec", None)
    if spec is not None and getattr(spec, "id", None):
        return str(spec.id)
    return type(getattr(env, "unwrapped", env)).__name__


def env_spaces(env: Any) -> EnvSpaces:
    """The spaces of a gymnasium env, refusing what is not one.

    Raises:
        ConfigError: ``observation_space`` or ``action_space`` is not a
            gymnasium space; a PettingZoo env (whose spaces are methods per
            agent) is named, with the adapter that steps it.
    """
    observation, action = (
        getattr(env, "observation_space", None),
        getattr(env, "action_space", None),
    )
    if not isinstance(observation, gym.Space) or not isinstance(action, gym.Space):
        bad = observation if not isinstance(observation, gym.Space) else action
        multiagent = callable(bad) and hasattr(env, "possible_agents")
        if multiagent:
            reason = (
                "a PettingZoo env (its spaces are per-agent methods): give the cage "
                "parllel.multiagent.make_parallel_env_factory(env_fn) (each env in a "
                "ParallelEnvAdapter) for a ParallelEnv, or make_aec_env_factory "
                "(AECEnvAdapter) for an AECEnv (docs/multiagent.md)"
            )
        else:
            described = "a method" if callable(bad) else f"{type(bad).__name__}"
            reason = (
                f"its {'observation' if bad is observation else 'action'}_space is "
                f"{described}, not a gymnasium space; the env factory must return "
                "a gymnasium.Env"
            )
        raise ConfigError(f"{type(env).__name__} is not a gymnasium env: {reason}")
    return EnvSpaces(observation, action, env_name(env))


def check_spaces_agree(first: EnvSpaces, other: EnvSpaces, env_index: int) -> None:
    """Raise :class:`SpaceMismatchError` if ``other`` differs from ``first``."""
    for name in ("observation", "action"):
        a, b = getattr(first, name), getattr(other, name)
        if a != b:
            raise SpaceMismatchError(
                f"env {env_index} has {name} space {b}, but env 0 has {a}: all envs "
                "of a cage must have the same spaces"
            )


def _join(prefix: str, key: Any) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


# -- example values ---------------------------------------------------------------


@functools.singledispatch
def zero_example(space: gym.Space) -> Any:
    """A zero-valued example of a space's elements, with the right dtypes.

    The default handles any space with a fixed ``shape`` and ``dtype``;
    register a function for other spaces.
    """
    if space.shape is None or space.dtype is None:
        raise SpaceMismatchError(
            f"cannot preallocate elements of space {space}: it has no fixed shape "
            "and dtype; register zero_example (and the other space functions) for "
            f"{type(space).__name__} (docs/cages.md)"
        )
    value = np.zeros(space.shape, dtype=space.dtype)
    return value[()] if value.ndim == 0 else value


@zero_example.register
def _(space: gym.spaces.Dict) -> dict:
    return {k: zero_example(s) for k, s in space.spaces.items()}


@zero_example.register
def _(space: gym.spaces.Tuple) -> tuple:
    return tuple(zero_example(s) for s in space.spaces)


@zero_example.register
def _(space: gym.spaces.Discrete) -> Any:
    return np.zeros((), dtype=space.dtype)[()]


# -- leaves -----------------------------------------------------------------------


@functools.singledispatch
def space_leaves(space: gym.Space, prefix: str = "") -> list[tuple[str, gym.Space]]:
    """``(path, leaf space)`` of every leaf, keyed as in sample trees.

    Dict keys and Tuple positions (``"0"``, ``"1"``, ...) are joined with
    dots; a space that is not a container is one leaf at ``prefix``.
    """
    return [(prefix, space)]


@space_leaves.register
def _(space: gym.spaces.Dict, prefix: str = "") -> list[tuple[str, gym.Space]]:
    out = []
    for key, sub in space.spaces.items():
        out += space_leaves(sub, _join(prefix, key))
    return out


@space_leaves.register
def _(space: gym.spaces.Tuple, prefix: str = "") -> list[tuple[str, gym.Space]]:
    out = []
    for i, sub in enumerate(space.spaces):
        out += space_leaves(sub, _join(prefix, i))
    return out


def value_at(value: Any, path: str) -> Any:
    """The leaf of ``value`` at a dotted ``path`` (mappings, tuples, ArrayDicts).

    Raises:
        KeyError: the value has no such leaf.
    """
    if path == "":
        return value
    for key in path.split("."):
        value = tree_get(value, key)
    return value


# -- checks -----------------------------------------------------------------------


@functools.singledispatch
def leaf_mismatch(space: gym.Space, value: Any) -> tuple[str, str] | None:
    """``(actual, declared)`` descriptions if ``value`` does not fit leaf ``space``.

    The default compares the value's numpy dtype and shape with the space's
    (exactly: a float64 value does not fit a float32 space); spaces without
    a fixed dtype are not checked. Register a function for a custom leaf
    space whose elements are checked differently.
    """
    if space.dtype is None or space.shape is None:
        return None
    array = np.asarray(value)
    if array.dtype == space.dtype and array.shape == tuple(space.shape):
        return None
    return (
        f"dtype {array.dtype} and shape {array.shape}",
        f"dtype {np.dtype(space.dtype)} and shape {tuple(space.shape)}",
    )


def check_observation(spaces: EnvSpaces, observation: Any, env_index: int) -> None:
    """Raise :class:`SpaceMismatchError` if a probe observation breaks its space.

    Buffers are allocated from the probe observation and models from the
    space, so a mismatch would otherwise surface much later (e.g. as a
    dtype error inside the model).
    """
    where = f"env {env_index} ({spaces.env_name})"
    for path, leaf in space_leaves(spaces.observation):
        try:
            value = value_at(observation, path)
        except (KeyError, IndexError, TypeError):
            raise SpaceMismatchError(
                f"{where}: its observation has no leaf {path!r} (missing), but its "
                f"observation space {spaces.observation} declares one"
            ) from None
        mismatch = leaf_mismatch(leaf, value)
        if mismatch is not None:
            actual, declared = mismatch
            # a space that is not a container is one leaf at the empty path
            what = f"observation leaf {path!r}" if path else "observation"
            raise SpaceMismatchError(
                f"{where}: {what} has {actual}, but its "
                f"observation space declares {declared}. Make them agree: cast the "
                "observation in a wrapper (e.g. gymnasium.wrappers.TransformObservation"
                " with .astype(...)/.reshape(...)) or declare the space it returns"
            )


class ActionChecker:
    """Checks the per-step action array of a cage against the action space.

    Only shapes and dtype kinds are checked (cheap enough for every step);
    bounds are the env's business.
    """

    def __init__(self, space: gym.Space, n_envs: int) -> None:
        self.space = space
        self.n_envs = n_envs
        self._leaves = space_leaves(space)

    def check(self, action: Any) -> None:
        """Raise :class:`InvalidActionError` if ``action`` cannot be the cage's actions."""
        for path, leaf_space in self._leaves:
            value = action
            for key in path.split(".") if path else ():
                if not isinstance(value, Mapping):
                    raise InvalidActionError(
                        f"actions must be a tree of [n_envs] views keyed like the "
                        f"action space (an ArrayDict, or a dict keyed '0', '1', ... "
                        f"for a Tuple), got a {type(value).__name__} above leaf {path!r}"
                    )
                if key not in value:
                    raise InvalidActionError(f"action has no leaf {path!r}")
                value = value[key]
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
        if space.dtype is None:
            return
        kind, expected_kind = value.dtype.kind, np.dtype(space.dtype).kind
        integral = "iub"
        if (expected_kind in integral) != (kind in integral):
            raise InvalidActionError(
                f"actions{where} have dtype {value.dtype}, but the action space "
                f"{space} needs dtype {space.dtype}"
            )


# -- reading actions ----------------------------------------------------------------


@functools.singledispatch
def action_reader(space: gym.Space) -> Callable[[Any], list]:
    """Return ``read(actions) -> list`` giving each env's action in the space's form.

    ``actions`` holds every env's action on a leading dimension (a view, or
    a tree of views keyed like :func:`space_leaves`). Discrete actions
    become numpy integer scalars (what gymnasium's own vector envs pass;
    ``Discrete.contains`` checks them faster than Python ints), arrays are
    copied (the env may keep them; the buffer will be overwritten),
    Dict/Tuple actions are rebuilt. One call per step converts all envs'
    actions at once. Register a function for a custom action space.
    """
    if tuple(space.shape or ()) == ():  # 0-d arrays, as the space samples them
        return lambda view: [row[...] for row in np.array(view)]
    return lambda view: list(np.array(view))


@action_reader.register
def _(space: gym.spaces.Dict) -> Callable[[Any], list]:
    readers = {k: action_reader(s) for k, s in space.spaces.items()}

    def read_dict(views: Any) -> list:
        columns = {k: r(tree_get(views, k)) for k, r in readers.items()}
        n = len(next(iter(columns.values())))
        return [{k: column[i] for k, column in columns.items()} for i in range(n)]

    return read_dict


@action_reader.register
def _(space: gym.spaces.Tuple) -> Callable[[Any], list]:
    readers = [action_reader(s) for s in space.spaces]

    def read_tuple(views: Any) -> list:
        columns = [r(tree_get(views, str(j))) for j, r in enumerate(readers)]
        return list(zip(*columns))

    return read_tuple


@action_reader.register
def _(space: gym.spaces.Discrete) -> Callable[[Any], list]:
    return lambda view: list(view)


def env_action_reader(space: gym.Space, clip_actions: bool) -> Callable[[Any], list]:
    """:func:`action_reader`'s reader, clipping ``Box`` actions to the space's
    bounds first if ``clip_actions`` (what SB3 does with a Gaussian policy's
    actions).

    The clipped actions are a copy: the sample tree keeps the policy's own
    (unclipped) action, whose log-probability the loss evaluates. Other
    spaces, and ``Box`` spaces inside a ``Dict`` or ``Tuple``, are read as
    they are.
    """
    read = action_reader(space)
    if not clip_actions or not isinstance(space, gym.spaces.Box):
        return read
    low, high = space.low, space.high
    return lambda view: read(np.clip(view, low, high))


ACTION_MASK_KEY = "action_mask"
"""The observation key of a legal-action mask (PettingZoo's convention)."""


def legal_sample(space: gym.Space, observation: Any) -> Any:
    """A random action of ``space``, legal under the observation's ``action_mask``.

    Envs whose dict observation carries an ``action_mask`` (nonzero = legal;
    PettingZoo's classic games, the multi-agent adapters' stacked ``[A, n]``
    masks) end the game on an illegal move, so the probes that step an env
    with random actions (the cage's example step, layout timing) sample
    legal ones: a ``Discrete`` action from the mask, a ``MultiDiscrete`` one
    per row (a row with no legal action, an agent that may not act, samples
    freely). Other spaces and observations: ``space.sample()``.
    """
    mask = (
        observation.get(ACTION_MASK_KEY) if isinstance(observation, Mapping) else None
    )
    if mask is None:
        return space.sample()
    mask = np.asarray(mask).astype(np.int8) != 0
    if isinstance(space, gym.spaces.Discrete) and mask.shape == (int(space.n),):
        return space.sample(mask=mask.astype(np.int8)) if mask.any() else space.sample()
    nvec = getattr(space, "nvec", None)
    if (
        isinstance(space, gym.spaces.MultiDiscrete)
        and nvec is not None
        and nvec.ndim == 1
        and mask.shape == (len(nvec), int(nvec.max()))
    ):
        rows = tuple(
            (row[:n] if row[:n].any() else np.ones(n, bool)).astype(np.int8)
            for row, n in zip(mask, nvec)
        )
        return space.sample(mask=rows)
    return space.sample()
