"""Run imports and calls in a process where some installed packages are refused.

Used by ``tests/integration/test_extras.py``: ``python import_guard.py SPEC``
with ``SPEC`` a JSON object:

- ``blocked``: top-level module names to refuse (installed packages that are
  neither core dependencies nor in the extras under test);
- ``parllel_dir``: the ``parllel`` package directory that must be imported;
- ``modules``: module names to import, in order;
- ``calls``: ``[name, code]`` pairs run after the imports (``tmp`` is a
  ``pathlib.Path`` to a scratch directory in their namespace).

Every meta-path finder is wrapped so that it does not find a refused name (as
if the package were not installed: ``import`` raises ``ModuleNotFoundError``,
``importlib.util.find_spec`` returns None), and a finder placed first records
each refusal: the module asked for, and the innermost frame of parllel code on
the stack at that moment, with whether that frame runs a module body (an
import-time need) or a function (a lazy import). The last
stdout line is ``RESULT: <json>``: one entry per step (each import, each call)
with ``ok``, the error's type and message, and the refusals during the step.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import tempfile
import traceback
import types
from pathlib import Path


class RefusingFinder:
    """First on ``sys.meta_path``: record who asks for a blocked name."""

    def __init__(self, blocked: set[str], parllel_dir: str) -> None:
        self.blocked = blocked
        self.parllel_dir = os.path.realpath(parllel_dir) + os.sep
        self.refusals: list[dict] = []

    def is_blocked(self, fullname: str) -> bool:
        return fullname.partition(".")[0] in self.blocked

    def find_spec(self, fullname, path=None, target=None):
        if not self.is_blocked(fullname):
            return None
        frame = sys._getframe(1)
        importer = None
        while frame is not None:
            filename = os.path.realpath(frame.f_code.co_filename)
            if filename.startswith(self.parllel_dir):
                importer = {
                    "file": filename[len(self.parllel_dir) :],
                    "line": frame.f_lineno,
                    "function": frame.f_code.co_name,
                    "lazy": frame.f_code.co_name != "<module>",
                }
                break
            frame = frame.f_back
        self.refusals.append({"name": fullname, "parllel_frame": importer})
        return None


class HidingFinder:
    """Wrap a finder so that it does not find blocked names (as if not installed).

    ``import`` then raises the usual ``ModuleNotFoundError`` and
    ``importlib.util.find_spec`` returns None, which libraries probing for
    optional packages expect.
    """

    def __init__(self, finder, refusing: RefusingFinder) -> None:
        self._finder = finder
        self._refusing = refusing

    def find_spec(self, fullname, path=None, target=None):
        if self._refusing.is_blocked(fullname):
            return None
        find_spec = getattr(self._finder, "find_spec", None)
        return None if find_spec is None else find_spec(fullname, path, target)

    def __getattr__(self, name):
        return getattr(self._finder, name)


def run_step(finder: RefusingFinder, kind: str, name: str, action) -> dict:
    start = len(finder.refusals)
    step = {"kind": kind, "name": name, "ok": True}
    try:
        action()
    except BaseException as error:  # noqa: BLE001 - reported to the parent
        step.update(
            ok=False,
            error=type(error).__name__,
            message=str(error),
            traceback=traceback.format_exc(limit=-8),
        )
    step["refusals"] = finder.refusals[start:]
    return step


def main(spec: dict) -> dict:
    # modules imported before the finder (by site, .pth files) cannot be refused
    blocked = set(spec["blocked"]) - {name.partition(".")[0] for name in sys.modules}
    finder = RefusingFinder(blocked, spec["parllel_dir"])
    sys.meta_path[:] = [finder] + [HidingFinder(f, finder) for f in sys.meta_path]
    steps = []
    import parllel

    if not os.path.realpath(parllel.__file__).startswith(
        os.path.realpath(spec["parllel_dir"])
    ):
        raise RuntimeError(f"imported {parllel.__file__}, not {spec['parllel_dir']}")
    for module in spec["modules"]:
        steps.append(
            run_step(
                finder, "import", module, lambda m=module: importlib.import_module(m)
            )
        )
    with tempfile.TemporaryDirectory() as scratch:
        for index, (name, code) in enumerate(spec["calls"]):
            tmp = Path(scratch) / str(index)
            tmp.mkdir()
            module = types.ModuleType(f"import_guard_call_{index}")
            module.tmp = tmp
            sys.modules[module.__name__] = module  # for dataclasses, tyro
            steps.append(
                run_step(
                    finder, "call", name, lambda c=code, m=module: exec(c, vars(m))
                )
            )
    return {"steps": steps}


if __name__ == "__main__":
    result = main(json.loads(sys.argv[1]))
    sys.stdout.flush()
    print("RESULT: " + json.dumps(result))
