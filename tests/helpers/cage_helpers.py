"""Buffers and loops shared by the cage tests."""

from __future__ import annotations

import numpy as np

from parllel import fields
from parllel.cages.env_info import numeric_info_example
from parllel.tree import ArrayDict, buffer_from_example


def allocate(cage, T: int, storage: str = "shared") -> ArrayDict:
    """A [T, B] sample tree for ``cage`` (observation padded for index T)."""
    example = cage.example
    B = cage.n_envs
    tree = ArrayDict(
        {
            fields.OBSERVATION: buffer_from_example(
                example[fields.OBSERVATION], (T, B), storage, padding=1
            ),
            fields.FINAL_OBSERVATION: buffer_from_example(
                example[fields.OBSERVATION], (T, B), storage
            ),
        }
    )
    rest = buffer_from_example(
        {
            fields.ACTION: example[fields.ACTION],
            fields.REWARD: np.float32(0),
            fields.TERMINATED: False,
            fields.TRUNCATED: False,
            fields.ENV_INFO: numeric_info_example(example[fields.ENV_INFO]),
        },
        (T, B),
        storage,
    )
    for key, value in rest.items():
        tree[key] = value
    return tree


def slots(tree: ArrayDict, t: int) -> dict:
    """The step slots of time ``t``."""
    return {
        fields.OBSERVATION: tree.observation[t + 1],
        fields.REWARD: tree.reward[t],
        fields.TERMINATED: tree.terminated[t],
        fields.TRUNCATED: tree.truncated[t],
        fields.ENV_INFO: tree.env_info[t],
        fields.FINAL_OBSERVATION: tree.final_observation[t],
    }


def fill_actions(tree: ArrayDict, space, seed: int = 0) -> None:
    """Deterministic random actions for every step."""
    space.seed(seed)
    T, B = tree.reward.shape
    for t in range(T):
        for b in range(B):
            tree.action[t, b] = space.sample()


def run(cage, T: int, seed: int = 0):
    """Reset, step T times with seeded random actions; return (arrays, trajs)."""
    tree = allocate(cage, T)
    fill_actions(tree, cage.spaces.action, seed)
    cage.reset(tree.observation[0])
    trajs = []
    for t in range(T):
        trajs += cage.step(tree.action[t], slots(tree, t))
    arrays = {path: np.array(leaf.padded_ndarray()) for path, leaf in tree.items_flat()}
    tree.close()
    return arrays, trajs
