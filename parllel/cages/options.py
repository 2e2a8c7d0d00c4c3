"""CageOptions: the options every cage takes, declared once."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from parllel.cages.traj_info import TrajInfo
from parllel.errors import ConfigError

__all__ = ["RESET_MODES", "CageOptions"]

RESET_MODES = ("auto", "wait", "next_step")


@dataclass(frozen=True)
class CageOptions:
    """How a cage runs its envs; every cage and :func:`~parllel.cages.build_cage`
    take one as ``options`` (docs/cages.md, "Options").

    Attributes:
        seed: None (unseeded), a master seed (env ``i``, by global index, gets
            ``Seeds.from_master(seed, ...).envs[i]``, :mod:`parllel.seeding`),
            or one seed per env of the cage (e.g. ``seeds.envs``). Each env
            gets its seed at its first reset.
        env_offset: global index of the cage's first env (seeds, TrajInfo
            indices), for setups with several cages.
        reset_mode: ``"auto"``, ``"wait"`` or ``"next_step"``.
        traj_info_type: TrajInfo class (or factory) for episode statistics.
        traj_info_kwargs: keyword arguments for it (e.g. ``{"discount": 0.99}``).
        keep_infos: keep the envs' info dicts in ``cage.last_infos``.
        clip_actions: clip ``Box`` actions to the space's bounds before the
            envs see them (the sample tree keeps the unclipped action).
        probe: take ``cage.example`` from one step of a separate probe env;
            False: zeros of the spaces and no env info.

    Example:
        >>> SerialCage(make_env, 4, options=CageOptions(seed=0, reset_mode="wait"))
    """

    seed: int | Sequence[int] | None = None
    env_offset: int = 0
    reset_mode: str = "auto"
    traj_info_type: Callable[..., TrajInfo] = TrajInfo
    traj_info_kwargs: Mapping[str, Any] = field(default_factory=dict)
    keep_infos: bool = False
    clip_actions: bool = True
    probe: bool = True

    def __post_init__(self) -> None:
        if self.reset_mode not in RESET_MODES:
            raise ConfigError(
                f"reset_mode must be one of {RESET_MODES}, got {self.reset_mode!r}"
            )
        if not isinstance(self.traj_info_kwargs, Mapping):
            raise ConfigError(
                "traj_info_kwargs must be a dict of keyword arguments for "
                f"traj_info_type, got {self.traj_info_kwargs!r}"
            )
