"""The Cage interface: one state machine shared by serial and process cages."""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from parllel import fields
from parllel.cages.cage_checks import check_slot_tree
from parllel.cages.env_factories import PerEnvFactories
from parllel.cages.env_indices import normalize_env_indices
from parllel.cages.env_info import KeptInfos
from parllel.cages.options import CageOptions
from parllel.cages.spaces import ActionChecker, EnvSpaces, check_observation
from parllel.cages.traj_info import TrajInfo
from parllel.errors import CageError, CageStateError, ClosedCageError, ConfigError
from parllel.seeding import resolve_env_seeds

# What a cage's pending-call attributes hold while no call is pending (the
# state machine guarantees an await call finds what its async call left).
NOTHING_PENDING: tuple[None, None] = (None, None)


class ResetRequest(NamedTuple):
    """One reset: what :meth:`Cage.reset_async` hands its subclass's hooks."""

    out_observation: Any
    env_indices: list[int] | None  # cage-local; None: every env
    seeds: dict[int, int | None] | None  # by env index
    options: dict[str, Any] | None


NO_RESET = ResetRequest(None, None, None, None)  # the pending reset between calls


class CageState(enum.Enum):
    """What a cage is doing; calls out of order raise :class:`CageStateError`."""

    IDLE = "idle"
    STEPPING = "stepping"  # step_async sent, await_step pending
    RESETTING = "resetting"  # reset_async sent, await_reset pending
    CLOSED = "closed"


class Cage(ABC):
    """Steps ``n_envs`` gymnasium envs, writing results into preallocated slots.

    Built cages call ``env_factory(**env_kwargs)`` once per env; cages over envs
    built elsewhere pass ``env_factory=None``. ``step_slots`` maps
    :mod:`parllel.fields` names (``observation``, ``reward``, ``terminated``,
    ``truncated``, optionally ``env_info`` and ``final_observation``) to
    ``[n_envs]`` views. ``env_indices`` are cage-local and may be negative.
    Subclasses implement the ``_``-prefixed hooks (see docs/cages.md).

    Example::

        cage.reset(sample_tree.observation[0])
        cage.step_async(sample_tree.action[t], out=step_slots)
        completed = cage.await_step()   # TrajInfos of finished episodes

    Attributes:
        local_step_seconds: seconds this process has spent stepping envs itself.
    """

    #: True if envs run in other processes, which reach slots by shared memory
    needs_shared_memory = False

    def __init__(
        self,
        env_factory: Callable[..., Any] | None,
        n_envs: int,
        env_kwargs: dict[str, Any] | None,
        options: CageOptions,
    ) -> None:
        if int(n_envs) < 1:
            raise ConfigError(f"n_envs must be >= 1, got {n_envs}")
        if not isinstance(options, CageOptions):
            raise ConfigError(
                f"options must be a CageOptions, got {options!r}: pass "
                "options=CageOptions(seed=..., reset_mode=...)"
            )
        self.options = options
        self.n_envs = int(n_envs)
        self.env_kwargs = dict(env_kwargs or {})
        # subclasses that build envs check their factory (check_factory)
        self.env_factory = env_factory
        self.seed = options.seed
        self.env_offset = int(options.env_offset)
        if isinstance(env_factory, PerEnvFactories):
            env_factory.check_covers(self.env_indices)
        # one seed per env of this cage, or None (parllel.seeding)
        self.env_seeds = resolve_env_seeds(options.seed, self.env_indices)
        self.reset_mode = options.reset_mode
        self.traj_info_type = options.traj_info_type
        self.traj_info_kwargs = dict(options.traj_info_kwargs)
        self.keep_infos = bool(options.keep_infos)
        self.clip_actions = bool(options.clip_actions)
        self._last_infos = KeptInfos()
        self.state = CageState.IDLE
        self.local_step_seconds = 0.0
        # what the async calls leave for the await calls (reset after use, so
        # that no slots are held between calls)
        self._pending_step: tuple[Any, Any] = NOTHING_PENDING
        self._pending_reset = NO_RESET
        self.spaces: EnvSpaces
        self.example: dict[str, Any]
        self._action_checker: ActionChecker

    @property
    def env_indices(self) -> range:
        """Global indices of this cage's envs."""
        return range(self.env_offset, self.env_offset + self.n_envs)

    def _finish_init(self, spaces: EnvSpaces, example: dict[str, Any]) -> None:
        check_observation(spaces, example[fields.OBSERVATION], self.env_offset)
        self.spaces = spaces
        self.example = example
        self._action_checker = ActionChecker(spaces.action, self.n_envs)

    def _require(self, expected: CageState, call: str) -> None:
        if self.state is expected:
            return
        if self.state is CageState.CLOSED:
            raise ClosedCageError(f"cannot {call}: the cage is closed")
        hints = {
            CageState.STEPPING: "await_step() first",
            CageState.RESETTING: "await_reset() first",
            CageState.IDLE: "nothing is pending",
        }
        raise CageStateError(
            f"cannot {call} while {self.state.value}: {hints[self.state]}"
        )

    # -- stepping ------------------------------------------------------------
    def step_async(self, action: Any, out: Any) -> None:
        """Start stepping every env with ``action`` (``[n_envs, ...]``), writing into ``out``."""
        self._require(CageState.IDLE, "step_async")
        self._action_checker.check(action)
        for key in (
            fields.OBSERVATION,
            fields.REWARD,
            fields.TERMINATED,
            fields.TRUNCATED,
        ):
            if key not in out:
                raise ConfigError(f"step slots are missing {key!r}; got {list(out)}")
        self._pending_step = self._step_async(action, out)
        self.state = CageState.STEPPING

    def await_step(self) -> list[TrajInfo]:
        """Wait for the step started by :meth:`step_async`; return finished episodes."""
        self._require(CageState.STEPPING, "await_step")
        pending, self._pending_step = self._pending_step, NOTHING_PENDING
        try:
            return self._await_step(pending)
        finally:
            if self.state is CageState.STEPPING:
                self.state = CageState.IDLE

    def step(self, action: Any, out: Any) -> list[TrajInfo]:
        """Blocking :meth:`step_async` + :meth:`await_step`."""
        self.step_async(action, out)
        return self.await_step()

    # -- resetting -----------------------------------------------------------
    def reset_async(
        self,
        out_observation: Any,
        env_indices: Sequence[int] | None = None,
        *,
        seeds: Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        """Start resetting envs (all, or these cage-local indices) into ``out_observation``.

        ``out_observation`` is an ``[n_envs, ...]`` view (or tree of views);
        only the rows of the reset envs are written.

        Args:
            out_observation: where the reset observations go.
            env_indices: cage-local indices of the envs to reset (None: all;
                -1: the last env).
            seeds: one seed (or None) per reset env, in the order of
                ``env_indices``, for ``env.reset(seed=...)``. Without one, an
                env gets the cage's seed at its first reset and none later.
            options: passed to every reset env's ``env.reset(options=...)``.
        """
        self._require(CageState.IDLE, "reset_async")
        if env_indices is not None:
            env_indices = normalize_env_indices(env_indices, self.n_envs)
        seed_map = None
        if seeds is not None:
            indices = range(self.n_envs) if env_indices is None else env_indices
            seeds = list(seeds)
            if len(seeds) != len(indices):
                raise ConfigError(
                    f"got {len(seeds)} seeds for {len(indices)} reset envs: give "
                    "one seed (or None) per env that is reset"
                )
            seed_map = {
                i: None if s is None else int(s) for i, s in zip(indices, seeds)
            }
        if options is not None and not isinstance(options, Mapping):
            raise ConfigError(f"reset options must be a dict, got {options!r}")
        request = ResetRequest(out_observation, env_indices, seed_map, options)
        self._pending_reset = self._reset_async(request)
        self.state = CageState.RESETTING

    def await_reset(self) -> None:
        """Wait for the reset started by :meth:`reset_async`."""
        self._require(CageState.RESETTING, "await_reset")
        request, self._pending_reset = self._pending_reset, NO_RESET
        try:
            self._await_reset(request)
        finally:
            if self.state is CageState.RESETTING:
                self.state = CageState.IDLE

    def reset(
        self,
        out_observation: Any,
        env_indices: Sequence[int] | None = None,
        *,
        seeds: Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        """Blocking :meth:`reset_async` + :meth:`await_reset`."""
        self.reset_async(out_observation, env_indices, seeds=seeds, options=options)
        self.await_reset()

    @property
    def last_infos(self) -> KeptInfos:
        """The envs' info dicts of the last step or reset, unchanged.

        Only for cages built with ``keep_infos=True`` (in process cages every
        non-empty info then travels back by pipe, so it costs a pickle per
        env with an info). Adapters that must hand infos on as the envs
        returned them (:mod:`parllel.interop`) use it; samplers use env-info
        slots instead.
        """
        if not self.keep_infos:
            raise ConfigError(
                "this cage does not keep infos: build it with keep_infos=True"
            )
        return self._last_infos

    def waiting_envs(self) -> list[int]:
        """Cage-local indices of envs that finished and wait for a reset (wait mode)."""
        self._require(CageState.IDLE, "waiting_envs")
        return self._waiting_envs()

    # -- env access ----------------------------------------------------------
    def call(
        self,
        name: str,
        *args: Any,
        env_indices: Sequence[int] | None = None,
        **kwargs: Any,
    ) -> list[Any]:
        """Call method ``name`` of each env with the arguments; return the results.

        Wrapped envs (``gym.make``) are searched like gymnasium's
        ``env.get_wrapper_attr``: the outermost wrapper that has ``name``,
        else the next inner one, down to the unwrapped env. A non-callable
        attribute is returned as it is. A missing one raises
        :class:`~parllel.errors.EnvAttributeError` naming the env; a method
        that raises gives :class:`~parllel.errors.EnvError`.
        """
        self._require(CageState.IDLE, f"call {name!r}")
        indices = normalize_env_indices(env_indices, self.n_envs)
        return self._call(name, args, kwargs, indices)

    def apply(
        self,
        function: Callable[..., Any],
        *args: Any,
        env_indices: Sequence[int] | None = None,
        **kwargs: Any,
    ) -> list[Any]:
        """Run ``function(env, *args, **kwargs)`` on each env, where it lives; the results.

        ``function`` gets the env as built by the factory (wrappers
        included). In process cages it is cloudpickled to the workers, and
        arguments and results travel by pipe, so they must pickle. An
        exception in ``function`` raises :class:`~parllel.errors.EnvError`
        naming the env.

        Example:
            >>> cage.apply(lambda env: type(env.unwrapped).__name__)
            ['CartPoleEnv', 'CartPoleEnv']
        """
        self._require(CageState.IDLE, f"apply {function!r}")
        indices = normalize_env_indices(env_indices, self.n_envs)
        return self._apply(function, args, kwargs, indices)

    def get_attr(
        self, name: str, env_indices: Sequence[int] | None = None
    ) -> list[Any]:
        """Read attribute ``name`` of each env, as :meth:`call` finds it.

        As in gymnasium's vector envs, a method is called (without arguments).

        Example:
            >>> cage.get_attr("gravity")  # CartPole's, behind gym.make's wrappers
            [9.8, 9.8]
        """
        return self.call(name, env_indices=env_indices)

    def set_attr(
        self, name: str, values: Any, env_indices: Sequence[int] | None = None
    ) -> None:
        """Set attribute ``name`` of each env (one value for all, or one per env).

        Like gymnasium's ``env.set_wrapper_attr``: set where the wrapper chain
        defines ``name`` (e.g. ``gravity`` on the unwrapped CartPole, not on
        its ``TimeLimit``), else created on the outermost wrapper.
        """
        self._require(CageState.IDLE, f"set_attr {name!r}")
        indices = normalize_env_indices(env_indices, self.n_envs)
        if not isinstance(values, (list, tuple)):
            values = [values] * len(indices)
        if len(values) != len(indices):
            raise ConfigError(
                f"set_attr({name!r}, values): got {len(values)} values for "
                f"{len(indices)} envs; give one value for every env, or a list "
                "(or tuple) with one value per env"
            )
        self._set_attr(name, list(values), indices)

    def render(self, env_indices: Sequence[int] | None = None) -> list[Any]:
        """Return each env's ``render()`` (e.g. RGB arrays with render_mode='rgb_array')."""
        return self.call("render", env_indices=env_indices)

    # -- buffers ---------------------------------------------------------------
    def check_tree(self, sample_tree: Mapping[str, Any]) -> None:
        """Raise unless this cage can use ``sample_tree``'s fields as its slots.

        Checks every leaf of the fields a cage reads (``action``) or writes
        (``observation``, ``reward``, ``terminated``, ``truncated``,
        ``env_info``, ``final_observation``): a closed Array raises
        :class:`~parllel.errors.ArrayClosedError`; a process cage also needs
        shared memory (:class:`~parllel.errors.ConfigError`). Samplers call
        this when they are given the tree, so a bad leaf is named there, not
        in the middle of sampling.
        """
        check_slot_tree(sample_tree, self.needs_shared_memory, type(self).__name__)

    # -- lifetime ------------------------------------------------------------
    def close(self) -> None:
        """Close envs and release workers and shared memory (idempotent)."""
        if self.state is CageState.CLOSED:
            return
        self.state = CageState.CLOSED
        self._close()

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self.state is CageState.CLOSED

    def __enter__(self) -> Cage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- hooks ---------------------------------------------------------------
    @abstractmethod
    def _step_async(self, action: Any, out: Any) -> tuple[Any, Any]:
        """Start a step; return the pair :meth:`_await_step` gets."""

    @abstractmethod
    def _await_step(self, pending: tuple[Any, Any]) -> list[TrajInfo]: ...

    def _reset_async(self, request: ResetRequest) -> ResetRequest:
        """Start a reset; return the request :meth:`_await_reset` gets
        (default: nothing starts before the await call)."""
        return request

    @abstractmethod
    def _await_reset(self, request: ResetRequest) -> None: ...

    @abstractmethod
    def _waiting_envs(self) -> list[int]: ...

    @abstractmethod
    def _call(
        self, name: str, args: tuple, kwargs: dict, indices: list[int]
    ) -> list[Any]: ...

    def _apply(
        self,
        function: Callable[..., Any],
        args: tuple,
        kwargs: dict,
        indices: list[int],
    ) -> list[Any]:
        raise CageError(f"{type(self).__name__} cannot run functions on its envs")

    @abstractmethod
    def _set_attr(self, name: str, values: list[Any], indices: list[int]) -> None: ...

    @abstractmethod
    def _close(self) -> None: ...
