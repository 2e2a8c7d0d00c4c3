"""parllel.runners.cli: every Config field a flag, --quick, --resume restores
the run's config.json and explicit flags override it; the resume command."""

from __future__ import annotations

import dataclasses
import shlex
import sys
from pathlib import Path
from typing import Literal

import pytest

from parllel.errors import ConfigError, ParllelWarning, RunDirectoryError
from parllel.runners import RunDirectory
from parllel.runners.cli import (
    apply_preset,
    config_from_run,
    parse_config,
    run_main,
)
from parllel.runners.outcome import resume_command
from parllel.runners.run_directory import RUNS_FILE

pytest.importorskip("tyro")


@dataclasses.dataclass
class Config:
    seed: int = 0
    """master seed"""
    batch_T: int = 32
    """env steps per env per batch"""
    total_steps: int = 100_000
    """env steps to train for"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layer widths"""
    parallel: Literal["process", "serial", "auto"] = "process"
    """where envs step"""
    rebalance: bool = False
    """move envs between processes"""
    target_return: float | None = 475.0
    """stop once reached"""


QUICK = {"total_steps": 512, "hidden_sizes": (8,)}


def _run_dir(tmp_path, config) -> Path:
    return RunDirectory.create(tmp_path, "run", config=config).path


def test_defaults_flags_and_quick():
    assert parse_config(Config, argv=[]) == (Config(), None)
    config, resume = parse_config(
        Config,
        quick=QUICK,
        argv=["--quick", "--batch-T", "8", "--parallel", "serial", "--rebalance"],
    )
    assert resume is None
    assert config == Config(
        batch_T=8,
        total_steps=512,
        hidden_sizes=(8,),
        parallel="serial",
        rebalance=True,
    )
    # an explicit flag beats the quick preset
    config, _ = parse_config(
        Config, quick=QUICK, argv=["--total-steps", "7", "--quick"]
    )
    assert config.total_steps == 7


def test_resume_restores_the_runs_config_and_flags_override_it(tmp_path):
    saved = Config(seed=3, batch_T=16, hidden_sizes=(5, 6), target_return=None)
    run_dir = _run_dir(tmp_path, saved)
    config, resume = parse_config(Config, argv=["--resume", str(run_dir)])
    assert resume == str(run_dir)
    assert config == saved  # tuples are tuples again, None stays None
    config, _ = parse_config(
        Config, argv=["--total-steps", "200000", f"--resume={run_dir}", "--seed", "4"]
    )
    assert config == dataclasses.replace(saved, total_steps=200_000, seed=4)


def test_quick_applies_on_top_of_the_resumed_config(tmp_path):
    run_dir = _run_dir(tmp_path, Config(seed=9, total_steps=512, hidden_sizes=(8,)))
    config, _ = parse_config(
        Config, quick=QUICK, argv=["--quick", "--resume", str(run_dir)]
    )
    assert config == Config(seed=9, total_steps=512, hidden_sizes=(8,))


def test_resume_of_a_missing_run_is_a_one_line_error_without_traceback(
    tmp_path, capsys
):
    missing = tmp_path / "nope"
    with pytest.raises(SystemExit) as exit_info:
        parse_config(Config, argv=["--resume", str(missing)])
    assert exit_info.value.code == 2  # as for any bad flag
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"error: --resume {missing}: {missing} does not exist (expected a run "
        "directory such as runs/<name>-<timestamp>)"
    ]


def test_run_main_prints_a_config_mistake_as_one_line_with_status_2(capsys):
    def main(config: Config, resume: str | None) -> int:
        if config.batch_T > 16:
            raise ConfigError("batch_T must be <= 16: pass --batch-T 16")
        return config.batch_T

    assert run_main(main, parse_config(Config, argv=["--batch-T", "8"])) == 8
    with pytest.raises(SystemExit) as exit_info:
        run_main(main, parse_config(Config, argv=[]))
    assert exit_info.value.code == 2  # as for a bad flag
    assert capsys.readouterr().err.splitlines() == [
        "error: batch_T must be <= 16: pass --batch-T 16"
    ]


def test_resume_of_a_directory_that_is_no_run_names_what_is_missing(tmp_path, capsys):
    with pytest.raises(SystemExit):
        parse_config(Config, argv=["--resume", str(tmp_path)])
    err = capsys.readouterr().err
    assert "is not a run directory (missing: config.json, metadata.json)" in err
    with pytest.raises(RunDirectoryError, match="does not exist"):
        RunDirectory.open(tmp_path / "nope")  # the Python API raises


def test_unknown_saved_keys_warn_and_missing_keys_keep_defaults(tmp_path):
    run_dir = _run_dir(tmp_path, {"seed": 5, "removed_option": 1})
    with pytest.warns(ParllelWarning, match="removed_option"):
        config = config_from_run(Config, run_dir)
    assert config == Config(seed=5)


def test_help_lists_every_field_with_its_docstring(capsys):
    with pytest.raises(SystemExit) as done:
        parse_config(Config, quick=QUICK, argv=["--help"], description="Demo.")
    assert done.value.code == 0
    text = capsys.readouterr().out
    for flag, help_text in [
        ("--seed", "master seed"),
        ("--batch-T", "env steps per env per batch"),
        ("--hidden-sizes", "hidden layer widths"),
        ("--rebalance", "move envs between processes"),
        ("--quick", "tiny run"),
        ("--resume", "config.json"),
    ]:
        assert flag in text and help_text in text, flag


def test_bad_flag_value_exits_with_a_message(capsys):
    with pytest.raises(SystemExit) as done:
        parse_config(Config, argv=["--parallel", "threads"])
    assert done.value.code != 0
    captured = capsys.readouterr()
    assert "threads" in captured.out + captured.err


def test_resume_command_replaces_an_earlier_resume(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["train.py", "--quick", "--resume", "old"])
    monkeypatch.setattr(
        sys, "orig_argv", ["python", "train.py", "--quick", "--resume", "old"]
    )
    command = resume_command("runs/my run")
    assert shlex.split(command) == [
        "python",
        "train.py",
        "--quick",
        "--resume",
        "runs/my run",
    ]
    monkeypatch.setattr(sys, "orig_argv", ["python", "-m", "pkg.train", "--resume=x"])
    monkeypatch.setattr(sys, "argv", ["/abs/pkg/train.py", "--resume=x"])
    assert shlex.split(resume_command("r")) == [
        "python",
        "-m",
        "pkg.train",
        "--resume",
        "r",
    ]


@dataclasses.dataclass
class Settings:
    console: Literal["auto", "plain"] = "auto"
    """terminal output"""
    sizes: tuple[int, ...] = (1, 2)
    """a tuple inside"""


@dataclasses.dataclass
class NestedConfig:
    seed: int = 0
    """master seed"""
    run: Settings = dataclasses.field(default_factory=Settings)
    """where the run goes"""


def test_a_nested_dataclass_gives_unprefixed_flags_and_resumes(tmp_path):
    config, _ = parse_config(NestedConfig, argv=["--console", "plain", "--seed", "3"])
    assert config == NestedConfig(seed=3, run=Settings(console="plain"))
    run = RunDirectory.create(tmp_path, "nested", config=config)
    resumed, resume = parse_config(NestedConfig, argv=["--resume", str(run.path)])
    assert resume == str(run.path)
    assert resumed == config and isinstance(resumed.run, Settings)
    assert resumed.run.sizes == (1, 2)  # a JSON list back to its tuple
    override, _ = parse_config(
        NestedConfig, argv=["--resume", str(run.path), "--console", "auto"]
    )
    assert override.run.console == "auto" and override.seed == 3


def test_quick_sets_nested_fields_by_their_flag_names():
    quick = {"seed": 5, "console": "plain", "sizes": (3,)}
    assert apply_preset(NestedConfig(), quick) == NestedConfig(
        seed=5, run=Settings(console="plain", sizes=(3,))
    )
    config, _ = parse_config(NestedConfig, quick=quick, argv=["--quick"])
    assert config == NestedConfig(seed=5, run=Settings(console="plain", sizes=(3,)))
    # an explicit flag beats the preset, nested too
    config, _ = parse_config(
        NestedConfig, quick=quick, argv=["--quick", "--console", "auto"]
    )
    assert config.run.console == "auto" and config.run.sizes == (3,)
    # a whole nested dataclass by its own field name
    assert apply_preset(NestedConfig(), {"run": Settings(sizes=())}).run.sizes == ()


def test_a_preset_key_naming_no_field_or_two_fields_is_a_config_error():
    with pytest.raises(ConfigError, match=r"unknown fields \['sizez'\]"):
        apply_preset(NestedConfig(), {"sizez": (1,)})
    with pytest.raises(ConfigError, match="unknown fields"):  # without --quick too
        parse_config(NestedConfig, quick={"sizez": (1,)}, argv=[])

    @dataclasses.dataclass
    class Clash:
        console: str = "x"
        """clashes with run.console"""
        run: Settings = dataclasses.field(default_factory=Settings)
        """nested"""

    with pytest.raises(ConfigError, match=r"\['console', 'run.console'\]"):
        apply_preset(Clash(), {"console": "plain"})


@dataclasses.dataclass
class ScriptDefaults:
    run: Settings = dataclasses.field(
        default_factory=lambda: Settings(console="plain", sizes=(7,))
    )
    """settings with this script's own defaults"""


def test_resume_keeps_the_scripts_nested_defaults_the_saved_config_lacks(tmp_path):
    run = RunDirectory.create(tmp_path, "old", config={"run": {"console": "auto"}})
    config = config_from_run(ScriptDefaults, run.path)
    assert config.run == Settings(console="auto", sizes=(7,))  # not Settings().sizes


def test_run_main_prints_an_unknown_env_id_as_one_line_with_status_2(capsys):
    import gymnasium as gym

    from parllel.cages import SerialCage
    from parllel.errors import EnvError

    def main(config: Config, resume: str | None) -> int:
        SerialCage(lambda: gym.make("CartPol-v1"), n_envs=1)  # a typo'd id
        return 0

    with pytest.raises(SystemExit) as exit_info:
        run_main(main, parse_config(Config, argv=[]))
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: Environment `CartPol` doesn't exist.")
    assert "Did you mean: `CartPole`?" in line and line.endswith("--env-id)")

    def broken(config: Config, resume: str | None) -> int:  # other env errors raise
        raise EnvError("env 0 raised ValueError in its construction: boom")

    with pytest.raises(EnvError, match="boom"):
        run_main(broken, parse_config(Config, argv=[]))


def test_run_main_prints_a_ctrl_c_during_setup_as_one_line_with_status_130(capsys):
    def main(config: Config, resume: str | None) -> int:
        raise KeyboardInterrupt  # Ctrl-C while the script builds its cages

    with pytest.raises(SystemExit) as exit_info:
        run_main(main, parse_config(Config, argv=[]))
    assert exit_info.value.code == 130  # as a program killed by SIGINT
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("interrupted (Ctrl-C) outside training")


def test_run_main_prints_an_env_factorys_config_error_as_one_line(capsys):
    import gymnasium as gym

    from parllel.cages import SerialCage

    def refuse() -> gym.Env:
        raise ConfigError("CartPole-v1 has discrete actions: use the other script")

    def main(config: Config, resume: str | None) -> int:
        SerialCage(refuse, n_envs=1)
        return 0

    with pytest.raises(SystemExit) as exit_info:
        run_main(main, parse_config(Config, argv=[]))
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: CartPole-v1 has discrete actions: use the other script"
    ]


@pytest.mark.parametrize("error", [ConfigError("bad"), RuntimeError("crash")])
def test_a_run_directory_nothing_was_written_to_is_removed_when_main_fails(
    tmp_path, capsys, error
):
    def main(config: Config, resume: str | None) -> int:
        kept = RunDirectory.create(tmp_path, "kept")  # one a run wrote to
        (kept.logs_dir / "progress.csv").write_text("step\n")
        group = RunDirectory.create(tmp_path, "group")  # a seed group's layout
        seed = RunDirectory.create(group.path, "seed1")
        (group.path / RUNS_FILE).write_text(seed.path.name + "\n")
        raise error

    with pytest.raises((SystemExit, RuntimeError)):
        run_main(main, parse_config(Config, argv=[]))
    assert [p.name.split("-")[0] for p in tmp_path.iterdir()] == ["kept"]
    if isinstance(error, ConfigError):  # still the one line a mistake prints
        assert capsys.readouterr().err.splitlines() == ["error: bad"]


def test_a_finished_main_leaves_its_run_directory(tmp_path):
    def main(config: Config, resume: str | None) -> Path:
        return RunDirectory.create(tmp_path, "run").path

    path = run_main(main, parse_config(Config, argv=[]))
    assert path.is_dir() and (path / "config.json").is_file()
