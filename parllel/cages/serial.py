"""SerialCage: every env stepped in the calling process."""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import Any

from parllel import fields
from parllel.cages.cage import Cage, ResetRequest
from parllel.cages.cage_checks import check_factory, raise_closed_slot
from parllel.cages.env_group import EnvGroup
from parllel.cages.env_info import KeptInfos
from parllel.cages.options import CageOptions
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
        options: seed, reset mode, episode statistics, ... (:class:`CageOptions`).

    Example:
        >>> make_env = lambda: gym.make("CartPole-v1")
        >>> cage = SerialCage(make_env, n_envs=4, options=CageOptions(seed=0))
        >>> cage.example[fields.OBSERVATION].shape
        (4,)
    """

    def __init__(
        self,
        env_factory: Callable[..., Any],
        n_envs: int = 1,
        env_kwargs: dict[str, Any] | None = None,
        options: CageOptions = CageOptions(),
    ) -> None:
        super().__init__(env_factory, n_envs, env_kwargs, options)
        check_factory(env_factory)
        self._group = EnvGroup(
            env_factory, self.env_kwargs, self.env_indices, self.env_seeds, options
        )
        try:
            group = self._group
            example = (
                group.example_step() if options.probe else spaces_example(group.spaces)
            )
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
