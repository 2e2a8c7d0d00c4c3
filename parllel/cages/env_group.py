"""EnvGroup: the envs one process steps, writing results straight into slots.

Serial cages, worker processes and the main process's share of a process cage
all step their envs through this one class, so their results are identical
whatever the grouping.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import cloudpickle

from parllel import fields
from parllel.cages.env_access import apply_to_env, call_env, set_env_attr
from parllel.cages.env_factories import build_env
from parllel.cages.env_info import InfoSlotTables, write_info_value
from parllel.cages.move_refusal import move_refusal
from parllel.cages.options import CageOptions
from parllel.cages.probe import env_error, probe_env
from parllel.cages.spaces import (
    check_spaces_agree,
    env_action_reader,
    env_spaces,
)
from parllel.cages.traj_info import TrajInfo
from parllel.errors import CageStateError, EnvError
from parllel.seeding import action_space_seed, env_seed

__all__ = ["EnvGroup", "env_seed"]


class EnvGroup:
    """Creates, seeds, steps and resets a group of envs of one process.

    Args:
        env_factory: callable returning a gymnasium env (called once per env).
        env_indices: global indices of the envs.
        env_seeds: one seed per env, given to its first ``reset(seed=...)`` and
            its action space (None: unseeded).
        options: the cage's options (its seed and offset are not read); its
            ``reset_mode`` (docs/cages.md, "Episodes") and ``keep_infos``
            (:attr:`step_infos`, :attr:`reset_infos`) apply.
    """

    def __init__(
        self,
        env_factory: Callable[..., Any],
        env_kwargs: dict[str, Any],
        env_indices: Sequence[int],
        env_seeds: Sequence[int] | None,
        options: CageOptions,
    ) -> None:
        self.env_indices = tuple(env_indices)
        self._env_factory, self._env_kwargs = env_factory, env_kwargs  # the probe's
        self.keep_infos = bool(options.keep_infos)
        #: info dicts of the last step / of the resets in the last step or
        #: reset, by view index (``offset + i``); filled if ``keep_infos``
        self.step_infos: dict[int, dict] = {}
        self.reset_infos: dict[int, dict] = {}
        self.reset_mode = options.reset_mode
        self.traj_info_type = traj_info_type = options.traj_info_type
        self.traj_info_kwargs = dict(options.traj_info_kwargs)
        if env_seeds is not None and len(env_seeds) != len(self.env_indices):
            raise ValueError(
                f"{len(env_seeds)} env seeds for {len(self.env_indices)} envs"
            )
        self.envs: list[Any] = []
        for index in self.env_indices:
            try:
                self.envs.append(build_env(env_factory, env_kwargs, index))
            except Exception as exc:
                self.close()
                raise env_error(index, "its construction", exc) from exc
        try:
            self.spaces = env_spaces(self.envs[0])
            for index, env in zip(self.env_indices, self.envs):
                check_spaces_agree(self.spaces, env_spaces(env), index)
        except Exception:
            self.close()
            raise
        self.clip_actions = bool(options.clip_actions)
        self._read_actions = env_action_reader(self.spaces.action, self.clip_actions)
        # TrajInfo.step is inlined in step() unless a subclass overrides it
        self._plain_stats = getattr(traj_info_type, "step", None) is TrajInfo.step
        # each env's seed, used at its first reset (moves with the env)
        self._seeds: list[int | None] = (
            [None] * len(self.envs) if env_seeds is None else list(env_seeds)
        )
        self._needs_seed = [env_seeds is not None] * len(self.envs)
        self._waiting = [True] * len(self.envs)  # not reset yet / finished (wait mode)
        self._started = [False] * len(self.envs)  # reset at least once
        self._trajs = [self._new_traj(i) for i in self.env_indices]
        n = len(self.envs)
        self._gamma = self._trajs[0].discount
        self._lengths, self._returns = [0] * n, [0.0] * n
        self._discounted, self._discounts = [0.0] * n, [1.0] * n
        self._info_slots = InfoSlotTables()
        for env, seed in zip(self.envs, self._seeds):
            if seed is not None:
                env.action_space.seed(action_space_seed(seed))

    def __len__(self) -> int:
        return len(self.envs)

    def _new_traj(self, env_index: int) -> TrajInfo:
        return self.traj_info_type(env_index=env_index, **self.traj_info_kwargs)

    def _reset_env(
        self, i: int, seed: int | None = None, options: dict | None = None
    ) -> tuple[Any, dict]:
        """Reset env ``i``: with ``seed`` if given, else its own seed at its first reset."""
        env = self.envs[i]
        if self._needs_seed[i]:
            self._needs_seed[i] = False
            if seed is None:
                seed = self._seeds[i]
        if options is None:
            return env.reset(seed=seed)
        return env.reset(seed=seed, options=options)

    # -- probing -------------------------------------------------------------
    def example_step(self) -> dict[str, Any]:
        """Example values for allocation, from a probe env like this group's env 0.

        The probe is a separate env built by the factory (:func:`probe_env`):
        reset with env 0's seed, stepped once with a legal random action and
        closed. The group's own envs see nothing of it.
        """
        return probe_env(
            self._env_factory,
            self._env_kwargs,
            self.env_indices[0],
            self._seeds[0],
            self.spaces,
            self.envs,
        )

    # -- resetting -----------------------------------------------------------
    def reset(
        self,
        out_observation: Any,
        local_indices: Sequence[int] | None = None,
        offset: int = 0,
        seeds: dict[int, int | None] | None = None,
        options: dict | None = None,
    ) -> None:
        """Reset envs (all, or ``local_indices``) and write their observations.

        Local env ``i`` writes to ``out_observation[offset + i]`` (a view over
        envs, or a tree of them). Episode statistics of unfinished episodes
        of the reset envs are discarded.

        Args:
            seeds: seeds by view index (``offset + i``) for ``env.reset(seed=...)``;
                an env without one gets its own seed at its first reset and
                no seed later.
            options: passed to every ``env.reset(options=...)``.
        """
        indices = range(len(self.envs)) if local_indices is None else local_indices
        if self.keep_infos:
            self.step_infos, self.reset_infos = {}, {}
        for i in indices:
            j = offset + i
            seed = None if seeds is None else seeds.get(j)
            self._reset_into(i, out_observation, j, seed, options)

    def _reset_into(
        self,
        i: int,
        out_observation: Any,
        j: int,
        seed: int | None = None,
        options: dict | None = None,
    ) -> None:
        """Reset env ``i``, write its observation to index ``j``, start its episode."""
        try:
            observation, info = self._reset_env(i, seed, options)
            out_observation[j] = observation
        except Exception as exc:
            raise env_error(self.env_indices[i], "reset", exc) from exc
        self._waiting[i] = False
        self._started[i] = True
        self._start_episode(i, info)
        if self.keep_infos and info:
            self.reset_infos[j] = info

    # -- stepping ------------------------------------------------------------
    def step(self, action: Any, out: Any, offset: int = 0) -> list[TrajInfo]:
        """Step every env with its action and write results into ``out``.

        Local env ``i`` reads and writes index ``offset + i`` of every view, so
        several groups can share one set of views over all envs.

        Args:
            action: actions over envs (a view, or a tree of them).
            out: mapping with ``observation`` (next-observation slots),
                ``reward``, ``terminated``, ``truncated`` views over envs and
                optionally ``env_info`` (tree of views of preallocated keys)
                and ``final_observation`` (slots for the last observation of
                episodes that end in this step).
            offset: index of this group's first env in the views.

        Returns:
            TrajInfos of the episodes that ended in this step.
        """
        out_observation = out[fields.OBSERVATION]
        info_items, stored_keys = self._info_slots.get(out.get(fields.ENV_INFO))
        out_final = out.get(fields.FINAL_OBSERVATION)
        n = len(self.envs)
        rewards = [0.0] * n
        terminateds = [False] * n
        truncateds = [False] * n
        completed: list[TrajInfo] = []
        auto_reset = self.reset_mode == "auto"
        next_step = self.reset_mode == "next_step"
        keep_infos = self.keep_infos
        if keep_infos:
            self.step_infos, self.reset_infos = {}, {}
        actions = self._read_actions(action)
        gamma = self._gamma
        plain_stats = self._plain_stats
        waiting, trajs = self._waiting, self._trajs
        # default statistics live in per-env lists (a TrajInfo attribute update
        # per step costs more than the list updates); copied out at episode end
        lengths, returns = self._lengths, self._returns
        discounted, discounts = self._discounted, self._discounts
        for i, env in enumerate(self.envs):
            j = offset + i
            if waiting[i]:
                if not self._started[i] and not self.reset_mode == "wait":
                    raise CageStateError(
                        f"env {self.env_indices[i]} was stepped before its first "
                        "reset: call cage.reset(...) before stepping"
                    )
                if next_step:  # the step after the episode's end resets it
                    self._reset_into(i, out_observation, j)
                continue  # wait mode: a finished env idles until reset
            try:
                env_action = actions[j]
                observation, reward, terminated, truncated, info = env.step(env_action)
                if plain_stats:
                    lengths[i] += 1
                    value = float(reward)  # numpy 2 keeps float + np.float32 in float32
                    returns[i] += value
                    discounted[i] += discounts[i] * value
                    discounts[i] *= gamma
                else:
                    trajs[i].step(
                        observation, env_action, reward, terminated, truncated, info
                    )
                rewards[i] = reward
                terminateds[i] = terminated
                truncateds[i] = truncated
                if keep_infos and info:
                    self.step_infos[j] = info
                for key, view, exact, zero in info_items:
                    value = info.get(key, zero)
                    if type(value) in exact:
                        view[j] = value
                    else:
                        write_info_value(view, j, value, key, self.env_indices[i])
                if terminated or truncated:
                    if stored_keys:
                        info = {k: v for k, v in info.items() if k not in stored_keys}
                    completed.append(
                        self._finish_episode(i, terminated, truncated, info)
                    )
                    if out_final is not None:
                        out_final[j] = observation
                    if auto_reset:
                        observation, reset_info = env.reset()
                        if reset_info:
                            trajs[i].reset_info = reset_info
                            if keep_infos:
                                self.reset_infos[j] = reset_info
                    else:
                        waiting[i] = True
                out_observation[j] = observation
            except EnvError:
                raise
            except Exception as exc:
                raise env_error(self.env_indices[i], "step", exc) from exc
        out[fields.REWARD][offset : offset + n] = rewards
        out[fields.TERMINATED][offset : offset + n] = terminateds
        out[fields.TRUNCATED][offset : offset + n] = truncateds
        return completed

    def _start_episode(self, i: int, reset_info: dict | None = None) -> None:
        self._trajs[i] = self._new_traj(self.env_indices[i])
        if reset_info:
            self._trajs[i].reset_info = reset_info
        self._lengths[i] = 0
        self._returns[i] = 0.0
        self._discounted[i] = 0.0
        self._discounts[i] = 1.0

    def _finish_episode(
        self, i: int, terminated: bool, truncated: bool, info: dict
    ) -> TrajInfo:
        """Close env ``i``'s episode: fill its TrajInfo and start the next one.

        ``info``: the last step's info entries that no env-info slot stored.
        """
        traj = self._trajs[i]
        if self._plain_stats:
            traj.length = self._lengths[i]
            traj.return_ = self._returns[i]
            traj.discounted_return = self._discounted[i]
            traj._current_discount = self._discounts[i]
        traj.finish(terminated, truncated, info)
        self._start_episode(i)
        return traj

    def waiting(self) -> list[int]:
        """Local indices of envs that finished and wait for a reset (wait mode)."""
        return [i for i, waiting in enumerate(self._waiting) if waiting]

    # -- moving envs between processes ----------------------------------------
    def give_env(self, first: bool) -> bytes:
        """Remove the first (or last) env and return it pickled with its episode state.

        For load balancing between processes: :meth:`take_env` in another
        group continues the env exactly where it was. Envs that
        :func:`~parllel.cages.move_refusal.move_refusal` refuses (``EzPickle``
        ones: MuJoCo, Atari) raise :class:`TypeError`; so does any env that
        fails to pickle. Nothing is removed on error.
        """
        if len(self.envs) < 2:
            raise ValueError("a group keeps at least one env")
        i = 0 if first else len(self.envs) - 1
        refusal = move_refusal(self.envs[i], self.env_indices[i])
        if refusal is not None:
            raise TypeError(refusal)
        columns = self._columns()
        payload = cloudpickle.dumps(
            (self.env_indices[i],) + tuple(column[i] for column in columns)
        )
        for column in columns:
            del column[i]
        indices = list(self.env_indices)
        del indices[i]
        self.env_indices = tuple(indices)
        return payload

    def take_env(self, payload: bytes, first: bool) -> None:
        """Add an env given by :meth:`give_env` at the front (or the end)."""
        env_index, *values = cloudpickle.loads(payload)
        i = 0 if first else len(self.envs)
        for column, value in zip(self._columns(), values):
            column.insert(i, value)
        indices = list(self.env_indices)
        indices.insert(i, env_index)
        self.env_indices = tuple(indices)

    def give_envs(self, first: bool, count: int) -> list[bytes]:
        """:meth:`give_env` ``count`` times, all or nothing (the group keeps one env)."""
        if not 0 < count < len(self.envs):
            raise ValueError(
                f"cannot give {count} of {len(self.envs)} envs: a group keeps one"
            )
        payloads: list[bytes] = []
        try:
            for _ in range(count):
                payloads.append(self.give_env(first))
        except Exception:
            for payload in reversed(payloads):
                self.take_env(payload, first)
            raise
        return payloads

    def take_envs(self, payloads: Sequence[bytes], first: bool) -> None:
        """Add the envs of :meth:`give_envs` of a neighbouring group, order kept.

        ``first``: they came from the end of a group on this group's left and
        go to this group's front; else from the front of a group on its right,
        to its end.
        """
        for payload in payloads:
            self.take_env(payload, first)

    def _columns(self) -> tuple[list, ...]:
        # every per-env list, in one fixed order (give_env/take_env payloads)
        return (
            self.envs, self._seeds, self._needs_seed, self._waiting, self._started,
            self._trajs,
            self._lengths, self._returns, self._discounted, self._discounts,
        )  # fmt: skip

    # -- env access ----------------------------------------------------------
    def call(
        self, name: str, args: tuple, kwargs: dict, local_indices: Sequence[int]
    ) -> list:
        """Call method ``name`` (or read attribute ``name`` if not callable) per env.

        Wrapped envs are searched like ``env.get_wrapper_attr`` (see
        :mod:`parllel.cages.env_access`).
        """
        return [
            call_env(self.envs[i], name, args, kwargs, self.env_indices[i])
            for i in local_indices
        ]

    def apply(
        self,
        function: Callable[..., Any],
        args: tuple,
        kwargs: dict,
        local_indices: Sequence[int],
    ) -> list:
        """``function(env, *args, **kwargs)`` for each env; the results."""
        return [
            apply_to_env(self.envs[i], function, args, kwargs, self.env_indices[i])
            for i in local_indices
        ]

    def set_attr(
        self, name: str, values: Sequence[Any], local_indices: Sequence[int]
    ) -> None:
        """Set attribute ``name`` of each env, like ``env.set_wrapper_attr``."""
        for i, value in zip(local_indices, values):
            set_env_attr(self.envs[i], name, value, self.env_indices[i])

    def close(self) -> None:
        """Close every env, ignoring errors of envs that are already broken."""
        for env in self.envs:
            try:
                env.close()
            except Exception:
                pass
        self.envs = []
