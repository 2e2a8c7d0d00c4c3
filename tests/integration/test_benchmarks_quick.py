"""Every benchmark runs in --quick mode and ends with one JSON line (no timing asserts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

EXPECTED_KEYS = {
    "phase_timing_cost.py": {
        "cartpole8_serial_timing_cost_pct",
        "cartpole64_process_timing_cost_pct",
        "worst_timing_cost_pct",
        "worst_instrumentation_pct",
    },
    "arrays_bench.py": {
        "tree_write_us",
        "numpy_write_us",
        "tree_write_ratio",
        "pickle_bytes_small",
        "pickle_bytes_large",
    },
    "cage_throughput.py": {
        "cartpole64_process_vs_raw",
        "cartpole64_process_vs_async",
        "cpu200us_process_vs_raw",
        "atari84_process_vs_raw",
        "cartpole8_serial_vs_raw",
        "cartpole8_raw_sps",
        "cartpole64_process_sps",
        "cpu200us_serial_sps",
        "atari84_async_sps",
        "cartpole64_sync_sps",
    },
    "finite_check.py": {
        "cartpole64_on_vs_off",
        "cartpole64_check_fraction",
        "noop64_on_vs_off",
        "noop64_check_fraction",
        "image16_on_vs_off",
        "image16_check_fraction",
        "worst_check_fraction",
    },
    "many_seeds.py": {
        "ppo_seeds8_vs_seeds1_wall",
        "ppo_seeds4_vs_seeds1_wall",
        "ppo_seeds8_vs_8_separate_runs_wall",
        "ppo_seeds8_return_median",
        "ppo_separate8_return_median",
        "ppo_seeds8_minus_separate8_return",
        "sac_seeds8_vs_seeds1_wall",
        "sac_seeds8_return_median",
        "torch_func_seeds8_vs_8_sequential",
        "torch_func_seeds8_vs_jax_seeds8",
    },
    "sampler_throughput.py": {
        "cartpole_ff_serial_sps",
        "cartpole_ff_process_sps",
        "cartpole_alternating_process_sps",
        "cartpole_gym_sync_sps",
        "cartpole_gym_async_sps",
        "cartpole_best_vs_best_gym_loop",
        "cpu200us_env_step_ms",
        "cpu200us_inference_ms",
        "alternating_vs_feedforward",
    },
    # SB3 figures are null without the bench extra; the keys are always there
    "train_pendulum.py": {
        "ours_all_seeds_time_to_m200_s",
        "sb3_all_seeds_time_to_m200_s",
        "all_seeds_time_to_m200_ratio",
        "ours_steps_to_m200",
        "sb3_steps_to_m200",
        "steps_to_m200_ratio",
    },
    "handler_step.py": {
        f"{what}_{n_envs}"
        for what in ("torch_step_us", "jax_step_us", "jax_call_us", "jax_vs_torch")
        for n_envs in (8, 64)
    },
    # a contender whose library is missing (SB3, SBX, the jax extra) is null;
    # the keys are always there
    "learner_speed.py": {
        *(
            f"{unit}_{contender}"
            for unit in ("ppo_minibatch_us", "sac_step_us")
            for contender in ("torch_eager", "torch_compiled", "jax", "sb3", "sbx")
        ),
        "ppo_compile_s_torch_compiled",
        "sac_update_vs_flop_floor",
        "matmul_256_gflops",
    },
    "interop_bench.py": {
        "gym_cartpole64_vs_async",
        "gym_cartpole64_vs_cage",
        "sb3_cartpole64_vs_subproc",
        "gym_cpu200us_vs_sync",
        "gym_cartpole64_make_vec_sps",
        "gym_cartpole64_async_sps",
        "gym_cartpole64_cage_sps",
        "gym_cartpole64_ceiling_sps",
        "sb3_cartpole64_make_sb3_vec_env_sps",
        "sb3_cartpole64_subproc_sps",
        "gym_cpu200us_make_vec_sps",
        "gym_cpu200us_sync_sps",
        "gym_cpu200us_ceiling_sps",
        "envpool",
    },
    "replay_memory.py": {
        "observation_bytes_per_step",
        "bytes_per_stored_step",
        "ratio_to_observation",
        "dense_bytes_per_stored_step",
        "dense_ratio_to_observation",
        "stored_steps",
        "final_observation_capacity",
        "table_bytes",
        "atari_replay_bytes_per_step",
        "atari_replay_bytes",
        "atari_sample_tree_obs_bytes_per_step",
        "atari_sample_tree_whole_stack_obs_bytes_per_step",
        "ppo_minibatch256_frame_stacks_us",
        "ppo_minibatch256_whole_stacks_us",
        "ppo_minibatch256_whole_stacks_indexing_us",
        "sb3_replay_bytes",
        "frame_sample_ms_batch32",
        "whole_stack_sample_ms_batch32",
    },
    "async_bench.py": {
        "sample_ms",
        "learn_ms",
        "sync_sps",
        "async_sps",
        "async_vs_sync_sps",
        "ceiling_vs_sync",
        "max_lag",
        "max_lag_observed",
    },
    "ray_bench.py": {
        "ray_vs_local",
        "ray_sps",
        "local_best_sps",
        "local_best_layout",
        "ray_batch_overhead_ms",
        "recover_batches",
        "weights_broadcast_ms",
        "batch_bytes",
        "weights_bytes",
    },
    "train_cartpole.py": {
        "steps_to_475_median_ratio",
        "steps_to_475_ratio_ci",
        "wall_per_step_ratio",
        "wall_per_step_ratio_ci",
        "all_seeds_wall_ratio",
        "seeds",
        "ours_steps_to_475_median",
        "sb3_steps_to_475_median",
        "ours_seconds_per_100k_median",
        "async_wall_per_step_ratio",
    },
    "train_mujoco.py": {
        "ppo_wall_ratio",
        "ppo_wall_ratio_ci",
        "ppo_async_wall_ratio",
        "sac_wall_ratio",
        "sac_wall_ratio_ci",
        "ours_ppo_sample_us_per_step",
        "sb3_ppo_update_us_per_step",
        "ours_sac_final_return_mean",
        "sb3_sac_final_return_mean",
        "sb3_vec",
        "ppo_jax_wall_ratio",
        "ppo_jax_wall_ratio_ci",
        "ppo_jax_vs_sbx",
        "sac_jax_wall_ratio",
        "sac_jax_vs_sbx",
        "ppo_1m_minutes",
        "ppo_1m_minutes_ci",
        "ppo_return_median_ours_jax",
        "ppo_return_median_sb3",
        "ppo_return_median_sbx",
        "ppo_return_ours_jax_minus_sb3_ci",
    },
    "mujoco_table.py": {"table", "all_intervals_contain_0", "quick"},
    "atari_learning.py": {
        "return_ratio",
        "return_ratio_ci",
        "wall_ratio",
        "peak_rss_ratio",
        "parllel_final_return",
        "sb3_final_return",
        "steps",
    },
    "atari_throughput.py": {
        "gym_best_vs_best_python_peer",
        "gym_best_vs_ceiling",
        "envpool_cage_vs_envpool",
    },
    "device_check.py": {
        "device",
        "cores",
        "stepping",
        "collect",
        "ppo",
        "sync",
        "goals",
    },
    "multiagent_bench.py": {
        "ma_process_vs_supersuit",
        "ma_serial_vs_bare",
        "ma_process_vs_ceiling",
        "ma_process_agent_sps",
        "ma_supersuit_agent_sps",
        "ma_serial_agent_sps",
        "ma_bare_agent_sps",
        "ma_ceiling_agent_sps",
        "ma_rps_process_vs_supersuit",
        "ma_rps_serial_vs_bare",
        "ma_rps_process_vs_ceiling",
    },
}
# benchmarks that cannot run at all without a peer library (the bench extra)
NEEDS = {
    "train_cartpole.py": ("stable_baselines3", "jax"),
    "ray_bench.py": ("ray",),
    "multiagent_bench.py": ("supersuit",),  # and mpe2 (the examples extra)
    "train_mujoco.py": ("stable_baselines3", "mujoco", "jax", "sbx"),  # 3 extras
    "mujoco_table.py": ("mujoco",),
    "many_seeds.py": ("jax", "mujoco"),  # the jax and mujoco extras
    "train_pendulum.py": ("jax",),  # parllel's seeds on the JAX seed axis
    "handler_step.py": ("jax", "flax"),  # the jax extra
    "atari_throughput.py": ("ale_py", "cv2"),  # the atari extra
    "atari_learning.py": ("ale_py", "cv2", "stable_baselines3"),
}


# the quick runs that take more than a few seconds (a local Ray cluster,
# training runs on both libraries, process cages of every layout, background
# sampling) go with the slow tests, keeping the default run well under 10
# minutes; the cheapest ones (arrays_bench, finite_check, multiagent_bench,
# replay_memory) keep the quick-mode contract in the default run
SLOW = {
    "ray_bench.py",
    "train_mujoco.py",
    "async_bench.py",
    "sampler_throughput.py",
    "mujoco_table.py",  # two --quick runs of the MuJoCo PPO example
    "many_seeds.py",  # five JAX runs of the MuJoCo PPO example, two of the SAC one
    "atari_throughput.py",  # every Pong contender, process cages and the CNN
    "atari_learning.py",  # PPO on Breakout, parllel and SB3
    "device_check.py",  # process cages of every section, PPO runs
    "train_cartpole.py",  # PPO on CartPole, parllel and SB3
    "train_pendulum.py",  # SAC on Pendulum, parllel and SB3
    "cage_throughput.py",  # every cage layout at 8 and 64 envs
    "phase_timing_cost.py",  # serial and process cages, timing on and off
    "interop_bench.py",  # gymnasium's and SB3's vector envs against the cages
    "learner_speed.py",  # PPO and SAC updates, torch.compile included
    "handler_step.py",  # JAX and torch handlers, compiles included
}


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "script",
    [
        pytest.param(s, marks=pytest.mark.slow) if s in SLOW else s
        for s in sorted(EXPECTED_KEYS)
    ],
)
def test_quick_mode_prints_json(script):
    for module in NEEDS.get(script, ()):
        pytest.importorskip(module, reason=f"needs {module} (bench or mujoco extra)")
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--quick"],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    missing = EXPECTED_KEYS[script] - set(result)
    assert not missing, missing
