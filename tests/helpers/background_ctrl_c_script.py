"""A learner loop over a BackgroundSampler with process cages, for the Ctrl-C tests.

    python background_ctrl_c_script.py PIDS_FILE raise   # Ctrl-C raises KeyboardInterrupt
    python background_ctrl_c_script.py PIDS_FILE stop    # Ctrl-C asks for a clean stop

The builder (run in the background process) writes that process's pid and
its cage workers' pids to PIDS_FILE, one a line. The learner prints
``training`` after its first batch, then trains until interrupted. With
``stop`` the first SIGINT only sets a flag (as a runner does): the learner
trains on one more batch, prints ``stopped after batch N`` and exits 0.
"""

from __future__ import annotations

import os
import signal
import sys

from parllel.agents import NumpyHandler, RandomAgent
from parllel.builders import build_sample_tree
from parllel.cages import CageOptions, ProcessCage, ProcessLayout
from parllel.samplers import BackgroundSampler, FeedForwardSampler
from tests.helpers.envs import CountingEnv

N_ENVS, T = 4, 8


def build_sampler(pids_file: str) -> FeedForwardSampler:
    """Runs in the background process: two worker processes, a random agent."""
    cage = ProcessCage(
        CountingEnv,
        N_ENVS,
        {"min_length": 3, "max_length": 9},
        layout=ProcessLayout(n_workers=2),
        options=CageOptions(seed=0),
    )
    with open(pids_file, "w") as file:
        for pid in [os.getpid(), *cage.worker_pids]:
            print(pid, file=file)
    handler = NumpyHandler(RandomAgent(cage.spaces.action, seed=0), N_ENVS)
    tree = build_sample_tree(cage, handler, T)
    return FeedForwardSampler(cage, handler, tree, seed=0)


def main(pids_file: str, mode: str) -> int:
    stop_requested = []
    if mode == "stop":
        signal.signal(signal.SIGINT, lambda signum, frame: stop_requested.append(1))
    with BackgroundSampler(build_sampler, pids_file, max_lag=None) as sampler:
        batch = sampler.collect_batch()
        print("training", flush=True)
        while not stop_requested:
            batch = sampler.collect_batch()
            batch.sample_tree["reward"].to_ndarray().sum()  # the "update"
        batch = sampler.collect_batch()  # the iteration the stop request finishes
        print(f"stopped after batch {batch.batch_index}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
