"""A parllel cage behind gymnasium's ``VectorEnv`` interface."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from parllel.cages import Cage, CageOptions, PerEnvFactories, build_cage
from parllel.errors import CageStateError, ConfigError, DynamicSpaceError
from parllel.interop.carry import CarryFactory
from parllel.interop.errors import reraise_env_exceptions
from parllel.interop.stepper import CageStepper

__all__ = [
    "CageVectorEnv",
    "build_adapter",
    "env_factory_of",
    "make_vec",
    "parallel_choice",
]

Adapter = TypeVar("Adapter")

# the cage reset mode that gives each gymnasium autoreset mode
CAGE_RESET_MODES = {
    AutoresetMode.NEXT_STEP: "next_step",
    AutoresetMode.SAME_STEP: "auto",
    AutoresetMode.DISABLED: "wait",
}


def parallel_choice(parallel: bool | str) -> str:
    """``build_cage``'s ``parallel`` for ``True`` / ``False`` / its own strings."""
    if parallel is True:
        return "process"
    if parallel is False:
        return "serial"
    return parallel


def env_factory_of(
    env_fn: Callable[[], Any] | Sequence[Callable[[], Any]],
    n_envs: int,
    carry_final: bool,
) -> PerEnvFactories:
    """The cage's env factory for an adapter's ``env_fn``: one callable, or one per env.

    Each env's factory is a :class:`~parllel.interop.carry.CarryFactory`
    (``carry_final``: carry the final observations, as the envs return them).

    Raises:
        ConfigError: ``env_fn`` is neither (e.g. an env id string or a live env).
    """
    if isinstance(env_fn, (list, tuple)):
        if len(env_fn) != n_envs:
            raise ConfigError(
                f"got {len(env_fn)} env functions for n_envs={n_envs}: give one "
                "callable for all envs, or one per env"
            )
        env_fns = list(env_fn)
    elif callable(env_fn):
        env_fns = [env_fn] * n_envs
    else:
        raise ConfigError(
            "env_fn must be a callable that builds one env (e.g. lambda: "
            'gym.make("CartPole-v1")), or a list of n_envs such callables; got '
            f"{type(env_fn).__name__} {env_fn!r}"[:300]
        )
    PerEnvFactories(env_fns)  # checks that every one is callable
    return PerEnvFactories(
        [CarryFactory(fn, i, carry_final) for i, fn in enumerate(env_fns)]
    )


def build_adapter(
    adapter: Callable[[Cage], Adapter],
    env_fn: Callable[[], Any] | Sequence[Callable[[], Any]],
    n_envs: int,
    parallel: bool | str,
    reset_mode: str,
    /,
    **cage_kwargs: Any,
) -> Adapter:
    """Build the cage for an adapter and ``adapter(cage)``; close the cage if that raises.

    ``cage_kwargs``: :func:`~parllel.cages.build_cage`' process-cage ones
    (``layout=``, ``step_timeout=``, ...). With ``parallel="auto"``, envs
    whose action space has no fixed shape
    (refused by process cages: :class:`~parllel.errors.DynamicSpaceError`)
    are stepped in this process.
    """
    taken = {"options", *(field.name for field in fields(CageOptions))}
    if taken & set(cage_kwargs):
        raise ConfigError(
            f"got {sorted(taken & set(cage_kwargs))}, but the vector-env adapters "
            "choose the cage's options themselves (the reset mode from "
            "autoreset_mode, kept infos, no action clipping, no probe env); seed= "
            "seeds the envs"
        )
    choice = parallel_choice(parallel)
    factory = env_factory_of(env_fn, n_envs, carry_final=reset_mode == "auto")
    options = CageOptions(
        reset_mode=reset_mode,
        keep_infos=True,
        clip_actions=False,  # gymnasium's and SB3's vector envs pass actions as given
        probe=False,  # the slots come from the spaces: no env code before reset
    )
    with reraise_env_exceptions():
        cage = build_cage(
            factory, n_envs, parallel=choice, options=options, **cage_kwargs
        )
    try:
        return adapter(cage)
    except DynamicSpaceError:
        cage.close()
        if choice != "auto":
            raise
    except BaseException:
        cage.close()
        raise
    with reraise_env_exceptions():
        cage = build_cage(factory, n_envs, parallel="serial", options=options)
    try:
        return adapter(cage)
    except BaseException:
        cage.close()
        raise


def make_vec(
    env_fn: Callable[[], Any] | Sequence[Callable[[], Any]],
    n_envs: int,
    *,
    parallel: bool | str = "auto",
    seed: int | None = None,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    copy: bool = True,
    **cage_kwargs: Any,
) -> CageVectorEnv:
    """A gymnasium ``VectorEnv`` of ``n_envs`` envs stepped by a parllel cage.

    It behaves like ``gymnasium.vector.SyncVectorEnv([env_fn] * n_envs, ...)``:
    same observations, rewards, flags and infos for the same seeds and
    actions, in every autoreset mode.

    Args:
        env_fn: zero-argument callable returning a gymnasium env (picklable
            with cloudpickle when envs run in worker processes), or a list of
            ``n_envs`` of them, one per env (as ``SyncVectorEnv`` takes).
        n_envs: number of envs.
        parallel: ``"auto"`` (worker processes when they pay on this machine,
            measured; serial when called from unguarded top-level code of the
            main script), ``True`` / ``"process"`` (a
            :class:`~parllel.cages.ProcessCage`), ``False`` / ``"serial"``.
        seed: if given, the first :meth:`~CageVectorEnv.reset` without a seed
            seeds env ``i`` with ``seed + i`` (like ``reset(seed=seed)``), and
            the batched action space is seeded with it.
        autoreset_mode: gymnasium's ``AutoresetMode``, or its value or name as
            a string (``"NextStep"``, ``"same_step"``, ...).
        copy: return copies of the observations (True), or views of the
            shared buffers that the next ``step``/``reset`` overwrites.
        cage_kwargs: passed to the process cage (e.g.
            ``layout=ProcessLayout(n_workers=2)``, ``step_timeout``,
            ``on_worker_death``). With ``parallel="process"`` and no
            ``layout``, one env is built and timed to choose the layout; an
            env that cannot step before it is configured (``set_attr``) gets
            a default layout with a warning.

    Example:
        >>> envs = make_vec(lambda: gym.make("CartPole-v1"), 8, seed=0)
        >>> observations, infos = envs.reset()
        >>> observations.shape
        (8, 4)
    """
    mode = _autoreset_mode(autoreset_mode)
    return build_adapter(
        lambda cage: CageVectorEnv(cage, autoreset_mode=mode, copy=copy, seed=seed),
        env_fn,
        n_envs,
        parallel,
        CAGE_RESET_MODES[mode],
        **cage_kwargs,
    )


def _autoreset_mode(mode: AutoresetMode | str) -> AutoresetMode:
    """gymnasium's AutoresetMode from itself, its value or its name (any case)."""
    if isinstance(mode, AutoresetMode):
        return mode
    wanted = str(mode).replace("_", "").lower()
    for member in AutoresetMode:
        if wanted in (member.value.lower(), member.name.replace("_", "").lower()):
            return member
    choices = [m.value for m in AutoresetMode]
    raise ConfigError(f"autoreset_mode must be one of {choices}, got {mode!r}")


class CageVectorEnv(gym.vector.VectorEnv):
    """gymnasium ``VectorEnv`` over a parllel cage (build it with :func:`make_vec`).

    The cage (its reset mode matching ``autoreset_mode``, built with
    ``keep_infos=True``) steps the envs into preallocated slots (shared
    memory for process cages); this class turns them into gymnasium's
    batched values and info dicts. It owns the cage: :meth:`close` closes it.

    Besides ``step``, ``step_async`` / ``step_wait`` let the envs step while
    the caller works (as gymnasium's ``AsyncVectorEnv``).
    """

    def __init__(
        self,
        cage: Cage,
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        copy: bool = True,
        seed: int | None = None,
    ) -> None:
        mode = _autoreset_mode(autoreset_mode)
        if cage.reset_mode != CAGE_RESET_MODES[mode]:
            raise ConfigError(
                f"autoreset_mode {mode.value!r} needs a cage built with "
                f"reset_mode={CAGE_RESET_MODES[mode]!r}; got {cage.reset_mode!r}"
            )
        self._stepper = CageStepper(cage)
        self.cage = cage
        self.num_envs = cage.n_envs
        self.autoreset_mode = mode
        self.copy = bool(copy)
        self.single_observation_space = self._stepper.observation_space
        self.single_action_space = self._stepper.action_space
        self.observation_space = batch_space(
            self.single_observation_space, self.num_envs
        )
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = dict(cage.get_attr("metadata", [0])[0] or {})
        self.metadata["autoreset_mode"] = mode
        self.render_mode = cage.get_attr("render_mode", [0])[0]
        self.spec = cage.get_attr("spec", [0])[0]
        self._first_seed = seed
        if seed is not None:
            self.action_space.seed(seed)
        self.closed = False

    # -- resetting -------------------------------------------------------------
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Reset all envs (or those of ``options["reset_mask"]``); return observations and infos.

        ``seed``: an int gives env ``i`` the seed ``seed + i``; or one seed
        (or None) per env. ``options`` go to every env's reset, except
        ``reset_mask`` (a bool array over envs: reset only those).
        """
        self._stepper.check_open("reset")
        if seed is None and self._first_seed is not None:
            seed = self._first_seed
        self._first_seed = None
        seeds = self._seeds(seed)
        indices: list[int] | None = None
        if options is not None and "reset_mask" in options:
            options = dict(options)
            mask = _check_reset_mask(options.pop("reset_mask"), self.num_envs)
            indices = [int(i) for i in np.flatnonzero(mask)]
            seeds = None if seeds is None else [seeds[i] for i in indices]
        kept = self._stepper.reset(indices, seeds, options).reset
        infos: dict[str, Any] = {}
        for i in sorted(kept):
            infos = self._add_info(infos, kept[i], i)
        return self._stepper.observations(self.copy), infos

    def _seeds(
        self, seed: int | Sequence[int | None] | None
    ) -> list[int | None] | None:
        if seed is None:
            return None
        if isinstance(seed, (int, np.integer)):
            return [int(seed) + i for i in range(self.num_envs)]
        seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(
                "If seeds are passed as a list the length must match "
                f"num_envs={self.num_envs} but got length={len(seeds)}."
            )
        return seeds

    # -- stepping --------------------------------------------------------------
    def step(
        self, actions: Any
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every env with its action; return gymnasium's five batched values."""
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Any) -> None:
        """Start stepping with ``actions`` (a batch of ``action_space``)."""
        stepper = self._stepper
        stepper.check_open("step_async")
        if self.autoreset_mode is AutoresetMode.DISABLED and stepper.done.any():
            ended = [int(i) for i in np.flatnonzero(stepper.done)]
            raise CageStateError(
                f"envs {ended} ended their episodes: with autoreset_mode DISABLED, "
                "reset them with reset(options={'reset_mask': mask}) before stepping"
            )
        stepper.step_async(actions)

    def step_wait(
        self,
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Wait for the step started by :meth:`step_async`; return its results."""
        rewards, terminations, truncations = self._stepper.step_wait()
        return (
            self._stepper.observations(self.copy),
            rewards,
            terminations,
            truncations,
            self._step_infos(),
        )

    def _step_infos(self) -> dict[str, Any]:
        """The step's infos, added env by env in gymnasium's order."""
        stepper = self._stepper
        kept = self.cage.last_infos
        same_step = self.autoreset_mode is AutoresetMode.SAME_STEP
        ended = [int(i) for i in np.flatnonzero(stepper.done)] if same_step else []
        infos: dict[str, Any] = {}
        for i in sorted({*kept.step, *kept.reset, *ended}):
            if same_step and stepper.done[i]:
                final = {
                    "final_obs": stepper.final_observation(i),
                    "final_info": kept.step.get(i, {}),
                }
                infos = self._add_info(infos, final, i)
                info = kept.reset.get(i, {})
            elif i in kept.reset:  # reset in this step (NEXT_STEP)
                info = kept.reset[i]
            else:
                info = kept.step.get(i, {})
            infos = self._add_info(infos, info, i)
        return infos

    # -- env access ------------------------------------------------------------
    # SyncVectorEnv's signatures: one value per env, where VectorEnv has one
    @property
    def np_random_seed(self) -> tuple[int, ...]:  # type: ignore[override]
        """Each env's ``np_random_seed`` (as ``SyncVectorEnv``'s)."""
        return self.get_attr("np_random_seed")

    @property  # type: ignore[misc]
    def np_random(self) -> tuple[np.random.Generator, ...]:  # type: ignore[override]
        """Each env's ``np_random`` (copies, for process cages)."""
        return self.get_attr("np_random")

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Each env's attribute ``name`` (a method is called without arguments)."""
        self._stepper.check_open("get_attr")
        with reraise_env_exceptions():
            return tuple(self.cage.get_attr(name))

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | Any) -> None:
        """Set attribute ``name`` of each env (one value for all, or one per env)."""
        self._stepper.check_open("set_attr")
        with reraise_env_exceptions():
            self.cage.set_attr(name, values)

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` of each env; return the results."""
        self._stepper.check_open("call")
        with reraise_env_exceptions():
            return tuple(self.cage.call(name, *args, **kwargs))

    def render(self) -> tuple[Any, ...] | None:
        """Each env's ``render()``."""
        self._stepper.check_open("render")
        with reraise_env_exceptions():
            return tuple(self.cage.render())

    # -- lifetime --------------------------------------------------------------
    def close_extras(self, **kwargs: Any) -> None:
        """Close the cage (its envs and worker processes) and the slots."""
        self._stepper.close()

    def __repr__(self) -> str:
        return (
            f"CageVectorEnv({type(self.cage).__name__}, num_envs={self.num_envs}, "
            f"autoreset_mode={self.autoreset_mode.value})"
        )


def _check_reset_mask(mask: Any, n_envs: int) -> np.ndarray:
    """Gymnasium's checks of ``options["reset_mask"]``."""
    if not isinstance(mask, np.ndarray):
        raise TypeError(
            f"`options['reset_mask']` must be a numpy array, got {type(mask)}"
        )
    if mask.shape != (n_envs,):
        raise ValueError(
            f"`options['reset_mask']` must have shape `({n_envs},)`, got {mask.shape}"
        )
    if mask.dtype != np.bool_:
        raise TypeError(
            f"`options['reset_mask']` must have `dtype=np.bool_`, got {mask.dtype}"
        )
    if not mask.any():
        raise ValueError(
            "`options['reset_mask']` must contain a boolean array with at least "
            f"one True value, got reset_mask={mask}"
        )
    return mask
