"""Every install hint installs this project, with an extra that exists.

parllel is unreleased and installs from its checkout; ``parllel`` on the public
package index is another project. So a hint is ``pip install -e ".[EXTRAS]"``
(run in the checkout), possibly naming the distribution ``parllel-rl[EXTRAS]``,
and never ``pip install parllel`` or ``parllel[EXTRAS]``. The runtime messages
build their hint with :func:`parllel.errors.base.install_hint`; the docs, the
README and the examples write it out.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib import metadata
from pathlib import Path

import pytest

import parllel
from parllel.errors.base import install_hint

tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS = set(PYPROJECT["project"]["optional-dependencies"])

# pip install -e ".[a,b]" (quotes: none, single or double)
EDITABLE = re.compile(r"""pip install -e ["']?\.\[([^\]]*)\]""")
# the distribution name with extras: parllel-rl[a,b]
DISTRIBUTION = re.compile(r"parllel-rl\[([^\]]*)\]")
# what installs someone else's package (parllel[...], not parllel-rl[...]), or
# nothing (a pip install by name: parllel is unreleased)
FOREIGN = re.compile(r"""(?<![\w-])parllel\[|pip install(\s+-\S+)*\s+["']?parllel""")
# any pip install with extras: what comes before the "[" and the flags
WITH_EXTRAS = re.compile(r"""pip install((?:\s+-\S+)*)\s+["']?([\w.-]*)\[""")


def flat(text: str) -> str:
    """``text`` with its line breaks and indents as single spaces (a hint
    wrapped over two lines reads as one)."""
    return " ".join(text.split())


def extras_in(text: str) -> list[set[str]]:
    """The extras each hint in ``text`` names."""
    return [
        {name.strip() for name in match.group(1).split(",")}
        for pattern in (EDITABLE, DISTRIBUTION)
        for match in pattern.finditer(flat(text))
    ]


def check_hints(where: str, text: str) -> None:
    """Every hint in ``text`` installs this project with extras that exist."""
    text = flat(text)
    foreign = [m.group(0) for m in FOREIGN.finditer(text)]
    assert not foreign, f"{where}: {foreign} does not install this project"
    for match in WITH_EXTRAS.finditer(text):  # the editable install of the checkout
        flags, target = match.group(1).split(), match.group(2)
        assert "-e" in flags and target == ".", f"{where}: {match.group(0)}"
    for extras in extras_in(text):
        assert extras and extras <= EXTRAS, f"{where}: unknown extra {extras - EXTRAS}"


def documents() -> list[Path]:
    """The docs, the README and the examples (their text and docstrings)."""
    return sorted(
        [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
        + [*(ROOT / "examples").rglob("*.md"), *(ROOT / "examples").rglob("*.py")]
        + [*(ROOT / "benchmarks").rglob("*.py")]
    )


def message_strings() -> list[tuple[str, str]]:
    """``(file:line, text)`` of every string constant in parllel/: messages,
    f-string parts, docstrings (adjacent literals joined, as Python does)."""
    found = []
    for path in sorted((ROOT / "parllel").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                found.append((where, node.value))
    return found


def install_hint_calls() -> list[tuple[str, list[str]]]:
    """``(file:line, extras)`` of every ``install_hint(...)`` call in parllel/."""
    calls = []
    for path in sorted((ROOT / "parllel").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "install_hint"
            ):
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                assert all(
                    isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                    for arg in node.args
                ), f"{where}: install_hint takes the extras' names as literals"
                calls.append((where, [arg.value for arg in node.args]))
    return calls


def test_the_distribution_is_named_parllel_rl_and_installed_so():
    assert PYPROJECT["project"]["name"] == parllel.DISTRIBUTION == "parllel-rl"
    assert metadata.version(parllel.DISTRIBUTION) == parllel.__version__
    for extra, specs in PYPROJECT["project"]["optional-dependencies"].items():
        for spec in specs:
            assert not FOREIGN.search(spec), f"extra {extra!r} requires {spec!r}"


def test_the_hint_installs_this_project():
    hint = install_hint("torch", "logging")
    assert 'pip install -e ".[torch,logging]"' in hint
    assert "parllel-rl[torch,logging]" in hint
    check_hints("install_hint", hint)
    assert extras_in(hint) == [{"torch", "logging"}] * 2


def test_every_runtime_message_builds_its_hint_with_install_hint():
    calls = install_hint_calls()
    assert len(calls) >= 10, calls  # the messages of the optional layers
    for where, extras in calls:
        assert extras and set(extras) <= EXTRAS, f"{where}: {extras}"
    helper = (ROOT / "parllel" / "errors" / "base.py").relative_to(ROOT)
    for where, text in message_strings():
        if where.startswith(f"{helper}:"):  # the template: {names}
            assert not FOREIGN.search(flat(text)), where
            continue
        check_hints(where, text)  # docstrings that write a hint out


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_install_hint_in_the_docs_installs_this_project(path):
    check_hints(str(path.relative_to(ROOT)), path.read_text())


def test_the_check_catches_what_it_is_for():
    for wrong in (
        "pip install 'parllel[mujoco]'",
        'pip install "parllel[ray]"',
        "pip install parllel",
        "pip install -U parllel-rl",
        'pip install -e ".[no_such_extra]"',
        'pip install ".[plot]"',
    ):
        with pytest.raises(AssertionError):
            check_hints("example", wrong)
    check_hints("example", 'pip install -e\n    ".[torch,plot]" (parllel-rl[plot])')
