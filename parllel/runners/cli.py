"""The command line of a training script: its flags from its ``Config``
dataclass, and its start (:func:`run_main`).

Every field becomes a flag (``batch_T`` is ``--batch-T``) with the field's
docstring as its help, parsed by ``tyro`` (the ``cli`` extra); nested
dataclasses add their fields without a prefix. ``--quick`` applies the
script's preset and ``--resume RUN`` continues a run. :func:`run_main`
prints a ``ConfigError`` as one line (status 2); how training ended is
:mod:`parllel.runners.outcome`'s. See docs/training.md ("The command line")::

    @dataclasses.dataclass
    class Config:
        seed: int = 0
        \"\"\"master seed\"\"\"

    if __name__ == "__main__":
        run_main(main, parse_config(Config, quick={"seed": 1}, description=__doc__))
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from signal import SIGINT
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, Union

from parllel._warnings import warn_at_caller
from parllel.errors import (
    ConfigError,
    EnvError,
    MissingDependencyError,
    ParllelWarning,
    RunDirectoryError,
)
from parllel.errors.base import install_hint
from parllel.runners.run_directory import (
    RunDirectory,
    created_count,
    remove_unstarted,
)

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

ConfigT = TypeVar("ConfigT", bound="DataclassInstance")  # a dataclass instance
ResultT = TypeVar("ResultT")

QUICK_HELP = "a tiny run for smoke tests (the script's quick preset)"
RESUME_HELP = (
    "continue the run in this directory from its newest checkpoint; its "
    "config.json gives the defaults, flags given explicitly override them"
)


def _tyro() -> Any:
    try:
        import tyro
    except ImportError as error:
        raise MissingDependencyError(
            "the example command line needs the 'tyro' package: pip install tyro, "
            f"or {install_hint('cli')}"
        ) from error
    return tyro


def _check_dataclass(config_type: type) -> None:
    if not (dataclasses.is_dataclass(config_type) and isinstance(config_type, type)):
        raise ConfigError(f"expected a dataclass type, got {config_type!r}")


def _from_json(value: Any, hint: Any, base: Any = None) -> Any:
    """Undo what JSON did to a value of type ``hint`` (tuples became lists,
    nested dataclasses dicts). A nested dataclass's fields the JSON lacks
    keep their value in ``base`` (the script's default for it), if given."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            return value
        hints = typing.get_type_hints(hint)
        names = {field.name for field in dataclasses.fields(hint)}
        values = {
            name: _from_json(item, hints[name], getattr(base, name, None))
            for name, item in value.items()
            if name in names
        }
        if isinstance(base, hint):
            return dataclasses.replace(base, **values)
        return hint(**values)
    origin = typing.get_origin(hint)
    if origin is tuple and isinstance(value, list):
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_from_json(item, args[0]) for item in value)
        if args and len(args) == len(value):
            return tuple(_from_json(item, arg) for item, arg in zip(value, args))
        return tuple(value)
    if origin in (Union, types.UnionType):
        for arg in typing.get_args(hint):
            if typing.get_origin(arg) is tuple and isinstance(value, list):
                return _from_json(value, arg)
    return value


def config_from_run(
    config_type: type[ConfigT], run_dir: str | Path, base: ConfigT | None = None
) -> ConfigT:
    """The config a run was started with, read from its ``config.json``.

    Fields the file lacks keep their value in ``base`` (default: the
    dataclass defaults); keys the dataclass no longer has are skipped with a
    warning. Lists are turned back into tuples where the field is a tuple.

    Raises:
        RunDirectoryError: if ``run_dir`` is not a run directory.
        ConfigError: if ``config.json`` does not hold a JSON object.
    """
    _check_dataclass(config_type)
    run = RunDirectory.open(run_dir)
    saved = run.read_config()
    if not isinstance(saved, dict):
        raise ConfigError(f"{run.config_path} does not hold a config object")
    hints = typing.get_type_hints(config_type)
    names = {field.name for field in dataclasses.fields(config_type)}
    unknown = sorted(set(saved) - names)
    if unknown:
        warn_at_caller(
            f"{run.config_path} has keys {unknown} that {config_type.__name__} "
            "does not have; they are ignored",
            ParllelWarning,
        )
    base = config_type() if base is None else base
    values = {
        name: _from_json(value, hints[name], getattr(base, name))
        for name, value in saved.items()
        if name in names
    }
    return dataclasses.replace(base, **values)


def _field_paths(config: Any, prefix: tuple[str, ...] = ()) -> dict[str, list]:
    """Each field name of ``config`` and its nested dataclasses -> the paths to it."""
    paths: dict[str, list[tuple[str, ...]]] = {}
    for field in dataclasses.fields(config):
        path = (*prefix, field.name)
        paths.setdefault(field.name, []).append(path)
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            for name, more in _field_paths(value, path).items():
                paths.setdefault(name, []).extend(more)
    return paths


def _replace_at(config: Any, path: Sequence[str], value: Any) -> Any:
    name, *rest = path
    if rest:
        value = _replace_at(getattr(config, name), rest, value)
    return dataclasses.replace(config, **{name: value})


def apply_preset(config: ConfigT, preset: Mapping[str, Any]) -> ConfigT:
    """``config`` with the values of ``preset`` (e.g. a script's ``--quick`` one).

    A key names a field as its flag does: a field of ``config`` or of a
    nested dataclass in it (e.g. the embedded
    :class:`~parllel.runners.RunSettings`) by its own name, without a prefix.

    Raises:
        ConfigError: if a key names no field, or names fields at two places.
    """
    _check_dataclass(type(config))
    paths = _field_paths(config)
    unknown = sorted(key for key in preset if key not in paths)
    if unknown:
        raise ConfigError(
            f"preset sets unknown fields {unknown}: use the fields' names, "
            f"those of nested settings without a prefix ({sorted(paths)})"
        )
    for key, value in preset.items():
        found = paths[key]
        if len(found) > 1:
            places = [".".join(path) for path in found]
            raise ConfigError(
                f"preset key {key!r} names fields at {places}: rename one of them "
                "(their flags would clash too)"
            )
        config = _replace_at(config, found[0], value)
    return config


def _cli_type(config_type: type) -> type:
    """``config_type`` plus the ``--quick`` and ``--resume`` flags."""
    tyro = _tyro()
    return dataclasses.make_dataclass(
        config_type.__name__,
        [
            ("quick", Annotated[bool, tyro.conf.arg(help=QUICK_HELP)], False),
            (
                "resume",
                Annotated[
                    Union[str, None],  # noqa: UP007 - evaluated at runtime by tyro
                    tyro.conf.arg(help=RESUME_HELP, metavar="RUN"),
                ],
                None,
            ),
        ],
        bases=(config_type,),
    )


def parse_config(
    config_type: type[ConfigT],
    *,
    quick: Mapping[str, Any] | None = None,
    description: str | None = None,
    argv: Sequence[str] | None = None,
) -> tuple[ConfigT, str | None]:
    """Build the script's config from the command line (see the module docstring).

    Args:
        config_type: the script's ``Config`` dataclass (every field has a
            default).
        quick: field values of the ``--quick`` preset (:func:`apply_preset`:
            nested settings' fields by their own names).
        description: the ``--help`` text (e.g. the script's ``__doc__``).
        argv: the arguments (default ``sys.argv[1:]``).

    Returns:
        The config, and the run directory to resume (None for a new run).

    Raises:
        SystemExit: on ``--help`` or a bad flag (tyro prints why), and when
            ``--resume`` names no run directory (the error is printed, without
            a traceback; status 2, as for any bad flag).
    """
    _check_dataclass(config_type)
    tyro = _tyro()
    argv = list(sys.argv[1:] if argv is None else argv)
    names = {field.name for field in dataclasses.fields(config_type)}
    apply_preset(config_type(), quick or {})  # a bad key fails with or without --quick
    # --resume and --quick choose the defaults the other flags override
    early = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    early.add_argument("--resume")
    early.add_argument("--quick", action="store_true")
    known, _ = early.parse_known_args(argv)
    defaults = config_type()
    if known.resume:
        try:
            defaults = config_from_run(config_type, known.resume, defaults)
        except (RunDirectoryError, ConfigError, ValueError) as error:  # bad JSON too
            print(f"error: --resume {known.resume}: {error}", file=sys.stderr)
            raise SystemExit(2) from None
    if known.quick and quick:
        defaults = apply_preset(defaults, quick)
    cli_type = _cli_type(config_type)
    values = {name: getattr(defaults, name) for name in names}
    parsed = tyro.cli(
        cli_type,
        args=argv,
        default=cli_type(**values, quick=known.quick, resume=known.resume),
        description=description,
        config=(tyro.conf.OmitArgPrefixes,),  # a nested dataclass's flags unprefixed
    )
    config = config_type(**{name: getattr(parsed, name) for name in names})
    return config, parsed.resume


def run_main(
    main: Callable[[ConfigT, str | None], ResultT],
    parsed: tuple[ConfigT, str | None],
) -> ResultT:
    """Call a script's ``main(config, resume)`` with :func:`parse_config`'s result.

    A configuration mistake (a :class:`~parllel.errors.ConfigError`, e.g.
    flags that do not go together) is printed as one line ``error: ...`` on
    stderr, without a traceback, and exits with status 2, as a bad flag does.

    An env id that gymnasium does not know (a typo'd ``--env-id``: an
    :class:`~parllel.errors.EnvError` caused by gymnasium's
    ``UnregisteredEnv`` or ``DeprecatedEnv``) is such a mistake too: one
    line naming the id's error and the flag to check, status 2; so is an
    env factory's own ``ConfigError`` (an env the script cannot train).

    A Ctrl-C that reaches it (one outside training: while the script
    imports, builds its cages or compiles, before the runner handles
    interrupts) is one line too, with status 130, as a program killed by
    SIGINT; during training the runner and
    :func:`~parllel.runners.outcome.report_outcome` handle it.

    A run directory the script created but wrote nothing to before it
    stopped (any error before training) is removed.

    Raises:
        SystemExit: status 2 on a ``ConfigError`` or an unknown env id,
            130 on a ``KeyboardInterrupt``.
    """
    mark = created_count()
    try:
        return _call_main(main, parsed)
    except BaseException:
        remove_unstarted(mark)
        raise


def _call_main(
    main: Callable[[ConfigT, str | None], ResultT],
    parsed: tuple[ConfigT, str | None],
) -> ResultT:
    """``main(*parsed)``, a configuration mistake or an early Ctrl-C as one line."""
    try:
        return main(*parsed)
    except KeyboardInterrupt:
        print(
            "interrupted (Ctrl-C) outside training, before it started or after it "
            "ended: no checkpoint written by this interruption",
            file=sys.stderr,
        )
        raise SystemExit(128 + SIGINT) from None
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    except EnvError as error:
        if isinstance(error.__cause__, ConfigError):  # the env factory refused
            print(f"error: {error.__cause__}", file=sys.stderr)
            raise SystemExit(2) from None
        if not _is_unknown_env_id(error.__cause__):
            raise
        print(f"error: {error.__cause__} (check the env id: --env-id)", file=sys.stderr)
        raise SystemExit(2) from None


def _is_unknown_env_id(cause: BaseException | None) -> bool:
    """Whether ``cause`` is gymnasium's error for an id it cannot make."""
    try:
        from gymnasium import error as gym_error
    except ImportError:  # pragma: no cover - gymnasium is a core dependency
        return False
    return isinstance(cause, (gym_error.UnregisteredEnv, gym_error.DeprecatedEnv))
