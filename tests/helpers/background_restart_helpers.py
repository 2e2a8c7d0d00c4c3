"""Sampler builders for the background-sampler restart tests (run in the background process).

Every builder appends a line ``<its pid> <its cage workers' pids...>`` to
``<run_dir>/pids`` so the tests can check that every process is gone.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path

from parllel.agents import NumpyHandler, RandomAgent
from parllel.builders import build_sample_tree
from parllel.cages import CageOptions, ProcessCage, ProcessLayout, SerialCage
from parllel.samplers import FeedForwardSampler
from parllel.transforms import EstimateAdvantage
from tests.helpers.background_helpers import make_linear_handler
from tests.helpers.envs import CountingEnv

T, N_ENVS = 6, 3
ENV_KWARGS = {"min_length": 2, "max_length": 9, "terminal": False}


class StallOnceEnv(CountingEnv):
    """A CountingEnv that, the first time any env of the run reaches step
    ``stall_at_step``, creates ``marker`` and blocks until the process that
    started its own is gone (the test kills it; or it is terminated at
    close); later envs (and runs) step normally."""

    def __init__(self, stall_at_step: int, marker: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.stall_at_step, self.marker = stall_at_step, marker

    def step(self, action):
        if self.total_steps + 1 == self.stall_at_step:
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                pass
            else:
                parent = mp.parent_process()  # the process that started this one
                while parent is not None and parent.is_alive():  # until killed
                    time.sleep(0.01)
        return super().step(action)


def record_pids(run_dir: str, cages) -> None:
    pids = [os.getpid()]
    for cage in cages:
        pids += list(getattr(cage, "worker_pids", []))
    with open(Path(run_dir) / "pids", "a") as file:
        print(*pids, file=file)


def read_pids(run_dir: Path) -> list[int]:
    path = run_dir / "pids"
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def build_stalling_sampler(run_dir: str, stall_at_step: int):
    """Process cage whose worker stalls once at env step ``stall_at_step``."""
    kwargs = {
        **ENV_KWARGS,
        "stall_at_step": stall_at_step,
        "marker": str(Path(run_dir) / "stalled"),
    }
    cage = ProcessCage(
        StallOnceEnv,
        N_ENVS,
        kwargs,
        layout=ProcessLayout(n_workers=1),
        options=CageOptions(seed=0),
    )
    record_pids(run_dir, [cage])
    handler = NumpyHandler(RandomAgent(cage.spaces.action, seed=0), N_ENVS)
    tree = build_sample_tree(cage, handler, T)
    return FeedForwardSampler(cage, handler, tree, seed=0)


def build_following_sampler(run_dir: str, weights, die_at_step: int | None = None):
    """Serial cage, the LinearAgent following ``weights``, GAE; with
    ``die_at_step`` the envs exit the process (code 17) at that step."""
    kwargs = {**ENV_KWARGS, "die_at_step": die_at_step}
    cage = SerialCage(CountingEnv, N_ENVS, kwargs, options=CageOptions(seed=1))
    record_pids(run_dir, [cage])
    handler = make_linear_handler(1)
    handler.follow_weights(weights)
    tree = build_sample_tree(cage, handler, T)
    gae = EstimateAdvantage(tree, 0.99, 0.95)
    return FeedForwardSampler(cage, handler, tree, transform=gae, seed=1)
