"""The device script's race check (benchmarks/_device_learning.py), on the
CPU with the fake CUDA runtime: copies into page-locked memory land only at
a wait, so the check passes with the handler's wait and shows the corruption
without it, deterministically."""

from __future__ import annotations

import sys
from pathlib import Path

import gymnasium as gym
import pytest

from parllel.torch.transfer import Transfer
from tests.helpers.fake_cudart import FakeCudart

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _device_learning import NoWaitTransfer, race_check  # noqa: E402


def make_env() -> gym.Env:
    return gym.make("CartPole-v1")


@pytest.mark.timeout(120)
def test_the_race_check_passes_with_the_wait_and_fails_without_it(monkeypatch):
    cuda = FakeCudart().install(monkeypatch)

    def make_transfer(wait: bool) -> Transfer:
        kind = Transfer if wait else NoWaitTransfer
        return kind("cpu", copy_inputs=True, pin_memory=True, event=cuda.event())

    result = race_check(make_env, "cpu", make_transfer)
    assert result == {"equal_with_wait": True, "corrupt_without_wait": True}
    assert cuda.violations == [] and cuda.registered == {}
