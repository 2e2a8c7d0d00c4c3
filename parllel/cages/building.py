"""Building one cage: serial or process, a layout chosen from a quick measurement."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Sequence
from typing import Any, TypedDict

from parllel._warnings import warn_at_caller
from parllel.cages.cage import Cage
from parllel.cages.layout import suggest_layout_for
from parllel.cages.process.cage import ProcessCage
from parllel.cages.serial import SerialCage
from parllel.cages.traj_info import TrajInfo
from parllel.errors import (
    ConfigError,
    MainGuardError,
    ParllelWarning,
    UnknownOptionError,
)

__all__ = ["PARALLEL_CHOICES", "build_cages"]

PARALLEL_CHOICES = ("auto", "process", "serial")


# ProcessCage parameters that are no process option (given by the caller of
# build_cages as its own arguments)
_NOT_OPTIONS = {
    "env_factory",
    "n_envs",
    "env_kwargs",
    *"""seed env_offset reset_mode
traj_info_type traj_info_kwargs keep_infos clip_actions probe""".split(),
}


class _CageOptions(TypedDict):
    """The arguments a SerialCage and a ProcessCage share (besides the envs)."""

    seed: int | Sequence[int] | None
    env_offset: int
    reset_mode: str
    traj_info_type: Callable[..., TrajInfo]
    traj_info_kwargs: dict[str, Any] | None
    keep_infos: bool
    clip_actions: bool
    probe: bool


def check_process_options(options: dict[str, Any]) -> None:
    """Refuse keywords that are no :class:`~parllel.cages.ProcessCage` option,
    whichever layout is chosen (a misspelt option must not wait for a machine
    where processes win to be noticed).

    Raises:
        UnknownOptionError: naming the option, the closest one, and all of them.
    """
    known = sorted(set(inspect.signature(ProcessCage).parameters) - _NOT_OPTIONS)
    for name in options:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            guess = f" (did you mean {close[0]!r}?)" if close else ""
            raise UnknownOptionError(
                f"unknown cage option {name!r}{guess}; the process-cage options "
                f"are: {', '.join(known)}"
            )


def build_cages(
    env_factory: Callable[..., Any],
    n_envs: int,
    env_kwargs: dict[str, Any] | None = None,
    *,
    parallel: str = "auto",
    seed: int | Sequence[int] | None = None,
    env_offset: int = 0,
    reset_mode: str = "auto",
    traj_info_type: Callable[..., TrajInfo] = TrajInfo,
    traj_info_kwargs: dict[str, Any] | None = None,
    keep_infos: bool = False,
    clip_actions: bool = True,
    probe: bool = True,
    **process_kwargs: Any,
) -> Cage:
    """One cage for ``n_envs`` envs: in worker processes, or serial.

    ``parallel="auto"`` times a few steps of one env and a synchronization
    with a helper process, and asks :func:`~parllel.cages.suggest_layout`
    whether processes can win on this machine (and with which layout); when
    workers cannot start (called from unguarded top-level code of the main
    script) it steps the envs serially, with a
    :class:`~parllel.errors.ParllelWarning`;
    ``"process"`` always uses a
    :class:`~parllel.cages.ProcessCage` (layout from ``process_kwargs``, or
    suggested, falling back to one worker per core); ``"serial"`` a
    :class:`~parllel.cages.SerialCage`. Same seed, same results either way.
    ``seed``: a master seed or one seed per env (``seeds.envs``; the same
    seeds, see :mod:`parllel.seeding`). The other arguments are those of
    :class:`~parllel.cages.SerialCage` and :class:`~parllel.cages.ProcessCage`
    (``process_kwargs``: the process cage's own).
    """
    if parallel not in PARALLEL_CHOICES:
        raise ConfigError(
            f"parallel must be one of {PARALLEL_CHOICES}, got {parallel!r}"
        )
    check_process_options(process_kwargs)
    common: _CageOptions = {
        "seed": seed,
        "env_offset": env_offset,
        "reset_mode": reset_mode,
        "traj_info_type": traj_info_type,
        "traj_info_kwargs": traj_info_kwargs,
        "keep_infos": keep_infos,
        "clip_actions": clip_actions,
        "probe": probe,
    }
    if parallel == "serial":
        return SerialCage(env_factory, n_envs, env_kwargs, **common)
    try:
        layout = None
        if not {"envs_per_worker", "n_workers"} & set(process_kwargs):
            layout = suggest_layout_for(
                env_factory, n_envs, env_kwargs, process_kwargs.get("start_method")
            )
        if parallel == "auto" and layout is None:
            return SerialCage(env_factory, n_envs, env_kwargs, **common)
        return ProcessCage(
            env_factory,
            n_envs,
            env_kwargs,
            **{**(layout or {}), **process_kwargs},
            **common,
        )
    except MainGuardError:
        if parallel != "auto":
            raise
    warn_at_caller(
        'parallel="auto" steps the envs in this process: worker processes '
        "cannot start from top-level code of the main script outside an "
        '`if __name__ == "__main__":` block (put the code under it to let '
        "processes step the envs)",
        ParllelWarning,
    )
    return SerialCage(env_factory, n_envs, env_kwargs, **common)
