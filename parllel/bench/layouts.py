"""The layouts the tool times: how the envs are spread over processes, which sampler runs.

``serial``, ``process-main``, ``process-workers``, ``process-rebalance`` and
``alternating``, each built with the public call a training script uses
(:func:`~parllel.cages.build_cage`,
:func:`~parllel.builders.build_alternating_cages`), so the recommended call
is exactly the measured one. The table of layouts: docs/logging.md
("Measure your env's best layout").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from parllel.builders import build_alternating_cages
from parllel.builders.cages import alternating_workers
from parllel.cages import Cage, ProcessLayout, build_cage
from parllel.cages.child_processes import usable_cores
from parllel.cages.layout.cost_model import suggest_layout
from parllel.cages.layout.process_layout import default_worker_count
from parllel.errors import ConfigError
from parllel.validation import check_at_least

__all__ = ["LAYOUT_NAMES", "Layout", "candidate_layouts", "suggested_layout"]

LAYOUT_NAMES = (
    "serial",
    "process-main",
    "process-workers",
    "process-rebalance",
    "alternating",
)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def _value(value: Any) -> str:
    """A keyword argument's value as Python source (strings in double quotes)."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


@dataclass(frozen=True)
class Layout:
    """One way to step ``n_envs`` envs: the cages to build and the sampler to run.

    Attributes:
        name: one of :data:`LAYOUT_NAMES`.
        n_envs: envs in all cages together.
        options: keyword arguments of the building call besides the factory
            and ``n_envs`` (``build_cage``' for every layout but
            ``alternating``: ``build_alternating_cages``' worker count per
            half, from 4 cores on).

    Example:
        >>> Layout("process-main", 64, (("parallel", "process"),
        ...        ("main_process_envs", 32), ("n_workers", 1))).describe()
        'process: main 32 + 1 worker'
    """

    name: str
    n_envs: int
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def kwargs(self) -> dict[str, Any]:
        """``options`` as a dict."""
        return dict(self.options)

    @property
    def alternating(self) -> bool:
        """True if the layout runs an AlternatingSampler over two cages."""
        return self.name == "alternating"

    @property
    def rebalances(self) -> bool:
        """True if the layout asks for load balancing (``rebalance=True``)."""
        return bool(self.kwargs.get("rebalance", False))

    @property
    def stepping(self) -> str:
        """``"serial"`` or ``"process"``: the choice :func:`~parllel.cages.suggest_layout` makes."""
        return "serial" if self.name == "serial" else "process"

    def describe(self) -> str:
        """A short human description (``process: main 32 + 1 worker``)."""
        kwargs = self.kwargs
        workers = _plural(int(kwargs.get("n_workers", 0)), "worker")
        main = kwargs.get("main_process_envs", 0)
        if self.name == "serial":
            return "serial"
        if self.name == "process-main":
            return f"process: main {main} + {workers}"
        if self.name == "process-workers":
            return f"process: {workers}"
        if self.name == "process-rebalance":
            return f"process: main {main} + {workers}, rebalance"
        half = self.n_envs // 2
        each = _plural(int(kwargs.get("n_workers", 1)), "worker")
        return f"alternating: {half} + {self.n_envs - half}, {each} each"

    def _call_kwargs(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The building call's own keyword arguments, and those of its
        :class:`~parllel.cages.ProcessLayout` (empty: no layout given)."""
        layout_keys = {field.name for field in fields(ProcessLayout)}
        own = {k: v for k, v in self.options if k not in layout_keys}
        return own, {k: v for k, v in self.options if k in layout_keys}

    def build(self, env_factory: Callable[..., Any]) -> list[Cage]:
        """Build the layout's cages (one, or the two halves of ``alternating``).

        The caller closes them.
        """
        own, layout = self._call_kwargs()
        if layout:
            own["layout"] = ProcessLayout(**layout)
        if self.alternating:
            return list(build_alternating_cages(env_factory, self.n_envs, **own))
        return [build_cage(env_factory, self.n_envs, **own)]

    def builder_call(self, factory_name: str) -> str:
        """The Python call that builds the cages, with ``factory_name`` as the factory."""
        own, layout = self._call_kwargs()
        arguments = [factory_name, f"n_envs={self.n_envs}"]
        arguments += [f"{key}={_value(value)}" for key, value in own.items()]
        if layout:
            split = ", ".join(f"{key}={_value(value)}" for key, value in layout.items())
            arguments.append(f"layout=ProcessLayout({split})")
        function = "build_alternating_cages" if self.alternating else "build_cage"
        return f"{function}({', '.join(arguments)})"

    def script_lines(self, factory_import: str, factory_name: str) -> list[str]:
        """The lines of a training script that build this layout and its sampler."""
        layout = ["ProcessLayout"] if self._call_kwargs()[1] else []
        if self.alternating:
            return [
                *factory_import.splitlines(),
                *[f"from parllel.cages import {name}" for name in layout],
                "from parllel.builders import build_alternating_cages",
                "from parllel.samplers import AlternatingSampler",
                f"cages = {self.builder_call(factory_name)}",
                "sampler = AlternatingSampler(cages, handler, sample_tree)",
            ]
        return [
            *factory_import.splitlines(),
            f"from parllel.cages import {', '.join([*layout, 'build_cage'])}",
            "from parllel.samplers import FeedForwardSampler",
            f"cage = {self.builder_call(factory_name)}",
            "sampler = FeedForwardSampler(cage, handler, sample_tree)",
        ]

    def to_dict(self) -> dict[str, Any]:
        """The layout as plain data (for JSON)."""
        return {
            "name": self.name,
            "n_envs": self.n_envs,
            "stepping": self.stepping,
            "description": self.describe(),
            "options": self.kwargs,
        }


def _main_share(n_envs: int, cores: int) -> ProcessLayout:
    """suggest_layout's split of ``n_envs`` between the main process and workers.

    With one core it cannot suggest processes; the split is then half in the
    main process and one worker.
    """
    split = suggest_layout(
        n_envs, step_seconds=1.0, cores=max(cores, 2), sync_seconds=0.0
    )
    assert split is not None  # n_envs >= 2 and 2 cores: processes always pay here
    return split


def candidate_layouts(
    n_envs: int, cores: int | None = None, names: Sequence[str] | None = None
) -> list[Layout]:
    """The layouts worth timing for ``n_envs`` envs on ``cores`` usable cores.

    A single env gets only ``serial`` and ``process-workers``: the other
    layouts need two envs at least.

    Args:
        n_envs: envs to step (>= 1).
        cores: usable cores (default: this process's).
        names: keep only these layouts (default: all of :data:`LAYOUT_NAMES`).

    Raises:
        ConfigError: ``n_envs < 1`` or an unknown layout name.
    """
    check_at_least("n_envs", n_envs)
    unknown = sorted(set(names or ()) - set(LAYOUT_NAMES))
    if unknown:
        raise ConfigError(
            f"unknown layouts {unknown}; choose from {list(LAYOUT_NAMES)}"
        )
    cores = usable_cores() if cores is None else cores
    layouts = [
        Layout("serial", n_envs, (("parallel", "serial"),)),
        Layout(
            "process-workers",
            n_envs,
            (
                ("parallel", "process"),
                ("n_workers", min(default_worker_count(cores), n_envs)),
            ),
        ),
    ]
    if n_envs >= 2:
        split = _main_share(n_envs, cores)
        main: tuple[tuple[str, Any], ...] = (
            ("parallel", "process"),
            ("main_process_envs", split.main_process_envs),
            ("n_workers", split.n_workers),
        )
        layouts.insert(1, Layout("process-main", n_envs, main))
        layouts.append(
            Layout("process-rebalance", n_envs, (*main, ("rebalance", True)))
        )
        layouts.append(Layout("alternating", n_envs, _alternating_options(cores)))
    if names is not None:
        layouts = [layout for layout in layouts if layout.name in names]
    return layouts


def suggested_layout(n_envs: int, suggestion: ProcessLayout | None) -> Layout:
    """The layout a :func:`~parllel.cages.suggest_layout` result stands for.

    None is ``serial``; a :class:`~parllel.cages.ProcessLayout` is
    ``process-main`` with that split (the same layout :func:`candidate_layouts` builds on this
    machine).
    """
    if suggestion is None:
        return Layout("serial", n_envs, (("parallel", "serial"),))
    options = (
        ("parallel", "process"),
        ("main_process_envs", suggestion.main_process_envs),
        ("n_workers", suggestion.n_workers),
    )
    return Layout("process-main", n_envs, options)


def _alternating_options(cores: int) -> tuple[tuple[str, Any], ...]:
    """build_alternating_cages' worker count per half on ``cores`` cores,
    spelled out from 4 cores on (one worker each below)."""
    workers = alternating_workers(cores)
    return (("n_workers", workers),) if workers > 1 else ()
