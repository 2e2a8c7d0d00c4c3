"""Every fenced Python block in README.md, docs/*.md and examples/README.md runs.

Conventions for the Markdown files (the test enforces them):

- Blocks fenced with ```` ```python ```` (or ``py``) are code; other fences
  (``bash``, plain) are not run.
- **One namespace per file, blocks in order.** The blocks of one file run
  one after the other in a single fresh namespace, so a block may use names
  an earlier block of the same file defined (imports included). Each file
  starts from nothing: it imports what it uses. Each file runs in its own
  temporary working directory, so files a block writes go away.
- **Deliberately partial blocks** (an outline with ``...``, a signature, a
  fragment of a longer script) carry ``<!-- skip-test: REASON -->`` on the
  line right before the fence and are not run. The reason is required.
- **Complete scripts** (imports, an ``if __name__ == "__main__":`` guard,
  which process cages need under ``spawn``/``forkserver``) carry
  ``<!-- test-script: CALL -->`` on the line before the fence. The test saves
  the block as ``snippet.py`` in a temporary directory and runs
  ``from snippet import *; CALL`` in a fresh interpreter (e.g.
  ``main(total_steps=512)``: the real script with small settings). The block
  must have the ``__main__`` guard; it does not join the file's namespace.
- Any other ``<!-- skip...`` / ``<!-- test...`` comment before a fence is a
  typo and fails the test.
- Blocks run with torch on one thread (as the examples run their small
  networks), in the test's process.
- Blocks clean up what they start: no child process and no shared-memory
  segment may outlive a file (``tests/conftest.py`` checks the segments).
  Blocks stay fast (seconds per file): a block that trains is written with
  small settings, or is a script whose test call passes small ones.
"""

from __future__ import annotations

import ast
import gc
import inspect
import multiprocessing
import os
import re
import subprocess
import sys
import textwrap
import types
import warnings
from dataclasses import dataclass
from pathlib import Path

import cloudpickle
import pytest

try:
    import torch
except ImportError:  # the torch-free blocks still run
    torch = None

ROOT = Path(__file__).resolve().parents[2]
DOC_FILES = sorted(
    [ROOT / "README.md", ROOT / "examples" / "README.md", *(ROOT / "docs").glob("*.md")]
)
PYTHON_INFO = ("python", "py", "python3")
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
MARKER = re.compile(r"^\s*<!--\s*(?P<body>.*?)\s*-->\s*$")
SKIP = re.compile(r"^skip-test:\s*(?P<reason>\S.*)$")
SCRIPT = re.compile(r"^test-script:\s*(?P<call>\S.*)$")


@dataclass(frozen=True)
class Block:
    """One fenced Python block of a Markdown file."""

    path: Path
    line: int  # 1-based line of the opening fence
    code: str
    skip_reason: str | None = None
    script_call: str | None = None

    @property
    def where(self) -> str:
        return f"{shown(self.path)}:{self.line}"


def shown(path: Path) -> str:
    """``path`` relative to the repository when it is inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def parse_blocks(path: Path) -> list[Block]:
    """The Python blocks of ``path`` with their markers, in order."""
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        info = opening["info"].strip().split()
        if info and info[0].lower() in PYTHON_INFO:
            body = "\n".join(line[indent:] for line in lines[i + 1 : end])
            skip, call = marker_of(path, i, lines[i - 1] if i else "")
            blocks.append(Block(path, i + 1, textwrap.dedent(body), skip, call))
        i = end + 1
    return blocks


def marker_of(path: Path, index: int, previous: str) -> tuple[str | None, str | None]:
    """``(skip_reason, script_call)`` from the line before a fence."""
    comment = MARKER.match(previous)
    if not comment:
        return None, None
    body = comment["body"]
    if skip := SKIP.match(body):
        return skip["reason"], None
    if script := SCRIPT.match(body):
        return None, script["call"]
    if body.startswith(("skip", "test")):
        raise AssertionError(
            f"{shown(path)}:{index}: unknown marker {previous.strip()!r}; "
            "use '<!-- skip-test: REASON -->' or '<!-- test-script: CALL -->'"
        )
    return None, None


def run_script(block: Block, tmp_path: Path) -> None:
    """Run a complete-script block in a fresh interpreter with its test call."""
    guard = [
        node
        for node in ast.parse(block.code).body
        if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test)
    ]
    assert guard, f"{block.where}: a script needs an `if __name__ == '__main__':` guard"
    (tmp_path / "snippet.py").write_text(block.code)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    done = subprocess.run(
        [sys.executable, "-c", f"from snippet import *; {block.script_call}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, (
        f"{block.where} failed as a script:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    )


def run_file(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run every block of ``path`` (in order, one namespace); scripts apart."""
    blocks = parse_blocks(path)
    monkeypatch.chdir(tmp_path)
    # The namespace is a registered module, so dataclasses and pickling work;
    # cloudpickle sends its functions (env factories) to workers by value.
    module = types.ModuleType(f"docs_snippet_{path.stem.replace('-', '_')}")
    namespace = module.__dict__
    monkeypatch.setitem(sys.modules, module.__name__, module)
    cloudpickle.register_pickle_by_value(module)
    children_before = set(multiprocessing.active_children())
    threads = torch.get_num_threads() if torch is not None else None
    if torch is not None:
        torch.set_num_threads(1)  # tiny networks: as the examples run them
    try:
        for block in blocks:
            if block.skip_reason is not None:
                continue
            if block.script_call is not None:
                run_script(block, tmp_path)
                continue
            code = compile(block.code, block.where, "exec")
            with warnings.catch_warnings():
                # a deprecated parllel name used in the docs is a doc bug
                warnings.filterwarnings(
                    "error", category=DeprecationWarning, module=namespace["__name__"]
                )
                exec(code, namespace)  # noqa: S102
    finally:
        if torch is not None:
            torch.set_num_threads(threads)
        cloudpickle.unregister_pickle_by_value(module)
        namespace.clear()
        gc.collect()
    leaked = set(multiprocessing.active_children()) - children_before
    assert not leaked, f"{shown(path)} leaves child processes: {leaked}"


# files whose blocks start a local Ray cluster: slow, as the Ray tests are
# (tests/distributed/conftest.py)
SLOW_DOC_FILES = {ROOT / "docs" / "distributed.md"}


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "path",
    [
        pytest.param(path, marks=pytest.mark.slow) if path in SLOW_DOC_FILES else path
        for path in DOC_FILES
    ],
    ids=shown,
)
def test_python_blocks_run(path, tmp_path, monkeypatch):
    run_file(path, tmp_path, monkeypatch)


def test_every_skip_gives_a_reason():
    for path in DOC_FILES:
        for block in parse_blocks(path):
            if block.skip_reason is not None:
                assert len(block.skip_reason) >= 10, f"{block.where}: say why"


def test_readme_training_script_is_complete():
    """The README's training script: PPO on CartPole, envs in worker processes."""
    (script,) = [b for b in parse_blocks(ROOT / "README.md") if b.script_call]
    assert 'parallel="process"' in script.code
    assert "PPO(" in script.code and "CartPole" in script.code
    assert len(script.code.splitlines()) <= 60  # fits a screen


README_STEPS_PER_BATCH = 8 * 32  # the README script's n_envs x batch_T


def test_readme_script_default_runs_whole_batches_and_closes_its_logger():
    """Its default ``total_steps`` warns about nothing (no ParllelWarning), it
    seeds torch with the library's helpers, and it closes its logger (the final
    table is printed at close)."""
    (script,) = [b for b in parse_blocks(ROOT / "README.md") if b.script_call]
    namespace: dict = {"__name__": "readme_script"}  # the guard keeps main() unrun
    exec(compile(script.code, script.where, "exec"), namespace)  # noqa: S102
    default = inspect.signature(namespace["main"]).parameters["total_steps"].default
    assert default % README_STEPS_PER_BATCH == 0, default
    assert "seed_everything(" in script.code and "Seeds.from_master(" in script.code
    assert "logger.close()" in script.code


def _tables(output: str) -> list[dict[str, str]]:
    """The console tables of ``output``: one ``{key: value}`` per table."""
    tables: list[dict[str, str]] = []
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 2:
            continue
        if cells[0] == "step":
            tables.append({})
        tables[-1][cells[0]] = cells[1]
    return tables


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_readme_script_ends_with_a_table_and_repeats_with_its_seed(tmp_path):
    (script,) = [b for b in parse_blocks(ROOT / "README.md") if b.script_call]
    (tmp_path / "snippet.py").write_text(script.code)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    finals = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-W", "error::parllel.errors.ParllelWarning", "-c",
             f"from snippet import *; main(total_steps={3 * README_STEPS_PER_BATCH})"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-4000:]
        tables = _tables(done.stdout)
        assert tables and tables[-1]["step"] == str(3 * README_STEPS_PER_BATCH)
        finals.append(
            {k: v for k, v in tables[-1].items() if not k.startswith("time/")}
        )
    assert finals[0] == finals[1]  # same seed, same training


def test_markers_are_parsed(tmp_path):
    """The conventions above, on a small file: order, skip, script, typos."""
    doc = tmp_path / "doc.md"
    doc.write_text(
        textwrap.dedent(
            """\
            ```python
            x = 1
            ```
            <!-- skip-test: an outline with ellipses -->
            ```python
            def f(...) -> ...
            ```
            text
            <!-- test-script: main(n=1) -->
            ```py
            def main(n=2): ...
            if __name__ == "__main__":
                main()
            ```
            ```bash
            echo not python
            ```
              ```python
              y = x + 1
              ```
            """
        )
    )
    blocks = parse_blocks(doc)
    assert [b.line for b in blocks] == [1, 5, 10, 18]
    assert [b.skip_reason for b in blocks] == [
        None,
        "an outline with ellipses",
        None,
        None,
    ]
    assert blocks[2].script_call == "main(n=1)"
    assert blocks[3].code.strip() == "y = x + 1"
    doc.write_text("<!-- skip-tests -->\n```python\nx = 1\n```\n")
    with pytest.raises(AssertionError, match="unknown marker"):
        parse_blocks(doc)


EXAMPLE_SCRIPTS = sorted((ROOT / "examples").glob("*/train_*.py"))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_examples_readme_flags_exist():
    """examples/README.md: every example takes the first four flags it lists
    (``--quick``, ``--resume``, ``--total-steps``, ``--seed``), and every flag it
    names is an option of some example."""
    text = (ROOT / "examples" / "README.md").read_text()
    named = set(re.findall(r"`(--[a-z][a-z-]*)", text))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    helps = {}
    for script in EXAMPLE_SCRIPTS:
        done = subprocess.run(
            [sys.executable, str(script), "--help"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        helps[shown(script)] = done.stdout
    for name, help_text in helps.items():
        for flag in ("--quick", "--resume", "--total-steps", "--seed"):
            assert re.search(rf"{flag}\b", help_text), (name, flag)
    every = "\n".join(helps.values())
    missing = sorted(f for f in named if not re.search(rf"{f}\b", every))
    assert not missing, f"examples/README.md names flags no example has: {missing}"


# Modules of the pure-numpy layers whose docstring examples are complete
# (with ``np``, ``gym`` and ``fields`` given); they run as doctests. Examples
# elsewhere show calls on a script's objects (``cage``, ``sample_tree``).
DOCTEST_MODULES = [
    "parllel.agents.scripted",
    "parllel.agents.state",
    "parllel.arrays.array",
    "parllel.arrays.shared_memory",
    "parllel.cages.layout.cost_model",
    "parllel.cages.serial",
    "parllel.replays.ratio",
    "parllel.replays.sum_tree",
    "parllel.transforms.functional",
    "parllel.tree.array_dict",
    "parllel.tree.build",
    "parllel.tree.nodes",
    "parllel.tree.utils",
    "parllel.tree.writing",
]


@pytest.mark.parametrize("name", DOCTEST_MODULES)
def test_docstring_examples(name):
    import doctest
    import importlib

    import gymnasium as gym
    import numpy as np

    from parllel import fields

    module = importlib.import_module(name)
    result = doctest.testmod(
        module,
        extraglobs={"np": np, "gym": gym, "fields": fields},
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
        report=True,
    )
    assert result.attempted > 0, f"{name} has no docstring examples"
    assert result.failed == 0, f"{result.failed} docstring examples of {name} fail"
