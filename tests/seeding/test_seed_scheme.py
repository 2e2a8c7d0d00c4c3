"""One seed scheme: every stream distinct, cages use the seeds metadata records."""

from __future__ import annotations

import json
import os
import pickle
from functools import partial

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel import fields
from parllel.builders import build_alternating_cages
from parllel.cages import (
    CageOptions,
    ProcessCage,
    ProcessLayout,
    SerialCage,
    build_cage,
)
from parllel.cages.env_group import env_seed
from parllel.errors import ConfigError
from parllel.runners import RunDirectory
from parllel.seeding import (
    Seeds,
    Stream,
    action_space_seed,
    actions_seed,
    derive_seed,
    resolve_env_seeds,
    restart_seed,
)
from tests.helpers.cage_helpers import allocate, slots


class SeedEchoEnv(gym.Env):
    """Observation ``[seed of the last seeded reset, steps since reset]``.

    With ``die_seed``, the worker process exits at the third step of an env
    whose seed is ``die_seed`` (a restarted env has another seed and lives).
    """

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, die_seed: int | None = None) -> None:
        self.action_space = gym.spaces.Discrete(2)
        self.die_seed = die_seed
        self.seed_seen = -1.0
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.seed_seen = float(seed)
        self.t = 0
        return np.array([self.seed_seen, 0.0]), {}

    def step(self, action):
        self.t += 1
        if self.die_seed is not None and self.seed_seen == self.die_seed:
            if self.t == 3:
                os._exit(1)
        return np.array([self.seed_seen, float(self.t)]), 1.0, False, False, {}


def reset_seeds(cage) -> list[int]:
    """Reset every env of ``cage``; return the seed each received."""
    with allocate(cage, 1) as tree:
        cage.reset(tree.observation[0])
        return [int(s) for s in tree.observation[0][:, 0]]


def master_streams(seeds: Seeds) -> list[int]:
    return [
        seeds.python,
        seeds.numpy,
        seeds.torch,
        seeds.decorrelation,
        seeds.replay,
        seeds.actions,
        *seeds.envs,
        *seeds.eval_envs,
    ]


@settings(max_examples=50, deadline=None)
@given(master=st.integers(0, 2**63), n_envs=st.integers(1, 12))
def test_every_stream_is_distinct(master, n_envs):
    seeds = Seeds.from_master(master, n_envs=n_envs, n_eval_envs=n_envs)
    derived = [action_space_seed(s) for s in (*seeds.envs, *seeds.eval_envs)]
    derived += [restart_seed(s, r) for s in seeds.envs for r in (1, 2)]
    derived += [actions_seed(master, i) for i in range(1, n_envs)]  # Ray actors
    every = master_streams(seeds) + derived
    assert len(set(every)) == len(every)


def test_env_seeds_are_not_the_python_numpy_torch_seeds():
    # the cages' seed of env i once was SeedSequence(master, spawn_key=(i,)):
    # env 0's seed equalled the python seed, env 1's the numpy seed
    for master in range(20):
        seeds = Seeds.from_master(master, n_envs=4)
        cage_seeds = [env_seed(master, i) for i in range(4)]
        assert cage_seeds == list(seeds.envs)
        assert not {seeds.python, seeds.numpy, seeds.torch} & set(cage_seeds)


def test_scheme_is_the_documented_seed_sequence():
    seeds = Seeds.from_master(99, n_envs=2, n_eval_envs=1)
    assert seeds.envs[1] == derive_seed(99, Stream.ENVS, 1)
    sequence = np.random.SeedSequence(99, spawn_key=(int(Stream.EVAL_ENVS), 0))
    word = int(sequence.generate_state(1, np.uint32)[0])
    assert seeds.eval_envs[0] == word & (2**31 - 1)  # the top bit cleared
    assert seeds.replay == derive_seed(99, 6) and seeds.decorrelation == derive_seed(
        99, 5
    )


def test_serial_cage_uses_the_seeds_metadata_records(tmp_path):
    seeds = Seeds.from_master(1234, n_envs=5, n_eval_envs=3)
    run = RunDirectory.create(tmp_path, "seeds", seeds=seeds)
    recorded = json.loads(run.metadata_path.read_text())["seeds"]
    assert Seeds.from_dict(recorded) == seeds
    with SerialCage(SeedEchoEnv, 5, options=CageOptions(seed=seeds.master)) as cage:
        assert reset_seeds(cage) == recorded["envs"]
    with SerialCage(SeedEchoEnv, 5, options=CageOptions(seed=seeds.envs)) as cage:
        assert reset_seeds(cage) == recorded["envs"]
        for env, seed in zip(cage._group.envs, seeds.envs):
            expected = gym.spaces.Discrete(2)
            expected.seed(action_space_seed(seed))
            # the probe step sampled a copy of a probe env's space: none taken
            assert [env.action_space.sample() for _ in range(20)] == [
                expected.sample() for _ in range(20)
            ]
    with SerialCage(SeedEchoEnv, 3, options=CageOptions(seed=seeds.eval_envs)) as cage:
        assert reset_seeds(cage) == recorded["eval_envs"]


def test_process_cage_and_offsets_use_the_same_seeds():
    seeds = Seeds.from_master(7, n_envs=6)
    with ProcessCage(
        SeedEchoEnv, 6, options=CageOptions(seed=seeds.master), layout=ProcessLayout(n_workers=2, main_process_envs=1),
        start_method="fork",
    ) as cage:  # fmt: skip
        assert reset_seeds(cage) == list(seeds.envs)
    with ProcessCage(
        SeedEchoEnv,
        6,
        options=CageOptions(seed=seeds.envs),
        layout=ProcessLayout(n_workers=2),
        start_method="fork",
    ) as cage:
        assert reset_seeds(cage) == list(seeds.envs)
    with SerialCage(
        SeedEchoEnv, 3, options=CageOptions(seed=seeds.master, env_offset=3)
    ) as cage:
        assert reset_seeds(cage) == list(seeds.envs[3:])
    cages = build_alternating_cages(
        SeedEchoEnv,
        6,
        options=CageOptions(seed=seeds.envs),
        share_core=False,
        start_method="fork",
    )
    try:
        assert reset_seeds(cages[0]) + reset_seeds(cages[1]) == list(seeds.envs)
    finally:
        for cage in cages:
            cage.close()
    with build_cage(
        SeedEchoEnv, 6, parallel="serial", options=CageOptions(seed=seeds.envs)
    ) as cage:
        assert reset_seeds(cage) == list(seeds.envs)


def test_a_restarted_worker_gets_fresh_distinct_seeds():
    seeds = Seeds.from_master(3, n_envs=2)
    factory = partial(SeedEchoEnv, die_seed=seeds.envs[1])
    with ProcessCage(
        factory, 2, options=CageOptions(seed=seeds.master), layout=ProcessLayout(envs_per_worker=1),
        on_worker_death="restart", start_method="fork",
    ) as cage, allocate(cage, 6) as tree:  # fmt: skip
        cage.reset(tree.observation[0])
        for t in range(6):
            cage.step(tree.action[t], slots(tree, t))
        lost_at = int(np.flatnonzero(tree.truncated[:, 1])[0])
        after = tree.observation[lost_at + 1 :, 1, 0]
        assert set(after.tolist()) == {restart_seed(seeds.envs[1], 1)}
        assert set(tree.observation[:, 0, 0].tolist()) == {seeds.envs[0]}
        assert restart_seed(seeds.envs[1], 1) not in master_streams(seeds)


@pytest.mark.parametrize(
    "seed, match",
    [
        (-1, ">= 0"),
        (True, "master seed"),
        (1.5, "master seed"),
        ("3", "master seed"),
        ([1, 2], "2 per-env seeds but the cage has 3"),
        ([1, 2, -3], r"seed\[2\] must be >= 0"),
        ([1, 2, None], r"seed\[2\] must be a non-negative int"),
    ],
)
def test_bad_seeds_are_named(seed, match):
    with pytest.raises(ConfigError, match=match):
        resolve_env_seeds(seed, range(3))
    with pytest.raises(ConfigError, match=match):
        SerialCage(SeedEchoEnv, 3, options=CageOptions(seed=seed))


def test_eval_seeds_missing_from_seeds_is_a_clear_error():
    seeds = Seeds.from_master(0, n_envs=2)  # no n_eval_envs
    with pytest.raises(ConfigError, match="0 per-env seeds but the cage has 2"):
        SerialCage(SeedEchoEnv, 2, options=CageOptions(seed=seeds.eval_envs))


def test_the_seeds_size_error_names_the_field_for_the_case():
    """Eval seeds given to a training cage point at seeds.envs; training
    seeds given to an evaluation cage at seeds.eval_envs; other sequences
    name both."""
    seeds = Seeds.from_master(0, n_envs=4, n_eval_envs=2)
    with pytest.raises(ConfigError) as info:
        SerialCage(
            SeedEchoEnv, 4, options=CageOptions(seed=seeds.eval_envs)
        )  # a training cage
    assert "these are seeds.eval_envs: a training cage takes seeds.envs" in str(
        info.value
    )
    with pytest.raises(ConfigError) as info:
        SerialCage(
            SeedEchoEnv, 2, options=CageOptions(seed=seeds.envs)
        )  # an evaluation cage
    assert "these are seeds.envs: an evaluation cage takes seeds.eval_envs" in str(
        info.value
    )
    with pytest.raises(ConfigError) as info:
        SerialCage(SeedEchoEnv, 3, options=CageOptions(seed=[1, 2]))
    message = str(info.value)
    assert "n_envs=3).envs" in message and "n_eval_envs=3).eval_envs" in message
    # the field survives a round trip through the run's metadata and pickle
    again = Seeds.from_dict(seeds.to_dict())
    assert again == seeds and again.eval_envs.field == "eval_envs"
    assert pickle.loads(pickle.dumps(seeds)).envs.field == "envs"


def test_old_metadata_without_new_streams_reads_back():
    seeds = Seeds.from_master(11, n_envs=2)
    old = {
        k: v
        for k, v in seeds.to_dict().items()
        if k not in ("decorrelation", "replay", "actions")
    }
    assert Seeds.from_dict(old) == seeds


def test_same_observations_whatever_the_seed_form():
    observations = []
    for seed in (5, Seeds.from_master(5, n_envs=3).envs):
        with (
            SerialCage(SeedEchoEnv, 3, options=CageOptions(seed=seed)) as cage,
            allocate(cage, 4) as tree,
        ):
            cage.reset(tree.observation[0])
            for t in range(4):
                cage.step(tree.action[t], slots(tree, t))
            observations.append(np.asarray(tree[fields.OBSERVATION]).copy())
    np.testing.assert_array_equal(*observations)


@settings(max_examples=200, deadline=None)
@given(master=st.integers(0, 2**128), n_envs=st.integers(1, 16))
def test_every_derived_seed_fits_a_signed_32_bit_int(master, n_envs):
    """C++ envs (hanabi) take a signed int: no seed parllel derives reaches 2**31."""
    seeds = Seeds.from_master(master, n_envs=n_envs, n_eval_envs=n_envs)
    every = master_streams(seeds)
    every += [action_space_seed(s) for s in (*seeds.envs, *seeds.eval_envs)]
    every += [restart_seed(s, r) for s in seeds.envs for r in (1, 2, 3)]
    every += list(resolve_env_seeds(master, range(n_envs)) or ())
    every += [actions_seed(master, i) for i in range(n_envs)]
    assert all(0 <= s < 2**31 for s in every)


# python, numpy, torch, decorrelation, replay, envs 0-2, eval env 0 of master 1234
PINNED_1234 = (
    1923223294,
    2093418128,
    1196192930,
    1089449271,
    1117281032,
    556500490,  # the word 2703984138 with its top bit cleared
    1217760759,
    1498993701,
    1855634985,
)


def test_seed_derivations_are_pinned():
    """The same master gives the same seeds on every machine and release; a
    word below 2**31 is its own seed, one above loses its top bit."""
    seeds = Seeds.from_master(1234, n_envs=3, n_eval_envs=1)
    words = [
        int(np.random.SeedSequence(1234, spawn_key=(3, i)).generate_state(1)[0])
        for i in range(3)
    ]
    assert list(seeds.envs) == [w % 2**31 for w in words]
    assert (
        seeds.python,
        seeds.numpy,
        seeds.torch,
        seeds.decorrelation,
        seeds.replay,
        *seeds.envs,
        seeds.eval_envs[0],
    ) == PINNED_1234
    assert Seeds.from_master(1234, n_envs=3, n_eval_envs=1) == seeds
    assert seeds.actions == actions_seed(1234, 0) == 705500170
    assert action_space_seed(seeds.envs[0]) == 63904229
    assert restart_seed(seeds.envs[0], 1) == 131012918
