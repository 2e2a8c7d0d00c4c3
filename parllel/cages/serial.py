"""SerialCage: every env stepped in the calling process."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from time import perf_counter
from typing import Any

from parllel import fields
from parllel.cages.cage import Cage, ResetRequest
from parllel.cages.cage_checks import check_factory, raise_closed_slot
from parllel.cages.env_group import EnvGroup
from parllel.cages.env_info import KeptInfos
from parllel.cages.probe import spaces_example
from parllel.cages.traj_info import TrajInfo
from parllel.errors import EnvError


class SerialCage(Cage):
    """Steps ``n_envs`` envs one after another in this process.

    Same API and, for the same seed and actions, bit-identical results as
    :class:`~parllel.cages.ProcessCage`: swap it in to debug (breakpoints and
    tracebacks work as usual) or when envs are too cheap for processes to pay.

    Args:
        env_factory: callable returning a gymnasium env (it need not pickle:
            the envs stay in this process).
        n_envs: number of envs.
        env_kwargs: keyword arguments for ``env_factory``.
        seed: None (unseeded), a master seed (env ``i``, by global index, gets
            the seed ``Seeds.from_master(seed, ...).envs[i]``, see
            :mod:`parllel.seeding`), or one seed per env of this cage (e.g.
            ``seeds.envs`` or ``seeds.eval_envs``). Each env gets its seed at
            its first reset.
        env_offset: global index of this cage's first env (seeds and TrajInfo
            indices), for setups with several cages.
        reset_mode: ``"auto"``, ``"wait"`` or ``"next_step"`` (see
            :class:`~parllel.cages.EnvGroup`).
        traj_info_type: TrajInfo class (or factory) for episode statistics.
        traj_info_kwargs: keyword arguments for it (e.g. ``{"discount": 0.99}``).
        keep_infos: keep the envs' info dicts of every step and reset in
            :attr:`last_infos`.
        clip_actions: clip ``Box`` actions to the action space's bounds before
            the envs see them, as SB3 does; the sample tree keeps the
            unclipped action, for the loss (docs/training.md, "Defaults").
        probe: take :attr:`example` from one step of a probe env (built by
            the factory once more, reset with env 0's seed, stepped once,
            closed; the cage's envs see nothing of it). False: no probe env;
            :attr:`example` holds zeros of the spaces and no env info (for
            adapters that allocate from the spaces, e.g. ``make_vec``).

    Example:
        >>> cage = SerialCage(lambda: gym.make("CartPole-v1"), n_envs=4, seed=0)
        >>> cage.example[fields.OBSERVATION].shape
        (4,)
    """

    def __init__(
        self,
        env_factory: Callable[..., Any],
        n_envs: int = 1,
        env_kwargs: dict[str, Any] | None = None,
        *,
        seed: int | Sequence[int] | None = None,
        env_offset: int = 0,
        reset_mode: str = "auto",
        traj_info_type: Callable[..., TrajInfo] = TrajInfo,
        traj_info_kwargs: dict[str, Any] | None = None,
        keep_infos: bool = False,
        clip_actions: bool = True,
        probe: bool = True,
    ) -> None:
        super().__init__(
            env_factory,
            n_envs,
            env_kwargs,
            seed,
            env_offset,
            reset_mode,
            traj_info_type,
            traj_info_kwargs,
            keep_infos,
        )
        check_factory(env_factory)
        self._group = EnvGroup(
            env_factory,
            self.env_kwargs,
            self.env_indices,
            self.env_seeds,
            reset_mode,
            traj_info_type,
            self.traj_info_kwargs,
            self.keep_infos,
            clip_actions,
        )
        self.clip_actions = self._group.clip_actions
        try:
            group = self._group
            example = group.example_step() if probe else spaces_example(group.spaces)
            self._finish_init(group.spaces, example)
        except BaseException:
            self._group.close()
            raise

    def _step_async(self, action: Any, out: Any) -> tuple[Any, Any]:
        return (action, out)  # stepped in await_step

    def _await_step(self, pending: tuple[Any, Any]) -> list[TrajInfo]:
        action, out = pending
        start = perf_counter()
        try:
            completed = self._group.step(action, out)
            self._keep_infos()
            return completed
        except EnvError as exc:  # a closed buffer is not the env's fault
            raise_closed_slot(out, exc)
        finally:
            self.local_step_seconds += perf_counter() - start

    def _keep_infos(self) -> None:
        if self.keep_infos:
            group = self._group
            self._last_infos = KeptInfos(group.step_infos, group.reset_infos)

    def _await_reset(self, request: ResetRequest) -> None:
        out_observation, env_indices, seeds, options = request
        try:
            self._group.reset(out_observation, env_indices, 0, seeds, options)
            self._keep_infos()
        except EnvError as exc:
            raise_closed_slot({fields.OBSERVATION: out_observation}, exc)

    def _waiting_envs(self) -> list[int]:
        return self._group.waiting()

    def _call(
        self, name: str, args: tuple, kwargs: dict, indices: list[int]
    ) -> list[Any]:
        return self._group.call(name, args, kwargs, indices)

    def _apply(
        self,
        function: Callable[..., Any],
        args: tuple,
        kwargs: dict,
        indices: list[int],
    ) -> list[Any]:
        return self._group.apply(function, args, kwargs, indices)

    def _set_attr(self, name: str, values: list[Any], indices: list[int]) -> None:
        self._group.set_attr(name, values, indices)

    def _close(self) -> None:
        self._group.close()
