"""What the adapters run on each env, where it lives (a worker process, or here).

A cage writes observations into preallocated slots, so a ``Discrete``
observation comes back as ``np.int64`` where the env returned an ``int``, and
spaces without a fixed shape and dtype (``Graph``, ``Sequence``, ``Text``,
``OneOf``, custom spaces) have no slot at all. :class:`CarryWrapper`, put
around an env by :class:`CarryFactory` only when something is to be carried,
moves such values into the step's or reset's info under
:data:`CARRIED_OBSERVATION`: the final observation (``carry_final``), or every
observation when a space has no fixed shape (the slot holds a placeholder;
actions of such spaces arrive through :func:`give_actions`, in-process cages
only). The functions at the end are what the SB3 adapter hands
``Cage.apply``; nothing here imports SB3 or torch, so workers unpickle them
cheaply. docs/interop.md ("How the adapters work") has the details.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from parllel.cages.env_access import get_env_attr

__all__ = [
    "CARRIED_OBSERVATION",
    "PLACEHOLDER_SPACE",
    "CarryFactory",
    "CarryWrapper",
    "call_method",
    "carried_spaces",
    "give_actions",
    "has_fixed_shape",
    "is_wrapped_with",
    "wrapper_attr",
]

#: the info key of a carried observation (taken out before infos reach the user)
CARRIED_OBSERVATION = "_parllel_carried_observation"
#: the space of the placeholder that fills slots of carried values
PLACEHOLDER_SPACE = gym.spaces.Discrete(1)
_PLACEHOLDER = np.int64(0)
# what CarryWrapper sets on itself (gym.Wrapper's own included); other
# attributes go to the env it wraps
_OWN_ATTRIBUTES = frozenset(
    {
        "env",
        "_action_space",
        "_observation_space",
        "_metadata",
        "_cached_spec",
        "carry_index",
        "carry_all",
        "carry_final",
        "carry_actions",
        "carried_action",
        "carried_observation_space",
        "carried_action_space",
    }
)


def has_fixed_shape(space: gym.Space) -> bool:
    """Whether every leaf of ``space`` has a fixed shape and dtype (it fits slots)."""
    if isinstance(space, gym.spaces.Dict):
        return all(has_fixed_shape(sub) for sub in space.spaces.values())
    if isinstance(space, gym.spaces.Tuple):
        return all(has_fixed_shape(sub) for sub in space.spaces)
    return space.shape is not None and space.dtype is not None


class CarryWrapper(gym.Wrapper):
    """Carries observations (and actions) of ``env`` past the cage's slots.

    Attributes it does not own are set on ``env`` (so a new attribute lands
    where it would without this wrapper).

    Args:
        env: the user's env.
        index: the env's index in the vector env (picks its action in
            :func:`give_actions`).
        carry_final: carry the final observation of each episode.
    """

    def __init__(self, env: gym.Env, index: int, carry_final: bool) -> None:
        super().__init__(env)
        self.carry_index = index
        #: carry every observation (the slot gets a placeholder)
        self.carry_all = not (
            has_fixed_shape(env.observation_space) and has_fixed_shape(env.action_space)
        )
        self.carry_final = carry_final
        #: the env's own spaces (the cage sees placeholders for carried ones)
        self.carried_observation_space = env.observation_space
        self.carried_action_space = env.action_space
        self.carry_actions = not has_fixed_shape(env.action_space)
        self.carried_action: Any = None
        if self.carry_all:
            self.observation_space = PLACEHOLDER_SPACE
        if self.carry_actions:
            self.action_space = PLACEHOLDER_SPACE

    @property  # gym.Wrapper's spec would add this wrapper to it
    def spec(self) -> Any:  # type: ignore[override]
        """The env's own spec (this wrapper is no part of it)."""
        return self.env.spec

    def __setattr__(self, name: str, value: Any) -> None:
        # new attributes land on the user's outermost env, as without this wrapper
        # (SB3's set_attr, gymnasium's set_wrapper_attr of an unknown name)
        if name in _OWN_ATTRIBUTES or hasattr(type(self), name):
            object.__setattr__(self, name, value)
        else:
            setattr(self.env, name, value)

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset the env; carry its observation when ``carry_all``."""
        observation, info = self.env.reset(**kwargs)
        if not self.carry_all:
            return observation, info
        return _PLACEHOLDER, {**info, CARRIED_OBSERVATION: observation}

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """Step the env; carry its observation (always, or at an episode's end)."""
        if self.carry_actions:
            action, self.carried_action = self.carried_action, None
            if action is None:  # the cage's own probe step: a random action
                action = self.carried_action_space.sample()
        observation, reward, terminated, truncated, info = self.env.step(action)
        if self.carry_all:
            info = {**info, CARRIED_OBSERVATION: observation}
            observation = _PLACEHOLDER
        elif self.carry_final and (terminated or truncated):
            info = {**info, CARRIED_OBSERVATION: observation}
        return observation, reward, terminated, truncated, info


def give_actions(env: CarryWrapper, actions: Sequence[Any]) -> None:
    """Hand a carrying env its action for the next step (``cage.apply``'s function)."""
    env.carried_action = actions[env.carry_index]


def carried_spaces(env: Any) -> tuple[bool, gym.Space, gym.Space] | None:
    """``(carry_all, observation space, action space)`` of a carrying env, else None.

    ``cage.apply``'s function: the env's own spaces, which the cage does not
    see when they are replaced by placeholders.
    """
    if not isinstance(env, CarryWrapper):
        return None
    return env.carry_all, env.carried_observation_space, env.carried_action_space


class CarryFactory:
    """Builds env ``index`` with ``factory``; wraps it if something is to be carried.

    An env gets a :class:`CarryWrapper` when ``carry_final`` is set or one of
    its spaces has no fixed shape and dtype; else it is returned as built.
    Picklable (cloudpickle) when ``factory`` is.
    """

    def __init__(
        self, factory: Callable[..., Any], index: int, carry_final: bool
    ) -> None:
        self.factory = factory
        self.index = index
        self.carry_final = carry_final

    def __call__(self, **env_kwargs: Any) -> Any:
        """Build the env (wrapped where needed)."""
        env = self.factory(**env_kwargs)
        fixed = has_fixed_shape(env.observation_space) and has_fixed_shape(
            env.action_space
        )
        if fixed and not self.carry_final:
            return env
        return CarryWrapper(env, self.index, self.carry_final)


# -- what the SB3 adapter applies to each env (Cage.apply) ---------------------


def wrapper_attr(env: Any, name: str) -> Any:
    """``env.get_wrapper_attr(name)``, as it is (a method is not called)."""
    return get_env_attr(env, name)


def call_method(env: Any, name: str, args: tuple, kwargs: dict) -> Any:
    """``env.get_wrapper_attr(name)(*args, **kwargs)``."""
    return get_env_attr(env, name)(*args, **kwargs)


def is_wrapped_with(env: Any, wrapper_class: type) -> bool:
    """True if ``env`` or any env it wraps is an instance of ``wrapper_class``."""
    while True:
        if isinstance(env, wrapper_class):
            return True
        if not isinstance(env, gym.Wrapper):
            return False
        env = env.env
