"""A parllel cage behind Stable-Baselines3's ``VecEnv`` interface (``sb3`` extra)."""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import VecEnv

from parllel.cages import Cage
from parllel.errors import ConfigError
from parllel.interop.adapter_cage import (
    CageStepper,
    build_adapter,
    reraise_env_exceptions,
)
from parllel.interop.env_wrapper import call_method, is_wrapped_with, wrapper_attr

__all__ = ["CageSB3VecEnv", "make_sb3_vec_env"]


def make_sb3_vec_env(
    env_fn: Callable[[], Any] | Sequence[Callable[[], Any]],
    n_envs: int,
    *,
    parallel: bool | str = "auto",
    seed: int | None = None,
    **cage_kwargs: Any,
) -> CageSB3VecEnv:
    """An SB3 ``VecEnv`` of ``n_envs`` envs stepped by a parllel cage.

    It behaves like ``DummyVecEnv([env_fn] * n_envs)``: the same
    observations, rewards, dones and infos (``terminal_observation``,
    ``TimeLimit.truncated``) for the same seeds and actions; wrap it in
    ``VecNormalize``, ``VecMonitor``, ``VecFrameStack`` as usual.

    Args:
        env_fn: zero-argument callable returning a gymnasium env (picklable
            with cloudpickle when envs run in worker processes), or a list of
            ``n_envs`` of them, one per env (as ``DummyVecEnv`` takes).
        n_envs: number of envs.
        parallel: ``"auto"`` (worker processes when they pay on this machine,
            measured), ``True`` / ``"process"``, ``False`` / ``"serial"``.
        seed: if given, ``seed(seed)`` is called: the first ``reset()`` seeds
            env ``i`` with ``seed + i``.
        cage_kwargs: passed to the process cage (e.g.
            ``layout=ProcessLayout(n_workers=2)``, ``step_timeout``).

    Example:
        >>> from stable_baselines3 import PPO
        >>> model = PPO("MlpPolicy", make_sb3_vec_env(lambda: gym.make("CartPole-v1"), 8))
    """
    venv = build_adapter(CageSB3VecEnv, env_fn, n_envs, parallel, "auto", **cage_kwargs)
    if seed is not None:
        venv.seed(seed)
    return venv


class CageSB3VecEnv(VecEnv):
    """SB3 ``VecEnv`` over a parllel cage (build it with :func:`make_sb3_vec_env`).

    The cage must auto-reset (``reset_mode="auto"``) and keep infos
    (``keep_infos=True``). It owns the cage: :meth:`close` closes it.
    Infos are fresh dicts per step holding the env's own values (no deep
    copy: the envs create a new info dict every step).
    """

    def __init__(self, cage: Cage) -> None:
        if cage.reset_mode != "auto":
            raise ConfigError(
                f"an SB3 VecEnv needs an auto-reset cage, got reset_mode={cage.reset_mode!r}"
            )
        # SB3 keeps rewards as float32
        self._stepper = CageStepper(cage, reward_dtype=np.float32)
        self.cage = cage
        super().__init__(
            cage.n_envs, self._stepper.observation_space, self._stepper.action_space
        )
        # DummyVecEnv indexes actions by env: a Dict/Tuple space's actions
        # come as one dict/tuple per env
        self._per_env_actions = isinstance(
            self.action_space, (gym.spaces.Dict, gym.spaces.Tuple)
        )
        self.metadata = cage.get_attr("metadata", [0])[0]
        self.actions: Any = None

    # -- stepping --------------------------------------------------------------
    def reset(self) -> Any:
        """Reset every env (with the seeds and options set for this reset)."""
        stepper = self._stepper
        stepper.check_open("reset")
        for options, indices in _options_groups(self._options):
            seeds = [self._seeds[i] for i in indices]
            kept = stepper.reset(indices, seeds, options or None)
            for i in indices:
                self.reset_infos[i] = kept.reset.get(i, {})
        self._reset_seeds()
        self._reset_options()
        return self._observations()

    def step_async(self, actions: np.ndarray) -> None:
        """Start stepping every env with its action (``actions[i]`` is env ``i``'s).

        As in ``DummyVecEnv``: an array (or list) over envs; for Dict and
        Tuple action spaces a list of one dict / tuple per env.
        """
        self.actions = actions
        self._stepper.step_async(actions, per_env=self._per_env_actions)

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Finish the step: observations, rewards, dones and infos as DummyVecEnv."""
        stepper = self._stepper
        rewards, terminated, truncated = stepper.step_wait()
        kept = self.cage.last_infos
        infos: list[dict[str, Any]] = []
        time_limit = (truncated & ~terminated).tolist()
        for i, done in enumerate(stepper.done.tolist()):
            info = dict(kept.step.get(i, ()))
            info["TimeLimit.truncated"] = time_limit[i]
            if done:
                info["terminal_observation"] = stepper.final_observation(i)
                self.reset_infos[i] = kept.reset.get(i, {})
            infos.append(info)
        return self._observations(), rewards, stepper.done.copy(), infos

    def _observations(self) -> Any:
        """The batched observations, copied; a Dict space's as an
        ``OrderedDict`` in the space's key order, as DummyVecEnv returns them."""
        observations = self._stepper.observations(copy=True)
        if isinstance(self.observation_space, gym.spaces.Dict):
            keys = self.observation_space.spaces
            return OrderedDict((key, observations[key]) for key in keys)
        return observations

    # -- env access ------------------------------------------------------------
    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        """Each env's attribute (searched through its wrappers), as it is."""
        self._stepper.check_open("get_attr")
        with reraise_env_exceptions():
            return self.cage.apply(
                wrapper_attr, attr_name, env_indices=self._indices(indices)
            )

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        """Set an attribute on each (outermost) env, like DummyVecEnv."""
        self._stepper.check_open("set_attr")
        with reraise_env_exceptions():
            self.cage.apply(
                setattr, attr_name, value, env_indices=self._indices(indices)
            )

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: Any = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        """Call a method of each env (searched through its wrappers)."""
        self._stepper.check_open("env_method")
        with reraise_env_exceptions():
            return self.cage.apply(
                call_method,
                method_name,
                method_args,
                method_kwargs,
                env_indices=self._indices(indices),
            )

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper], indices: Any = None
    ) -> list[bool]:
        """Whether each env is wrapped with ``wrapper_class``."""
        self._stepper.check_open("env_is_wrapped")
        return self.cage.apply(
            is_wrapped_with, wrapper_class, env_indices=self._indices(indices)
        )

    def get_images(self) -> Sequence[np.ndarray | None]:
        """Each env's ``render()`` (needs ``render_mode="rgb_array"``)."""
        self._stepper.check_open("get_images")
        if self.render_mode != "rgb_array":
            warnings.warn(
                f"The render mode is {self.render_mode}, but get_images() needs "
                "render_mode='rgb_array' to obtain images.",
                stacklevel=2,
            )
            return [None] * self.num_envs
        return self.cage.render()

    def _indices(self, indices: Any) -> list[int]:
        """SB3's ``indices`` (None, an int or a list) as a list; the cage
        counts negative ones from the end, as DummyVecEnv does."""
        return list(self._get_indices(indices))

    # -- lifetime --------------------------------------------------------------
    def close(self) -> None:
        """Close the cage (its envs and worker processes) and the slots."""
        self._stepper.close()

    def __repr__(self) -> str:
        return f"CageSB3VecEnv({type(self.cage).__name__}, num_envs={self.num_envs})"


def _options_groups(
    options: Sequence[dict[str, Any]],
) -> Iterable[tuple[dict[str, Any], list[int]]]:
    """Env indices grouped by equal reset options (one reset call per group)."""
    groups: list[tuple[dict[str, Any], list[int]]] = []
    for i, option in enumerate(options):
        for known, indices in groups:
            if known == option:
                indices.append(i)
                break
        else:
            groups.append((option, [i]))
    return groups
