"""The example scripts' command lines: every Config field is a documented flag
(parllel.runners.cli itself is tested in tests/runners/test_cli.py)."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest

from parllel.runners.cli import apply_preset, parse_config

pytest.importorskip("tyro")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# training scripts (helper modules such as selfplay/tictactoe_players.py have no Config)
SCRIPTS = sorted(p for p in EXAMPLES.glob("*/*.py") if "class Config" in p.read_text())


def _load(script: Path, monkeypatch):
    name = f"example_{script.parent.name}_{script.stem}"
    spec = importlib.util.spec_from_file_location(name, script)
    module = importlib.util.module_from_spec(spec)
    # registered while the test runs: annotations are resolved through it
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


def _flag_names(config) -> list[str]:
    """The fields that are flags: those of ``config`` and of its nested dataclasses."""
    names = []
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        nested = dataclasses.is_dataclass(value)
        names += _flag_names(value) if nested else [field.name]
    return names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_example_config_field_is_a_documented_flag(script, capsys, monkeypatch):
    module = _load(script, monkeypatch)
    config = module.Config()
    names = _flag_names(config)
    apply_preset(config, module.QUICK)  # its keys name fields
    with pytest.raises(SystemExit):
        parse_config(module.Config, quick=module.QUICK, argv=["--help"])
    text = capsys.readouterr().out
    for name in names:
        assert f"--{name.replace('_', '-')}" in text, name
    # each field has a docstring (the next statement in the class body)
    (config_class,) = [
        node
        for node in ast.parse(script.read_text()).body
        if isinstance(node, ast.ClassDef) and node.name == "Config"
    ]
    body = config_class.body
    for index, node in enumerate(body):
        if isinstance(node, ast.AnnAssign):
            following = body[index + 1] if index + 1 < len(body) else None
            assert isinstance(following, ast.Expr) and isinstance(
                following.value, ast.Constant
            ), f"{node.target.id} has no docstring"
            assert following.value.value.split()[0] in text, node.target.id


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_default_and_quick_runs_are_whole_batches(script, monkeypatch):
    """So neither a default run nor ``--quick`` gets a ParllelWarning."""
    module = _load(script, monkeypatch)
    for config in (module.Config(), apply_preset(module.Config(), module.QUICK)):
        steps_per_batch = getattr(config, "n_envs", 1) * config.batch_T
        assert config.total_steps % steps_per_batch == 0, (config, steps_per_batch)
