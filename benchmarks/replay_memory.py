"""Bytes per stored step of Atari-shaped replays and sample trees.

Three figures, each counted from the arrays actually allocated (every field,
padding rows included, plus the final-observation table and its index):

- the whole-stack replay the off-policy examples build for an 84x84x4 uint8
  observation (``build_replay_tree``, ``UniformReplay``), filled a few
  batches through a ``FeedForwardSampler`` writing straight into it;
- the one-frame-per-step Atari replay (``FrameStackObservation(4)`` over
  84x84 frames, :func:`parllel.frame_stacks.replay.build_frame_replay_tree`,
  ``UniformReplay(frame_stack=4)``) of ``--atari-steps`` steps (default 1M),
  filled a few batches by copy from the sampler's tree; beside it SB3's
  ``ReplayBuffer(optimize_memory_usage=True)`` of a small capacity, its
  allocation scaled to the same steps;
- the observation bytes per step of the on-policy ``[T, B]`` sample tree
  ``examples/atari/train_ppo.py`` builds (``frame_stack=4``: the observation
  and final-observation staging slots, frames and frame depths), and of the
  same tree of whole stacks (observation and final observation).

Also timed (median of repeats): one ``sample()`` of 32 transitions from the
frame replay and from a whole-stack replay holding the same steps; one PPO
minibatch of 256 observations rebuilt from frames against indexed from
whole stacks.

Arrays are allocated lazily by the OS, so even the full sizes cost little
resident memory (untouched pages), but they must fit the machine's address
space limits (the 1M-step frame replay needs ~7.3 GB of overcommittable memory).

Last line: one JSON object with ``observation_bytes_per_step``,
``bytes_per_stored_step``, ``ratio_to_observation`` (the figure to keep
<= 1.05), ``dense_bytes_per_stored_step`` and ``dense_ratio_to_observation``
(the same replay with a full-size final observation beside the observation),
``stored_steps``, ``final_observation_capacity``, ``table_bytes``;
``atari_replay_bytes_per_step`` (goal <= 7,800), ``atari_replay_bytes``,
``atari_replay_steps``, ``sb3_replay_bytes`` (scaled to the same steps),
``atari_replay_vs_sb3``, ``atari_sample_tree_obs_bytes_per_step`` (goal
<= 7,800), ``atari_sample_tree_whole_stack_obs_bytes_per_step``,
``frame_sample_ms_batch32``, ``whole_stack_sample_ms_batch32``,
``ppo_minibatch256_frame_stacks_us``, ``ppo_minibatch256_whole_stacks_us``
(``index_select``) and ``ppo_minibatch256_whole_stacks_indexing_us``
(``tensor[index]``, plain advanced indexing; ``PolicyBatch.select`` uses
``index_select``).

Usage: python benchmarks/replay_memory.py [--quick] [--steps N] [--atari-steps N]
    [--envs B] [--batch-T T]
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # this checkout's parllel first
import gymnasium as gym  # noqa: E402
from _common import median_time, print_result  # noqa: E402
from gymnasium.wrappers import FrameStackObservation  # noqa: E402
from synthetic_envs import Atari84Env  # noqa: E402

from parllel import fields  # noqa: E402
from parllel.agents import NumpyHandler, RandomAgent  # noqa: E402
from parllel.builders import build_replay_tree, build_sample_tree  # noqa: E402
from parllel.cages import CageOptions, SerialCage  # noqa: E402
from parllel.frame_stacks.replay import build_frame_replay_tree  # noqa: E402
from parllel.replays import UniformReplay  # noqa: E402
from parllel.samplers import FeedForwardSampler  # noqa: E402

FRAME_STACK = 4
PPO_T, PPO_B = 128, 8  # examples/atari/train_ppo.py's batch


class Frame84Env(gym.Env):
    """Single 84x84 uint8 frames (as ``AtariPreprocessing`` gives), Discrete(6)."""

    def __init__(self, episode_length: int = 40) -> None:
        self.observation_space = gym.spaces.Box(0, 255, (84, 84), np.uint8)
        self.action_space = gym.spaces.Discrete(6)
        self.episode_length = episode_length
        self._frame = np.zeros((84, 84), np.uint8)
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        self._frame[:] = self.np_random.integers(0, 256, (84, 84), np.uint8)
        return self._frame.copy(), {}

    def step(self, action):
        self._t += 1
        self._frame[self._t % 84] = (self._t + int(action)) % 256
        return self._frame.copy(), 1.0, False, self._t >= self.episode_length, {}


def stacked_frame_env() -> gym.Env:
    """``FrameStackObservation(Frame84Env(), 4)``: ``(4, 84, 84)`` uint8."""
    return FrameStackObservation(Frame84Env(), FRAME_STACK)


def tree_bytes(tree) -> int:
    return sum(leaf.nbytes for _, leaf in tree.items_flat())


def measure(steps: int, n_envs: int, batch_T: int, fill_batches: int) -> dict:
    """Build an Atari-shaped replay of about ``steps`` stored steps and count its bytes."""
    # short episodes, so the few filled batches put entries in the table
    factory = partial(Atari84Env, episode_length=7, iterations=1)
    cage = SerialCage(factory, n_envs, options=CageOptions(seed=0))
    try:
        handler = NumpyHandler(RandomAgent(cage.spaces.action, seed=0), n_envs)
        full_size = -(-(steps // n_envs + 1) // batch_T) * batch_T
        tree = build_replay_tree(cage, handler, batch_T, full_size)
        replay = UniformReplay(tree, 32, np.random.default_rng(0))
        sampler = FeedForwardSampler(cage, handler, tree)
        for _ in range(fill_batches):
            sampler.collect_batch()
            replay.record_batch()
        if fill_batches:
            replay.sample()  # the table answers for the ended episodes
        storage = replay.storage
        stored = storage.capacity * storage.num_envs
        observation_bytes = int(np.prod(cage.spaces.observation.shape))
        observation_bytes *= np.dtype(cage.spaces.observation.dtype).itemsize
        table_bytes = storage.final_observations.nbytes
        held = sum(leaf.nbytes for _, leaf in tree.items_flat()) + table_bytes
        # the same replay with a full-size final observation (one per row)
        slot_bytes = tree[fields.FINAL_OBSERVATION].nbytes
        dense = held - table_bytes - slot_bytes + full_size * n_envs * observation_bytes
        return {
            "observation_bytes_per_step": observation_bytes,
            "bytes_per_stored_step": held / stored,
            "ratio_to_observation": held / stored / observation_bytes,
            "dense_bytes_per_stored_step": dense / stored,
            "dense_ratio_to_observation": dense / stored / observation_bytes,
            "stored_steps": stored,
            "final_observation_capacity": storage.final_observations.capacity,
            "table_bytes": table_bytes,
            "replay_bytes": held,
            "batch_T": batch_T,
            "n_envs": n_envs,
        }
    finally:
        cage.close()


def measure_atari(steps: int, n_envs: int, batch_T: int, fill_batches: int) -> dict:
    """The one-frame-per-step replay of about ``steps`` steps: bytes per step."""
    cage = SerialCage(stacked_frame_env, n_envs, options=CageOptions(seed=0))
    handler = NumpyHandler(RandomAgent(cage.spaces.action, seed=0), n_envs)
    sample_tree = build_sample_tree(cage, handler, batch_T, final_observation=True)
    try:
        full_size = -(-(steps // n_envs + 1) // batch_T) * batch_T
        tree = build_frame_replay_tree(sample_tree, full_size, FRAME_STACK)
        replay = UniformReplay(
            tree, 32, np.random.default_rng(0), frame_stack=FRAME_STACK
        )
        sampler = FeedForwardSampler(cage, handler, sample_tree)
        for _ in range(fill_batches):
            batch, _ = sampler.collect_batch()
            replay.record_batch(batch)
        replay.sample()
        storage = replay.storage
        held = tree_bytes(tree) + storage.final_observations.nbytes
        stored = storage.capacity * n_envs
        return {
            "atari_replay_bytes": held,
            "atari_replay_steps": stored,
            "atari_replay_bytes_per_step": held / stored,
            "atari_replay_table_entries": storage.final_observations.capacity,
        }
    finally:
        cage.close()
        sample_tree.close()


def sb3_bytes_per_step(n_envs: int, capacity: int = 10_000) -> float | None:
    """SB3's ``ReplayBuffer(optimize_memory_usage=True)`` allocation per step."""
    try:
        from stable_baselines3.common.buffers import ReplayBuffer
    except ImportError:
        return None
    space = gym.spaces.Box(0, 255, (FRAME_STACK, 84, 84), np.uint8)
    buffer = ReplayBuffer(
        capacity,
        space,
        gym.spaces.Discrete(6),
        device="cpu",
        n_envs=n_envs,
        optimize_memory_usage=True,
        handle_timeout_termination=False,
    )
    arrays = ("observations", "actions", "rewards", "dones", "timeouts")
    held = sum(getattr(buffer, name).nbytes for name in arrays)
    return held / (buffer.buffer_size * n_envs)


def sample_tree_obs_bytes() -> dict:
    """Observation bytes per step of train_ppo.py's sample tree (``frame_stack=4``:
    the staging slots, frames and depths) and of the same tree of whole stacks
    (observation with its padding and the ``[T, B]`` final observation)."""
    import torch

    from parllel.torch.agents import ActorCriticAgent
    from parllel.torch.handler import TorchHandler
    from parllel.torch.models import build_actor_critic

    torch.manual_seed(0)
    cage = SerialCage(stacked_frame_env, PPO_B, options=CageOptions(seed=0))
    names = (
        fields.OBSERVATION,
        fields.FINAL_OBSERVATION,
        fields.FRAMES,
        fields.FRAME_DEPTH,
    )
    try:
        spaces = cage.spaces
        agent = ActorCriticAgent(*build_actor_critic(spaces.observation, spaces.action))
        handler = TorchHandler(agent, n_envs=PPO_B)
        result = {}
        for key, options in (
            ("atari_sample_tree_obs_bytes_per_step", {"frame_stack": FRAME_STACK}),
            ("atari_sample_tree_whole_stack_obs_bytes_per_step", {}),
        ):
            tree = build_sample_tree(cage, handler, PPO_T, **options)
            held = sum(tree[name].nbytes for name in names if name in tree)
            tree.close()
            result[key] = held / (PPO_T * PPO_B)
        return result
    finally:
        cage.close()


def time_minibatch_stacks(repeats: int) -> dict:
    """µs to take one shuffled minibatch of 256 observations from a ``[128, 8]``
    PPO batch: rebuilt from one frame per step (``frame_stack=4``) against
    indexing a batch of whole stacks (torch on one thread)."""
    import torch

    from parllel.torch.algos.frame_batch import FrameStacks

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    T, B, k = PPO_T, PPO_B, FRAME_STACK
    frames = torch.from_numpy(rng.integers(0, 256, (k + T, B, 84, 84), np.uint8))
    depth = torch.from_numpy(rng.integers(0, k, (T, B), np.int8))
    stacks = FrameStacks.from_batch(
        {fields.FRAMES: frames, fields.FRAME_DEPTH: depth}, (T, B)
    )
    whole = stacks.all()  # [T * B, 4, 84, 84]
    order = torch.randperm(T * B)
    index = order[:256]
    return {
        "ppo_minibatch256_frame_stacks_us": 1e6
        * median_time(lambda: stacks.gather(index), repeats, 50),
        # the cheapest gather of whole stacks (what PolicyBatch.select does), and plain indexing
        "ppo_minibatch256_whole_stacks_us": 1e6
        * median_time(lambda: whole.index_select(0, index), repeats, 50),
        "ppo_minibatch256_whole_stacks_indexing_us": 1e6
        * median_time(lambda: whole[index], repeats, 50),
    }


def time_samples(steps: int, n_envs: int, batch_T: int, repeats: int) -> dict:
    """ms per ``sample()`` of 32 from a frame replay and a whole-stack one."""
    cage = SerialCage(stacked_frame_env, n_envs, options=CageOptions(seed=0))
    handler = NumpyHandler(RandomAgent(cage.spaces.action, seed=0), n_envs)
    sample_tree = build_sample_tree(cage, handler, batch_T, final_observation=True)
    full_size = -(-(steps // n_envs + 1) // batch_T) * batch_T
    whole_tree = build_replay_tree(cage, handler, batch_T, full_size)
    try:
        rng = np.random.default_rng
        frames = UniformReplay(
            build_frame_replay_tree(sample_tree, full_size, FRAME_STACK),
            32,
            rng(0),
            frame_stack=FRAME_STACK,
        )
        whole = UniformReplay(whole_tree, 32, rng(0))
        sampler = FeedForwardSampler(cage, handler, sample_tree)
        for _ in range(full_size // batch_T):
            batch, _ = sampler.collect_batch()
            frames.record_batch(batch)
            whole.record_batch(batch)
        return {
            "frame_sample_ms_batch32": 1e3 * median_time(frames.sample, repeats, 20),
            "whole_stack_sample_ms_batch32": 1e3
            * median_time(whole.sample, repeats, 20),
        }
    finally:
        cage.close()
        sample_tree.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny run for tests")
    parser.add_argument("--steps", type=int, default=250_000, help="stored steps")
    parser.add_argument(
        "--atari-steps", type=int, default=1_000_000, help="frame replay steps"
    )
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--batch-T", type=int, default=32)
    args = parser.parse_args()
    steps = 4096 if args.quick else args.steps
    atari_steps = 4096 if args.quick else args.atari_steps
    result = measure(steps, args.envs, args.batch_T, fill_batches=3)
    print(
        f"{result['stored_steps']} stored steps of 84x84x4 uint8 "
        f"({result['observation_bytes_per_step']} B): "
        f"{result['bytes_per_stored_step']:.1f} B per stored step "
        f"({result['ratio_to_observation']:.4f}x the observation; a full-size "
        f"final observation: {result['dense_ratio_to_observation']:.4f}x); "
        f"table of {result['final_observation_capacity']} final observations"
    )
    result.update(measure_atari(atari_steps, args.envs, args.batch_T, 3))
    sb3 = sb3_bytes_per_step(args.envs)
    result["sb3_replay_bytes"] = None if sb3 is None else sb3 * atari_steps
    result["atari_replay_vs_sb3"] = (
        None if sb3 is None else result["atari_replay_bytes_per_step"] / sb3
    )
    print(
        f"one frame per step, {result['atari_replay_steps']} steps of (4, 84, 84): "
        f"{result['atari_replay_bytes_per_step']:.1f} B per step, "
        f"{result['atari_replay_bytes'] / 1e9:.3f} GB"
        + ("" if sb3 is None else f" (SB3: {sb3 * atari_steps / 1e9:.3f} GB)")
    )
    result.update(sample_tree_obs_bytes())
    print(
        f"PPO sample tree [{PPO_T}, {PPO_B}]: "
        f"{result['atari_sample_tree_obs_bytes_per_step']:.1f} observation B per step "
        f"with frame_stack=4 (whole stacks: "
        f"{result['atari_sample_tree_whole_stack_obs_bytes_per_step']:.1f})"
    )
    result.update(time_minibatch_stacks(5))
    print(
        "PPO minibatch of 256 observations: rebuilt from frames "
        f"{result['ppo_minibatch256_frame_stacks_us']:.0f} us, whole stacks "
        f"{result['ppo_minibatch256_whole_stacks_us']:.0f} us (index_select), "
        f"{result['ppo_minibatch256_whole_stacks_indexing_us']:.0f} us (tensor[index])"
    )
    result.update(time_samples(1024 if args.quick else 16_384, args.envs, 32, 5))
    print(
        f"sample(32): one frame per step {result['frame_sample_ms_batch32']:.3f} ms, "
        f"whole stacks {result['whole_stack_sample_ms_batch32']:.3f} ms"
    )
    print_result(result)


if __name__ == "__main__":
    main()
