"""The background process runs torch on the learner's thread count."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from parllel import fields
from parllel.samplers import BackgroundSampler
from tests.helpers.background_helpers import build_thread_count_sampler


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: torch's default is 1")
@pytest.mark.timeout(120)
def test_background_process_uses_the_learners_torch_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # a training script's pin; forkserver does not inherit it
    try:
        with BackgroundSampler(build_thread_count_sampler, 0, max_lag=None) as sampler:
            batch = sampler.collect_batch()
            threads = np.asarray(batch.sample_tree[fields.AGENT_INFO]["threads"])
    finally:
        torch.set_num_threads(before)
    assert (threads == 1).all(), threads
