"""How a policy file names the function that builds its env, so a run
directory can be copied: by importable name, or by a path relative to it."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from parllel.errors import ConfigError

__all__ = ["factory_reference"]


def factory_reference(
    env_factory: str | Callable[..., Any] | None, directory: str | os.PathLike[str]
) -> str | None:
    """``env_factory`` as a policy file records it (``directory``: the one the
    file is written to).

    A function of an importable module (not the main script, nor a module
    beside it, which another process does not find on its path) becomes
    ``"module:function"``; one of the main script or of a ``.py`` file, and a
    ``"path/to/file.py:function"`` string, a path relative to ``directory``
    (``python -m parllel.enjoy`` resolves it from the run directory); a
    ``"module:function"`` string stays as given.

    Raises:
        ConfigError: a callable without a module-level name.
    """
    if env_factory is None:
        return None
    if callable(env_factory):
        module_name = getattr(env_factory, "__module__", None)
        name = getattr(env_factory, "__qualname__", "")
        module = sys.modules.get(module_name or "")
        file = getattr(module, "__file__", None)
        if module is None or not name.isidentifier() or file is None:
            raise ConfigError(
                f"env_factory {env_factory!r} has no importable name: give a "
                "module-level function, or 'module:function' / 'file.py:function'"
            )
        if module_name != "__main__" and not _beside_main(Path(file)):
            return f"{module_name}:{name}"
        env_factory = f"{file}:{name}"
    source, _, name = env_factory.rpartition(":")
    if not source.endswith(".py"):
        return env_factory
    path = os.path.relpath(Path(source).resolve(), Path(directory).resolve())
    return f"{Path(path).as_posix()}:{name}"


def _beside_main(file: Path) -> bool:
    """Whether ``file`` is a top-level module in the main script's folder."""
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    return main_file is not None and file.resolve().parent == (
        Path(main_file).resolve().parent
    )
