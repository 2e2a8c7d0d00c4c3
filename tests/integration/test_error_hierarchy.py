"""Every error and warning class of parllel lives in :mod:`parllel.errors`."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import warnings
from pathlib import Path

import pytest

import parllel
import parllel.errors
from parllel.errors import ParllelError, ParllelWarning

# exceptions used as control flow inside one module, caught there and never
# raised to the user (a worker's parent is gone, a process died or timed out,
# envs cannot move): not part of the error hierarchy
INTERNAL_SIGNALS = {
    "_Restarted",
    "ProcessDied",
    "ParentGone",
    "WorkerLost",
    "WorkerTimeout",
    "EnvsNotMovable",
}

OPTIONAL_IMPORTS = ("envpool", "stable_baselines3", "ray", "wandb", "ale_py", "cv2")


def _modules() -> list[object]:
    modules = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for info in pkgutil.walk_packages(parllel.__path__, prefix="parllel."):
            try:
                modules.append(importlib.import_module(info.name))
            except ImportError as exc:  # a module of an extra not installed here
                if getattr(exc, "name", None) and exc.name.startswith(OPTIONAL_IMPORTS):
                    continue
                raise
    return modules


def _exception_classes() -> dict[str, type[BaseException]]:
    """Every BaseException subclass a parllel module defines, by qualified name."""
    found: dict[str, type[BaseException]] = {}
    for module in _modules():
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__.startswith("parllel")
            ):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


CLASSES = _exception_classes()


def test_every_error_and_warning_lives_in_parllel_errors() -> None:
    outside = sorted(
        name
        for name, cls in CLASSES.items()
        if not cls.__module__.startswith("parllel.errors")
        and cls.__name__ not in INTERNAL_SIGNALS
    )
    assert not outside, f"define these in parllel.errors: {outside}"


def test_every_warning_derives_from_parllel_warning() -> None:
    wrong = sorted(
        name
        for name, cls in CLASSES.items()
        if issubclass(cls, Warning) and not issubclass(cls, ParllelWarning)
    )
    assert not wrong, f"derive these from ParllelWarning: {wrong}"


def test_every_error_derives_from_parllel_error() -> None:
    wrong = sorted(
        name
        for name, cls in CLASSES.items()
        if not issubclass(cls, Warning)
        and not issubclass(cls, ParllelError)
        and cls.__name__ not in INTERNAL_SIGNALS
    )
    assert not wrong, f"derive these from ParllelError: {wrong}"
    assert not any(issubclass(cls, ParllelError) for cls in _warning_classes())


def _warning_classes() -> list[type[BaseException]]:
    return [cls for cls in CLASSES.values() if issubclass(cls, Warning)]


@pytest.mark.parametrize("name", parllel.errors.__all__)
def test_every_error_imports_from_parllel_errors(name: str) -> None:
    cls = getattr(parllel.errors, name)
    assert issubclass(cls, (ParllelError, ParllelWarning))
    # tracebacks and pickles name the public path, whichever module defines it
    assert cls.__module__ == "parllel.errors"


def test_every_listed_error_is_used_outside_parllel_errors() -> None:
    # a class no module raises, derives from or catches is surface without a use
    # (issue 40 folded such one-purpose classes into their parents)
    root = Path(parllel.__file__).parent
    source = "\n".join(
        path.read_text() for path in root.rglob("*.py") if path.parent.name != "errors"
    )
    unused = [
        name for name in parllel.errors.__all__ if not re.search(rf"\b{name}\b", source)
    ]
    assert not unused, f"no module outside parllel.errors uses {unused}"
