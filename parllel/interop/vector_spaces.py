"""Between a cage's slots and a gymnasium vector env's batched values.

- :func:`check_vector_env` refuses what a
  :class:`~parllel.interop.VectorEnvCage` cannot take.
- :func:`autoreset_mode` reads (and vets) a vector env's autoreset mode.
- :func:`vector_actions` turns a cage's action slots into the batched form the
  vector env's ``action_space`` expects.
- :class:`ObservationWriter` writes batched observations (all rows, or some)
  into observation slots.

Both space functions are :func:`functools.singledispatch` functions, like
parllel's own (:mod:`parllel.cages.spaces`): a custom space plugs in by
registration. Spaces without a fixed shape and dtype fall back to
gymnasium's generic batching (a tuple with one element per env), read and
written one env at a time through parllel's registered space functions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import iterate

from parllel.cages.spaces import action_reader
from parllel.errors import ConfigError
from parllel.tree import tree_map
from parllel.tree.nodes import tree_get

_HOW_TO_BUILD = (
    "Build the vector env with autoreset mode SAME_STEP (or DISABLED), e.g. "
    "gym.make_vec(env_id, num_envs, vectorization_mode='sync', vector_kwargs="
    "{'autoreset_mode': gym.vector.AutoresetMode.SAME_STEP}) or "
    "gym.vector.SyncVectorEnv(env_fns, autoreset_mode="
    "gym.vector.AutoresetMode.SAME_STEP) (AsyncVectorEnv takes the same argument)"
)


def check_vector_env(vector_env: Any) -> None:
    """Refuse what is no open gymnasium vector env, or is an EnvPool.

    Raises:
        ConfigError: not a ``gymnasium.vector.VectorEnv``, closed, or an
            EnvPool (it has its own cage).
    """
    if not isinstance(vector_env, gym.vector.VectorEnv):
        raise ConfigError(
            f"VectorEnvCage needs a gymnasium.vector.VectorEnv, got "
            f"{type(vector_env).__name__}; for single envs use SerialCage or "
            "ProcessCage with an env factory"
        )
    if getattr(vector_env, "closed", False):
        raise ConfigError(f"the vector env {vector_env} is closed")
    if _is_envpool(vector_env):
        raise ConfigError(
            f"{type(vector_env).__name__} is an EnvPool, whose autoreset "
            "(NEXT_STEP), spaces, action dtype and seeds a VectorEnvCage "
            "cannot take: use parllel.interop.EnvPoolCage(pool), or "
            "make_envpool_cage(task_id, n_envs, options=CageOptions(seed=...))"
        )


def _is_envpool(vector_env: Any) -> bool:
    """True for an EnvPool (told by its classes' module, without importing it)."""
    return any(
        cls.__module__.split(".")[0] == "envpool" for cls in type(vector_env).__mro__
    )


def autoreset_mode(vector_env: gym.vector.VectorEnv) -> AutoresetMode:
    """The autoreset mode of ``vector_env``, if a cage can use it.

    Read from ``vector_env.metadata["autoreset_mode"]`` (an
    :class:`~gymnasium.vector.AutoresetMode` or its value, e.g.
    ``"SameStep"``).

    Raises:
        ConfigError: the mode is ``NEXT_STEP``, missing (gymnasium
            then assumes ``NEXT_STEP``) or unknown. In the step that ends an
            episode a cage must write both the episode's final observation
            and the next episode's first one; a ``NEXT_STEP`` vector env only
            resets the env during the following ``step()``, which steps every
            other env too. The message says how to build a usable vector env.
    """
    mode = getattr(vector_env, "metadata", {}).get("autoreset_mode")
    if mode is None:
        raise ConfigError(
            f"{vector_env} has no metadata['autoreset_mode'], so gymnasium assumes "
            "NEXT_STEP, which a cage cannot use (it needs the final and the reset "
            "observation in the step that ends an episode). If the vector env "
            "resets in the same step (SAME_STEP) or not at all (DISABLED), say so "
            "in its metadata['autoreset_mode']; else: " + _HOW_TO_BUILD
        )
    try:
        mode = mode if isinstance(mode, AutoresetMode) else AutoresetMode(mode)
    except ValueError:
        raise ConfigError(
            f"{vector_env} has metadata['autoreset_mode'] = {mode!r}, which is not "
            f"one of gymnasium's autoreset modes {[m.value for m in AutoresetMode]}"
        ) from None
    if mode is AutoresetMode.NEXT_STEP:
        raise ConfigError(
            f"{vector_env} uses autoreset mode NEXT_STEP: it resets a finished env "
            "only during the following step() (which steps every other env too), "
            "but a cage must write, in the step that ends an episode, both its "
            "final observation and the next episode's first observation. "
            + _HOW_TO_BUILD
        )
    return mode


# -- actions --------------------------------------------------------------------


def _copy_leaf(view: Any) -> np.ndarray:
    # a copy: the sampler overwrites the slot while envs may keep their action
    return np.array(view)


@functools.singledispatch
def vector_actions(space: gym.Space) -> Callable[[Any], Any]:
    """Return ``batch(action_slots) -> actions`` for a vector env's ``step``.

    ``space`` is the single-env action space; ``action_slots`` hold every
    env's action on a leading dimension (a view, or a tree of views keyed like
    :func:`parllel.cages.spaces.space_leaves`). A space with a fixed shape and dtype
    gives a copied ``[n_envs, ...]`` array (what gymnasium's ``batch_space``
    makes of ``Box``, ``Discrete``, ``MultiDiscrete`` and ``MultiBinary``);
    ``Dict`` and ``Tuple`` give a dict / tuple of their children's batches.
    Other spaces give a tuple of single actions (gymnasium's generic
    batching), read with :func:`parllel.cages.spaces.action_reader`. Register a
    function for a custom space that a vector env batches otherwise.
    """
    if space.shape is not None and space.dtype is not None:
        return _copy_leaf
    read = action_reader(space)
    return lambda views: tuple(read(views))


@vector_actions.register
def _(space: gym.spaces.Dict) -> Callable[[Any], Any]:
    batchers = {key: vector_actions(sub) for key, sub in space.spaces.items()}
    return lambda views: {
        key: batch(tree_get(views, key)) for key, batch in batchers.items()
    }


@vector_actions.register
def _(space: gym.spaces.Tuple) -> Callable[[Any], Any]:
    batchers = [vector_actions(sub) for sub in space.spaces]
    return lambda views: tuple(
        batch(tree_get(views, str(j))) for j, batch in enumerate(batchers)
    )


# -- observations ---------------------------------------------------------------


@functools.singledispatch
def stacks(space: gym.Space) -> bool:
    """True if a vector env batches ``space``'s elements as stacked arrays.

    gymnasium stacks ``Box``, ``Discrete``, ``MultiDiscrete`` and
    ``MultiBinary`` elements (``[n_envs, ...]`` arrays), and ``Dict`` /
    ``Tuple`` of those as dicts / tuples of stacked arrays; other spaces
    become a tuple with one element per env. Register ``True`` for a custom
    space whose batches are stacked arrays keyed like its
    :func:`parllel.cages.spaces.space_leaves`.
    """
    return False


@stacks.register(gym.spaces.Box)
@stacks.register(gym.spaces.Discrete)
@stacks.register(gym.spaces.MultiDiscrete)
@stacks.register(gym.spaces.MultiBinary)
def _(space: gym.Space) -> bool:
    return True


@stacks.register
def _(space: gym.spaces.Dict) -> bool:
    return all(stacks(sub) for sub in space.spaces.values())


@stacks.register
def _(space: gym.spaces.Tuple) -> bool:
    return all(stacks(sub) for sub in space.spaces)


class ObservationWriter:
    """Writes a vector env's batched observations into ``[n_envs]`` slots.

    Slots are written the way every cage writes them (an observation view,
    or a tree of views, indexed by env), so dtype and shape checks are the
    same. Stacked batches (:func:`stacks`) are written in one assignment per
    call; others one env at a time.

    Args:
        space: the single-env observation space.
        batched_space: the vector env's ``observation_space``.
    """

    def __init__(self, space: gym.Space, batched_space: gym.Space) -> None:
        self.batched_space = batched_space
        self.stacked = stacks(space)

    def rows(self, batched: Any) -> list[Any]:
        """Every env's observation, in the single-env form."""
        return list(iterate(self.batched_space, batched))

    def row(self, batched: Any, i: int) -> Any:
        """Env ``i``'s observation (views into ``batched`` where it is stacked)."""
        if self.stacked:
            return tree_map(lambda leaf: leaf[i], batched)
        return self.rows(batched)[i]

    def write(self, out: Any, batched: Any) -> None:
        """Write every env's row of ``batched`` into ``out``."""
        if self.stacked:
            out[:] = batched
            return
        for i, row in enumerate(self.rows(batched)):
            out[i] = row

    def write_rows(self, out: Any, batched: Any, index: Sequence[int]) -> None:
        """Write rows ``index`` of ``batched`` into the same rows of ``out``."""
        if self.stacked:
            rows = np.asarray(index, dtype=np.intp)
            out[rows] = tree_map(lambda leaf: leaf[rows], batched)
            return
        every_row = self.rows(batched)
        for i in index:
            out[i] = every_row[i]
