"""configure_cpu_backend: JAX's CPU backend chosen before its first computation."""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import pytest

from parllel.errors import ConfigError, ParllelWarning
from parllel.jax.cpu_backend import configure_cpu_backend


def run_python(code: str, **env: str) -> str:
    """``code``'s stdout in a fresh interpreter (no JAX_NUM_CPU_DEVICES unless given)."""
    environment = {k: v for k, v in os.environ.items() if k != "JAX_NUM_CPU_DEVICES"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**environment, **env},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_before_the_first_computation_it_sets_devices_and_synchronous_calls() -> None:
    code = (
        "import warnings; warnings.simplefilter('error')\n"
        "import jax, jax.numpy as jnp\n"
        "from parllel.jax.cpu_backend import configure_cpu_backend\n"
        "n = configure_cpu_backend(devices=3)\n"
        "y = jax.jit(lambda x: x * 2)(jnp.arange(3.0))\n"
        "print(n, jax.config.read('jax_cpu_enable_async_dispatch'), y.tolist())\n"
    )
    assert run_python(code) == "3 False [0.0, 2.0, 4.0]"


def test_cores_gives_one_device_per_usable_core_and_none_keeps_the_users_count() -> (
    None
):
    code = (
        "import os\n"
        "from parllel.jax.cpu_backend import configure_cpu_backend\n"
        "print(configure_cpu_backend(devices='cores'), "
        "len(os.sched_getaffinity(0)))\n"
    )
    n, cores = run_python(code).split()
    assert n == cores
    code = (
        "from parllel.jax.cpu_backend import configure_cpu_backend\n"
        "print(configure_cpu_backend(devices=5))\n"
    )
    assert run_python(code, JAX_NUM_CPU_DEVICES="2") == "2"  # the user's count stays


def test_asynchronous_calls_stay_available() -> None:
    code = (
        "import jax\n"
        "from parllel.jax.cpu_backend import configure_cpu_backend\n"
        "configure_cpu_backend(synchronous=False)\n"
        "print(jax.config.read('jax_cpu_enable_async_dispatch'))\n"
    )
    assert run_python(code) == "True"


def test_after_the_first_computation_it_warns_and_changes_nothing() -> None:
    jax.numpy.ones(1).block_until_ready()  # the backend has started
    asynchronous = jax.config.read("jax_cpu_enable_async_dispatch")
    late = (
        rf"already started .*, so synchronous={asynchronous} cannot apply: it "
        rf"keeps {len(jax.devices())} CPU device\(s\), "
        f"{'asynchronous' if asynchronous else 'synchronous'} calls"
    )
    with pytest.warns(ParllelWarning, match=late):  # asks for the other mode
        assert configure_cpu_backend(synchronous=asynchronous) == len(jax.devices())
    assert jax.config.read("jax_cpu_enable_async_dispatch") == asynchronous


@pytest.mark.parametrize("devices", [0, -2, "all"])
def test_refuses_a_count_below_one_or_another_word(devices: object) -> None:
    with pytest.raises(ConfigError, match="devices must be an int >= 1"):
        configure_cpu_backend(devices=devices)  # type: ignore[arg-type]


_POOL_AND_MASKS = (
    "import os, jax, jax.numpy as jnp\n"
    "from parllel.jax.cpu_backend import configure_cpu_backend\n"
    "{call}\n"
    "print(float(jax.jit(lambda x: x.sum())(jnp.ones(4))))\n"
    "tasks = os.listdir('/proc/self/task')\n"
    "names = [open(f'/proc/self/task/{{t}}/comm').read().strip() for t in tasks]\n"
    "print(names.count('tf_XLAEigen'))\n"
    "print(len({{frozenset(os.sched_getaffinity(int(t))) for t in tasks}}))\n"
)


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs CPU affinity masks and two usable cores",
)
def test_threads_size_xla_pool_and_leave_every_thread_its_mask() -> None:
    # XLA_FLAGS cannot size the pool (it is sized from the affinity mask):
    # with the old flags alone it keeps one thread per core
    cores = len(os.sched_getaffinity(0))
    flags = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    default = run_python(_POOL_AND_MASKS.format(call="pass"), XLA_FLAGS=flags)
    assert default.splitlines() == ["4.0", str(cores), "1"]
    one = run_python(_POOL_AND_MASKS.format(call="configure_cpu_backend(threads=1)"))
    # one pool thread, and every thread (the pool's too) on every core again
    assert one.splitlines() == ["4.0", "1", "1"]


def test_refuses_fewer_than_one_thread() -> None:
    with pytest.raises(ConfigError, match="threads must be >= 1"):
        configure_cpu_backend(threads=0)


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs CPU affinity masks and two usable cores",
)
def test_training_setup_caches_and_gives_a_run_one_thread_a_group_every_core(
    tmp_path,
) -> None:
    cores = len(os.sched_getaffinity(0))
    setup = (
        "from parllel.jax.training_setup import prepare_jax_for_training\n"
        "devices = prepare_jax_for_training({runs})\n"
        "print(devices, jax.config.jax_compilation_cache_dir)"
    )
    one = run_python(
        _POOL_AND_MASKS.format(call=setup.format(runs=1)),
        PARLLEL_JAX_CACHE_DIR=str(tmp_path),
    )
    assert one.splitlines() == [f"1 {tmp_path}", "4.0", "1", "1"]
    group = run_python(
        _POOL_AND_MASKS.format(call=setup.format(runs=3)),
        PARLLEL_JAX_CACHE_DIR=str(tmp_path),
    )
    assert group.splitlines() == [f"{cores} {tmp_path}", "4.0", str(cores), "1"]


def test_training_setup_refuses_fewer_than_one_run() -> None:
    from parllel.jax.training_setup import prepare_jax_for_training

    with pytest.raises(ConfigError, match="runs must be an integer >= 1"):
        prepare_jax_for_training(0)


def test_a_repeated_setup_is_silent_and_a_late_group_is_told_its_devices() -> None:
    code = (
        "import warnings\n"
        "from parllel.jax.training_setup import prepare_jax_for_training\n"
        "prepare_jax_for_training()\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    prepare_jax_for_training()\n"
        "    print(len(caught))\n"
        "    prepare_jax_for_training(runs=4)\n"
        "    print(caught[-1].message)\n"
    )
    repeated, late = run_python(code, PARLLEL_JAX_CACHE_DIR="off").splitlines()
    assert repeated == "0"
    assert "devices=" in late and "it keeps 1 CPU device(s)" in late
