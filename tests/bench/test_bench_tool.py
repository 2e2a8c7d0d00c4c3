"""``python -m parllel.bench``: a quick run on CartPole, bad input, and agreement
with suggest_layout_for where the answer is clear-cut."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from parllel.arrays.shared_memory import list_segments
from parllel.bench import run_bench
from parllel.bench.__main__ import main
from parllel.bench.policies import require_policy
from parllel.cages.child_processes import usable_cores
from parllel.errors import MissingDependencyError
from tests.helpers.processes import end_processes

ROOT = Path(__file__).resolve().parents[2]
CARTPOLE = "gymnasium.envs.classic_control.cartpole:CartPoleEnv"
HELPERS = "tests.helpers.bench_envs"
TINY = [
    "--seconds",
    "0.05",
    "--batch-T",
    "4",
]  # each measurement a fraction of a second


def no_children_left() -> None:
    """Every child process of this one has exited (cages and probes closed)."""
    deadline = time.monotonic() + 10
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not multiprocessing.active_children()


def group_gone(pgid: int) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.timeout(180)
def test_quick_run_on_cartpole(tmp_path):
    """The README's command with tiny seconds: table, recommendation, JSON, PNG."""
    png = tmp_path / "bench.png"
    done = subprocess.Popen(
        [sys.executable, "-m", "parllel.bench", CARTPOLE, "--envs", "2,4", *TINY]
        + ["--json", "--png", str(png)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,  # its own process group: workers must not outlive it
    )
    try:
        stdout, stderr = done.communicate(timeout=150)
    finally:
        if done.poll() is None:
            end_processes(done, own_group=True)
    assert done.returncode == 0, stderr[-3000:]
    assert group_gone(done.pid), "a process of the tool outlived it"
    assert list_segments(done.pid) == [], "the tool left shared memory behind"

    result = json.loads(stdout.strip().splitlines()[-1])
    assert result["factory"] == CARTPOLE and result["cores"] == usable_cores()
    for n_envs in (2, 4):
        rows = [m for m in result["measurements"] if m["n_envs"] == n_envs]
        assert [m["layout"] for m in rows] == [
            "serial",
            "process-main",
            "process-workers",
            "process-rebalance",
            "alternating",
        ]
        assert all(m["steps_per_second"] > 0 and m["batches"] >= 3 for m in rows)
        assert max(m["relative"] for m in rows) == 1.0
    recommendations = {r["n_envs"]: r for r in result["recommendations"]}
    assert sorted(recommendations) == [2, 4]
    for n_envs, r in recommendations.items():
        assert (
            r["call"].startswith("build_")
            and f"(CartPoleEnv, n_envs={n_envs}" in r["call"]
        )
        assert r["call"] in stdout  # the recommended code is printed
        assert r["agree"] == (r["layout"]["stepping"] == r["predicted"]["stepping"])
        assert r["notes"] and all(note in stdout for note in r["notes"])
    assert "from gymnasium.envs.classic_control.cartpole import CartPoleEnv" in stdout
    assert "steps/s" in stdout and "<- recommended" in stdout
    assert f"wrote {png}" in stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_mlp_policy(capsys):
    import torch

    threads = torch.get_num_threads()
    report = run_bench(
        CARTPOLE,
        [2],
        seconds=0.05,
        batch_T=4,
        policies=["random", "mlp"],
        layouts=["serial", "process-main"],
        progress=None,
    )
    assert [(m.policy, m.layout.name) for m in report.measurements] == [
        ("random", "serial"),
        ("random", "process-main"),
        ("mlp", "serial"),
        ("mlp", "process-main"),
    ]
    assert [r.policy for r in report.recommendations] == ["random", "mlp"]
    assert torch.get_num_threads() == threads  # one thread only while measuring
    no_children_left()


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize(
    "reference, message",
    [
        ("make_env", "'make_env' is not MODULE:FACTORY"),
        ("NoSuchEnv-v0", "nor a registered gymnasium env id"),
        ("no_such_pkg.envs:make_env", "cannot import module 'no_such_pkg.envs'"),
        (
            f"{HELPERS}:make_nothing",
            f"module '{HELPERS}' has no attribute 'make_nothing'",
        ),
        (f"{HELPERS}:NOT_CALLABLE", "is a int, not a callable that returns an env"),
        (f"{HELPERS}:broken_factory", "raised ValueError: no such level: 'castle-9'"),
        (f"{HELPERS}:not_an_env", "returned a dict, not a gymnasium env"),
    ],
)
def test_bad_factories_exit_2_naming_the_problem(capsys, reference, message):
    status, out, err = run_main(capsys, reference, *TINY)
    assert status == 2
    assert message in err and err.startswith("python -m parllel.bench: error: ")
    assert out == ""
    no_children_left()


def test_a_gymnasium_env_id_is_benchmarked_with_gym_make(capsys):
    status, out, err = run_main(
        capsys, "CartPole-v1", "--envs", "2", "--layouts", "serial", *TINY
    )
    assert status == 0, err
    assert "CartPole-v1" in out and "<- recommended" in out
    # the recommended code runs as printed: its imports and a picklable factory
    assert "    import functools\n" in out and "    import gymnasium as gym\n" in out
    assert "build_cage(functools.partial(gym.make, 'CartPole-v1'), n_envs=2" in out
    no_children_left()


def closed_at_once(error_info: pytest.ExceptionInfo) -> None:
    """No worker process and no segment of this process is left while the error
    (whose traceback keeps the measuring frames, and so the cages, alive) is
    still held: they were closed, not garbage-collected later."""
    assert error_info.tb is not None
    assert multiprocessing.active_children() == []
    assert list_segments(os.getpid()) == []


def test_an_env_failing_while_stepping_in_a_worker_is_a_row_and_closes_everything(
    capsys,
):
    layouts = ["process-workers"]
    report = run_bench(f"{HELPERS}:FailingStepEnv", [2], seconds=10, layouts=layouts)
    (row,) = report.measurements
    assert row.error.startswith("EnvError") and "broke on purpose" in row.error
    assert report.recommendations == []
    assert multiprocessing.active_children() == []  # closed, not collected later
    assert list_segments(os.getpid()) == []
    status, _, err = run_main(
        capsys,
        f"{HELPERS}:FailingStepEnv",
        "--envs",
        "2",
        "--layouts",
        "process-workers",
    )
    assert status == 2
    assert "FailingStepEnv broke on purpose" in err
    no_children_left()


def test_ctrl_c_while_measuring_closes_the_cages(capsys):
    """Ctrl-C in the main process's share of a process cage: the cage, its
    worker and the sample tree are closed; the CLI exits with status 130."""
    with pytest.raises(KeyboardInterrupt) as info:
        run_bench(
            f"{HELPERS}:InterruptedEnv", [2], seconds=30, layouts=["process-main"]
        )
    closed_at_once(info)
    status, _, err = run_main(
        capsys, f"{HELPERS}:InterruptedEnv", "--envs", "2", "--layouts", "process-main"
    )
    assert status == 130 and "interrupted" in err
    no_children_left()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--envs", "0"], "argument --envs: env counts must be integers >= 1"),
        (["--envs", "8,x"], "argument --envs: env counts must be integers >= 1"),
        (["--seconds", "0"], "argument --seconds: must be a number > 0"),
        (["--batch-T", "-3"], "argument --batch-T: must be a number > 0"),
        (["--policy", "transformer"], "argument --policy: choose from random, mlp"),
        (["--layouts", "threads"], "argument --layouts: choose from serial"),
    ],
)
def test_bad_arguments_exit_2(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        main([CARTPOLE, *argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_a_negative_margin_is_refused_before_measuring(capsys):
    status, out, err = run_main(capsys, CARTPOLE, "--margin", "-0.1", *TINY)
    assert status == 2 and "margin must be >= 0, got -0.1" in err
    assert "envs" not in err.split("error:")[0]  # nothing was measured


def test_missing_torch_and_matplotlib_are_named_before_measuring(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    with pytest.raises(MissingDependencyError, match=r'pip install -e "\.\[torch\]"'):
        require_policy("mlp")
    status, out, err = run_main(capsys, CARTPOLE, "--policy", "mlp", *TINY)
    assert status == 2 and 'pip install -e ".[torch]"' in err
    assert "envs" not in err.split("error:")[0]  # nothing was measured
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    status, out, err = run_main(capsys, CARTPOLE, "--png", "x.png", *TINY)
    assert status == 2 and 'pip install -e ".[plot]"' in err
    assert "envs" not in err.split("error:")[0]


# -- agreement with suggest_layout_for, where the answer is clear-cut ---------------
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_trivially_cheap_env_steps_serially_by_the_prediction():
    """A no-op env: the prediction is serial and every layout is measured.

    Which layout measures fastest is not asserted: on a no-op env the layouts
    differ by microseconds per step, and 0.1 s windows on a busy 2-core
    machine (the other test worker running) ranked process-main first once
    (180k vs 69k steps/s), which is noise, not a defect."""
    report = run_bench(f"{HELPERS}:make_noop_env", [8], seconds=0.1, batch_T=16)
    (r,) = report.recommendations
    assert r.predicted.stepping == "serial"
    measured = {m.layout.name: m.steps_per_second for m in report.measurements}
    assert "serial" in measured and all(v > 0 for v in measured.values()), measured
    assert r.chosen.layout.name in measured
    no_children_left()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_an_env_waiting_2ms_per_step_steps_in_processes_by_both_measures():
    """8 envs waiting 2 ms per step: a main process and a worker halve a 16 ms
    vector step, on an idle machine or a busy one (waiting needs no core)."""
    if usable_cores() < 2:
        pytest.skip("one usable core: suggest_layout_for never suggests processes")
    report = run_bench(f"{HELPERS}:make_waiting_env", [8], seconds=0.3, batch_T=2)
    (r,) = report.recommendations
    figures = [(m.layout.name, round(m.steps_per_second)) for m in report.measurements]
    assert r.predicted.stepping == "process"
    assert r.chosen.layout.stepping == "process", figures
    assert r.agree
    no_children_left()
