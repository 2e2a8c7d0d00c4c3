"""Learners copy to the device only what their loss reads.

A fake device: every tensor leaf counts as foreign, so ``batch_to_device``
copies (and records) each leaf it is given. PPO and PPO with V-trace must
never hand it the sample tree's ``final_observation`` (about half of an Atari
tree's bytes), rewards or other fields the loss does not read.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from parllel import fields
from parllel.torch import transfer
from parllel.torch.algos import VTraceCorrection
from tests.torch.test_torch_ppo_vtrace import GAMMA, ppo, sampled


@pytest.fixture
def copied(monkeypatch) -> list[torch.Tensor]:
    """The source of every leaf copied to the (fake) device."""
    sources: list[torch.Tensor] = []

    def moved(leaf, device):
        if not isinstance(leaf, torch.Tensor):
            return leaf
        sources.append(leaf)
        return leaf.clone()

    monkeypatch.setattr(transfer, "_moved", moved)
    return sources


def span(array: np.ndarray) -> tuple[int, int]:
    low, high = np.lib.array_utils.byte_bounds(array)
    return low, high


def overlaps(tensor: torch.Tensor, bounds: tuple[int, int]) -> bool:
    start = tensor.data_ptr()
    end = start + tensor.untyped_storage().nbytes()
    return start < bounds[1] and bounds[0] < end


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("correction", "recurrent"),
    [(False, False), (True, False), (True, True)],
    ids=["ppo", "vtrace", "vtrace-recurrent"],
)
def test_learners_copy_only_what_the_loss_reads(copied, correction, recurrent):
    with sampled(recurrent=recurrent) as (model, distribution, tree):
        if correction:
            # truncations happen (max_episode_steps=14): some final observations
            # are evaluated, and only those rows may be copied
            assert tree[fields.TRUNCATED].to_ndarray().any()
        algo = ppo(
            model,
            distribution,
            correction=VTraceCorrection(gamma=GAMMA) if correction else None,
            device="cpu",
            epochs=1,
            minibatches=1,
        )
        algo.optimize(tree)
        assert copied
        unread = [fields.FINAL_OBSERVATION, fields.REWARD, fields.TERMINATED]
        for name in unread:
            bounds = span(tree[name].to_ndarray())
            assert not any(overlaps(leaf, bounds) for leaf in copied), name
        whole = sum(leaf.nbytes for _, leaf in tree.items_flat())
        assert sum(leaf.nbytes for leaf in copied) < whole
