"""Seeds from one master seed; seed_everything determinism."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from parllel.errors import ConfigError
from parllel.seeding import Seeds, seed_everything


def test_same_master_same_seeds_and_independence():
    seeds = Seeds.from_master(1234, n_envs=8, n_eval_envs=2)
    assert seeds == Seeds.from_master(1234, n_envs=8, n_eval_envs=2)
    assert seeds != Seeds.from_master(1235, n_envs=8, n_eval_envs=2)
    all_seeds = [seeds.python, seeds.numpy, seeds.torch, *seeds.envs, *seeds.eval_envs]
    assert len(set(all_seeds)) == len(all_seeds) == 13
    assert all(isinstance(s, int) and 0 <= s < 2**31 for s in all_seeds)


def test_env_seeds_do_not_depend_on_env_count():
    few = Seeds.from_master(7, n_envs=2, n_eval_envs=1)
    many = Seeds.from_master(7, n_envs=16, n_eval_envs=4)
    assert many.envs[:2] == few.envs and many.eval_envs[:1] == few.eval_envs
    assert (few.python, few.numpy, few.torch) == (many.python, many.numpy, many.torch)


def test_seed_everything_is_deterministic():
    def run():
        generator = seed_everything(Seeds.from_master(99))
        return (
            random.random(),
            np.random.rand(2).tolist(),
            torch.randn(2).tolist(),
            generator.random(2).tolist(),
        )

    first, second = run(), run()
    assert first == second
    seed_everything(Seeds.from_master(100))
    assert torch.randn(2).tolist() != first[2]


def test_dict_round_trip_and_random_master():
    seeds = Seeds.from_master(None, n_envs=3)
    data = json.loads(json.dumps(seeds.to_dict()))
    assert Seeds.from_dict(data) == seeds
    assert Seeds.from_master(seeds.master, n_envs=3) == seeds


@pytest.mark.parametrize("master", [-1, 1.5, "3", True])
def test_bad_master_seed(master):
    with pytest.raises(ConfigError):
        Seeds.from_master(master)
