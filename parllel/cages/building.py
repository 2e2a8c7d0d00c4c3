"""Building one cage: serial or process, a layout chosen from a quick measurement."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from parllel._warnings import warn_at_caller
from parllel.cages.cage import Cage
from parllel.cages.child_processes import start_context, usable_cores
from parllel.cages.layout.cost_model import measure_step_seconds, suggest_layout
from parllel.cages.layout.process_layout import ProcessLayout
from parllel.cages.main_guard import unguarded_main_line
from parllel.cages.options import CageOptions
from parllel.cages.process.cage import ProcessCage
from parllel.cages.process.step_overhead import measure_step_overhead_seconds
from parllel.cages.serial import SerialCage
from parllel.errors import (
    ConfigError,
    EnvError,
    ParllelWarning,
    UnknownOptionError,
)

__all__ = [
    "PARALLEL_CHOICES",
    "build_cage",
    "check_process_options",
    "suggest_layout_for",
]

PARALLEL_CHOICES = ("auto", "process", "serial")


def check_process_options(process_kwargs: dict[str, Any]) -> None:
    """Refuse keywords that are no :class:`~parllel.cages.ProcessCage` option of
    its own, whichever layout is chosen (a misspelt option must not wait for a
    machine where processes win to be noticed).

    Raises:
        UnknownOptionError: naming the option, the closest one, and all of them.
    """
    parameters = inspect.signature(ProcessCage).parameters.values()
    known = sorted(
        p.name
        for p in parameters
        if p.kind is p.KEYWORD_ONLY and p.name not in ("layout", "options")
    )
    homes = {field.name: "options=CageOptions" for field in fields(CageOptions)}
    homes.update(
        {field.name: "layout=ProcessLayout" for field in fields(ProcessLayout)}
    )
    for name in process_kwargs:
        if name in known:
            continue
        if name in homes:  # a shared option or the split, given loose
            guess, target = "", name
        else:
            close = difflib.get_close_matches(name, [*known, *homes], n=1)
            guess = f" (did you mean {close[0]!r}?)" if close else ""
            target = close[0] if close else name
        home = homes.get(target)
        where = f"; it goes in {home}({target}=...)" if home else ""
        raise UnknownOptionError(
            f"unknown cage option {name!r}{guess}{where}; the process cage's own "
            f"options are: {', '.join(known)}"
        )


def build_cage(
    env_factory: Callable[..., Any],
    n_envs: int,
    env_kwargs: dict[str, Any] | None = None,
    *,
    parallel: str = "auto",
    options: CageOptions = CageOptions(),
    layout: ProcessLayout | None = None,
    **process_kwargs: Any,
) -> Cage:
    """One cage for ``n_envs`` envs: in worker processes, or serial.

    ``parallel="auto"`` times a few steps of one env and a synchronization
    with a helper process, and asks :func:`~parllel.cages.building.suggest_layout_for`
    whether processes can win on this machine (and with which layout);
    ``"process"`` always uses a :class:`~parllel.cages.ProcessCage`;
    ``"serial"`` a :class:`~parllel.cages.SerialCage`. Same seed, same
    results either way. ``options`` are every cage's
    (:class:`~parllel.cages.CageOptions`); ``layout`` and ``process_kwargs``
    the process cage's own. docs/cages.md, "Choosing a layout", says what
    happens when a layout is given, when the timing env cannot step, and when
    workers cannot start.
    """
    if parallel not in PARALLEL_CHOICES:
        raise ConfigError(
            f"parallel must be one of {PARALLEL_CHOICES}, got {parallel!r}"
        )
    check_process_options(process_kwargs)
    if parallel == "serial":
        return SerialCage(env_factory, n_envs, env_kwargs, options=options)
    if parallel == "auto" and _main_unguarded(process_kwargs.get("start_method")):
        warn_at_caller(
            'parallel="auto" steps the envs in this process: worker processes '
            "cannot start from top-level code of the main script outside an "
            '`if __name__ == "__main__":` block (put the code under it to let '
            "processes step the envs)",
            ParllelWarning,
        )
        return SerialCage(env_factory, n_envs, env_kwargs, options=options)
    if layout is None:
        layout = _measured_layout(
            env_factory, n_envs, env_kwargs, parallel, process_kwargs
        )
    if layout is None:
        return SerialCage(env_factory, n_envs, env_kwargs, options=options)
    return ProcessCage(
        env_factory,
        n_envs,
        env_kwargs,
        layout=layout,
        options=options,
        **process_kwargs,
    )


def _main_unguarded(start_method: str | None) -> bool:
    """True if worker processes started now would re-run unguarded top-level
    code of the main script (process cages refuse to start them)."""
    method = start_context(start_method).get_start_method()
    return unguarded_main_line(method) is not None


def _measured_layout(
    env_factory: Callable[..., Any],
    n_envs: int,
    env_kwargs: dict[str, Any] | None,
    parallel: str,
    process_kwargs: dict[str, Any],
) -> ProcessLayout | None:
    """:func:`suggest_layout_for`'s layout (None: serial when ``parallel`` is
    "auto"); when its timing env cannot step, a default layout ("process") or
    serial stepping ("auto"), with a warning."""
    try:
        layout = suggest_layout_for(
            env_factory, n_envs, env_kwargs, process_kwargs.get("start_method")
        )
    except EnvError as exc:
        fallback = "serial stepping" if parallel == "auto" else "a default layout"
        warn_at_caller(
            f"build_cage could not time the envs to choose a layout, so it uses "
            f"{fallback}: {exc} (an env that needs configuring before it can "
            "step, e.g. with set_attr, cannot be timed; pass "
            "layout=ProcessLayout(...) to choose one without timing)",
            ParllelWarning,
        )
        return None if parallel == "auto" else ProcessLayout()
    if parallel == "process" and layout is None:
        return ProcessLayout()
    return layout


def suggest_layout_for(
    env_factory: Callable[..., Any],
    n_envs: int,
    env_kwargs: dict[str, Any] | None = None,
    start_method: str | None = None,
) -> ProcessLayout | None:
    """:func:`~parllel.cages.layout.cost_model.suggest_layout` with both costs measured on this machine, now.

    Times env steps of one probe env
    (:func:`~parllel.cages.layout.cost_model.measure_step_seconds`) and, only when
    processes could win (two cores and two envs at least), what a
    synchronized step with a worker started with ``start_method`` costs
    beyond stepping the env here
    (:func:`~parllel.cages.process.step_overhead.measure_step_overhead_seconds`).

    Raises:
        EnvError: the probe env raised (see
            :func:`~parllel.cages.layout.cost_model.measure_step_seconds`).
    """
    step_seconds = measure_step_seconds(env_factory, env_kwargs)
    cores = usable_cores()
    sync_seconds = None
    if cores >= 2 and n_envs >= 2:
        sync_seconds = measure_step_overhead_seconds(start_method=start_method)
    return suggest_layout(n_envs, step_seconds, cores, sync_seconds)
