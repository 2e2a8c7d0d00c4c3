"""The cage behind both vector-env adapters: built, stepped, its errors re-raised.

:func:`~parllel.interop.make_vec` and :func:`~parllel.interop.make_sb3_vec_env`
build their cage with :func:`build_adapter` (each env from a
:class:`~parllel.interop.env_wrapper.CarryFactory`) and drive it through
:class:`CageStepper`: it owns the ``[n_envs]`` slots (shared memory for
process cages), writes batched actions into them, and reads observations,
rewards, flags and final observations back, taking the values that the
envs' wrappers carry in their infos out of the kept infos.
:func:`reraise_env_exceptions` gives callers the env's own exception, as
``SyncVectorEnv`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from copy import deepcopy
from dataclasses import fields as dataclass_fields
from typing import Any, TypeVar

import numpy as np
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from parllel import fields
from parllel.arrays.array import Storage
from parllel.cages import Cage, CageOptions, PerEnvFactories, build_cage
from parllel.cages.env_info import KeptInfos
from parllel.errors import (
    CageStateError,
    ConfigError,
    DynamicSpaceError,
    EnvError,
    InvalidActionError,
    ParllelError,
    SpaceMismatchError,
)
from parllel.errors.vector_env import (
    CallPendingError,
    NoPendingStepError,
    VectorEnvClosedError,
)
from parllel.interop.batching import (
    allocate_for_space,
    batch_copy,
    batch_view,
    single_value,
    write_batch,
    write_per_env,
)
from parllel.interop.env_wrapper import (
    CARRIED_OBSERVATION,
    CarryFactory,
    carried_spaces,
    give_actions,
    has_fixed_shape,
)
from parllel.tree import buffer_from_example
from parllel.tree.utils import tree_close

__all__ = ["CageStepper", "build_adapter", "reraise_env_exceptions"]

Adapter = TypeVar("Adapter")


@contextmanager
def reraise_env_exceptions() -> Iterator[None]:
    """Re-raise an :class:`EnvError` as the env's own exception, chained from it.

    An EnvError without such a cause (or whose cause is parllel's own error)
    propagates unchanged.
    """
    try:
        yield
    except EnvError as error:
        cause = error.__cause__
        if not isinstance(cause, Exception) or isinstance(cause, ParllelError):
            raise
        error.__cause__ = None  # the chain runs env exception <- EnvError, once
        error.__suppress_context__ = True
        raise cause.with_traceback(cause.__traceback__) from error


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

    Each env's factory is a :class:`~parllel.interop.env_wrapper.CarryFactory`
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
    taken = {"options", *(field.name for field in dataclass_fields(CageOptions))}
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


class CageStepper:
    """Steps ``cage`` with batched actions into slots it allocates and owns.

    Args:
        cage: a cage built with ``keep_infos=True``; a final-observation slot
            is allocated when its ``reset_mode`` is ``"auto"``. Envs wrapped
            by :class:`~parllel.interop.env_wrapper.CarryFactory` may have spaces
            without fixed shape and dtype (actions of those: in-process
            cages only).
        reward_dtype: dtype of the reward slot.

    Raises:
        DynamicSpaceError: the action space has no fixed shape and dtype and
            the envs run in worker processes.
        SpaceMismatchError: carrying envs disagree about their spaces.
    """

    def __init__(self, cage: Cage, reward_dtype: Any = np.float64) -> None:
        if not cage.keep_infos:
            raise ConfigError("an interop adapter needs a cage with keep_infos=True")
        self.cage = cage
        self.n_envs = cage.n_envs
        self.observation_space = cage.spaces.observation
        self.action_space = cage.spaces.action
        #: every observation is carried in infos (the slots hold placeholders)
        self.carry_all = False
        self._carried_spaces(cage)
        #: actions reach the envs through cage.apply (the slots hold placeholders)
        self.carry_actions = self.carry_all and not has_fixed_shape(self.action_space)
        if self.carry_actions and cage.needs_shared_memory:
            raise DynamicSpaceError(
                f"As {self.action_space} has a dynamic shape so its not possible to "
                "make a static shared memory. (gymnasium's words): worker processes "
                "get their actions through shared memory, so envs with this action "
                "space run in this process only: pass parallel=False"
            )
        self.batched_observation_space = batch_space(
            self.observation_space, cage.n_envs
        )
        self.batched_action_space = batch_space(self.action_space, cage.n_envs)
        storage: Storage = "shared" if cage.needs_shared_memory else "local"
        n = self.n_envs
        self.slots: dict[str, Any] = {
            fields.ACTION: allocate_for_space(cage.spaces.action, n, storage),
            fields.OBSERVATION: allocate_for_space(cage.spaces.observation, n, storage),
            fields.REWARD: buffer_from_example(
                np.dtype(reward_dtype).type(0), (n,), storage
            ),
            fields.TERMINATED: buffer_from_example(False, (n,), storage),
            fields.TRUNCATED: buffer_from_example(False, (n,), storage),
        }
        if cage.reset_mode == "auto":
            self.slots[fields.FINAL_OBSERVATION] = allocate_for_space(
                cage.spaces.observation, n, storage
            )
        #: envs whose episode ended in the last step
        self.done = np.zeros(n, dtype=bool)
        #: each env's current observation, when carried
        self.current: list[Any] = [None] * n
        #: observations carried out of the last step (final ones for ended envs)
        self.carried: dict[int, Any] = {}
        self.pending = False
        self.closed = False
        self.started = False  # reset at least once

    def _carried_spaces(self, cage: Cage) -> None:
        """Read the envs' own spaces where their wrappers carry observations."""
        carried = cage.apply(carried_spaces)
        if carried[0] is None:
            return
        self.carry_all, self.observation_space, self.action_space = carried[0]
        for i, other in enumerate(carried):
            if other is not None and other[1:] != carried[0][1:]:
                raise SpaceMismatchError(
                    f"env {i} has observation and action spaces {other[1:]}, but env 0 "
                    f"has {carried[0][1:]}: all envs must have the same spaces"
                )

    # -- calls -------------------------------------------------------------------
    def reset(
        self,
        env_indices: Sequence[int] | None = None,
        seeds: Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> KeptInfos:
        """Reset envs (all or ``env_indices``) with seeds and options; the kept infos."""
        self.check_open("reset")
        self.check_idle("reset")
        with reraise_env_exceptions():
            self.cage.reset(
                self.slots[fields.OBSERVATION],
                env_indices,
                seeds=seeds,
                options=options,
            )
        self.done[slice(None) if env_indices is None else list(env_indices)] = False
        self.started = True
        return self._take_carried()

    def step_async(self, actions: Any, per_env: bool = False) -> None:
        """Write ``actions`` into the action slots and start the step.

        ``actions``: a batch of the batched action space (gymnasium's form),
        or with ``per_env`` one action per env (SB3's form).
        """
        self.check_open("step_async")
        self.check_idle("step_async")
        if not self.started:
            raise CageStateError("call reset() before the first step()")
        slots = self.slots
        if self.carry_actions:
            self._give_actions(actions, per_env)
        elif per_env:
            write_per_env(slots[fields.ACTION], actions)
        else:
            write_batch(slots[fields.ACTION], actions)
        with reraise_env_exceptions():
            self.cage.step_async(slots[fields.ACTION], slots)
        self.pending = True

    def _give_actions(self, actions: Any, per_env: bool) -> None:
        """Hand each carrying env its action (the slots keep their placeholders)."""
        if per_env:
            rows = list(actions)
        else:
            try:
                rows = list(iterate(self.batched_action_space, actions))
            except TypeError as exc:
                raise InvalidActionError(
                    f"actions do not fit {self.batched_action_space}: {exc}"
                ) from exc
        if len(rows) != self.n_envs:
            raise InvalidActionError(f"got {len(rows)} actions for {self.n_envs} envs")
        with reraise_env_exceptions():
            self.cage.apply(give_actions, rows)

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Finish the step; copies of its rewards, terminated and truncated flags."""
        self.check_open("step_wait")
        if not self.pending:
            raise NoPendingStepError("step_wait() called without step_async()")
        self.pending = False
        with reraise_env_exceptions():
            self.cage.await_step()
        self._take_carried()
        slots = self.slots
        rewards = np.array(slots[fields.REWARD].to_ndarray())
        terminated = np.array(slots[fields.TERMINATED].to_ndarray())
        truncated = np.array(slots[fields.TRUNCATED].to_ndarray())
        np.logical_or(terminated, truncated, out=self.done)
        return rewards, terminated, truncated

    def _take_carried(self) -> KeptInfos:
        """Move carried observations out of the cage's kept infos; return those."""
        kept = self.cage.last_infos
        self.carried = {}
        for infos, current in ((kept.step, self.carried), (kept.reset, None)):
            for i in [i for i, info in infos.items() if CARRIED_OBSERVATION in info]:
                observation = infos[i].pop(CARRIED_OBSERVATION)
                if current is not None:
                    current[i] = observation
                if self.carry_all:
                    self.current[i] = observation  # a reset's comes after the step's
                if not infos[i]:
                    del infos[i]  # as the cage leaves out envs with empty infos
        return kept

    # -- reading -----------------------------------------------------------------
    def observations(self, copy: bool) -> Any:
        """The observation batch: copied, or views the next step overwrites."""
        if self.carry_all:  # gymnasium's batching (SyncVectorEnv's)
            space = self.observation_space
            empty: Any = create_empty_array(space, self.n_envs)
            batch = concatenate(space, self.current, empty)
            return deepcopy(batch) if copy else batch
        observation = self.slots[fields.OBSERVATION]
        if copy:
            return batch_copy(observation)
        return batch_view(observation)

    def final_observation(self, index: int) -> Any:
        """The last observation of env ``index``'s episode that ended in this step.

        As the env returned it where its wrapper carried it, else read from
        the final-observation slot.
        """
        if index in self.carried:
            return self.carried[index]
        return single_value(self.slots[fields.FINAL_OBSERVATION], index)

    # -- lifetime ----------------------------------------------------------------
    def close(self) -> None:
        """Close the cage (envs, worker processes) and the slots (idempotent)."""
        if self.closed:
            return
        self.closed = True
        try:
            self.cage.close()
        finally:
            tree_close(self.slots)

    def check_open(self, call: str) -> None:
        """Raise :class:`VectorEnvClosedError` after :meth:`close`."""
        if self.closed:
            raise VectorEnvClosedError(f"cannot {call}: the vector env is closed")

    def check_idle(self, call: str) -> None:
        """Raise :class:`CallPendingError` while a step is pending."""
        if self.pending:
            raise CallPendingError(
                f"cannot {call} while stepping: call step_wait() first", call
            )
