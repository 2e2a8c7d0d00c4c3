"""Per-run statistics equal those of separate runs."""

from __future__ import annotations

import numpy as np

from parllel.transforms import (
    NormalizeObservations,
    NormalizeRewards,
    PerRunObservations,
    PerRunTransform,
)

K, B, T = 2, 3, 5


def tree(columns: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "observation": rng.normal(size=(T + 1, columns, 4)).astype(np.float32) * 3,
        "reward": rng.normal(size=(T, columns)).astype(np.float32),
        "terminated": rng.random((T, columns)) < 0.2,
        "truncated": np.zeros((T, columns), bool),
    }


def run_part(full: dict[str, np.ndarray], run: int) -> dict[str, np.ndarray]:
    columns = slice(run * B, (run + 1) * B)
    return {name: leaf[:, columns].copy() for name, leaf in full.items()}


def test_observations_per_run_equal_separate_normalizers() -> None:
    full = tree(K * B, 0)
    parts = [run_part(full, k) for k in range(K)]
    per_run = PerRunObservations(
        [NormalizeObservations(full, clip=5.0) for _ in range(K)], B
    )
    singles = [NormalizeObservations(part, clip=5.0) for part in parts]
    for t in range(T + 1):
        per_run.normalize(full["observation"][t], update=True)
        for single, part in zip(singles, parts):
            single.normalize(part["observation"][t], update=True)
    for k in range(K):
        np.testing.assert_array_equal(
            full["observation"][:, k * B : (k + 1) * B], parts[k]["observation"]
        )
        assert per_run.runs[k].stats[""].count == singles[k].stats[""].count
    # a subset of rows (final observations), each with its env's run
    envs = np.array([1, 4])
    rows = np.stack([parts[0]["observation"][0][1], parts[1]["observation"][0][1]])
    per_run.normalize(rows, update=False, env_indices=envs)
    want = [parts[k]["observation"][0][1:2].copy() for k in range(K)]
    for single, row in zip(singles, want):
        single.normalize(row, update=False)
    np.testing.assert_array_equal(rows, np.concatenate(want))
    assert not np.array_equal(
        per_run.runs[0].stats[""].mean, per_run.runs[1].stats[""].mean
    )


def test_rewards_per_run_equal_separate_normalizers() -> None:
    full = tree(K * B, 1)
    parts = [run_part(full, k) for k in range(K)]
    fields = ("reward", "terminated", "truncated")
    per_run = PerRunTransform(
        full, lambda t: NormalizeRewards(t, 0.99), K, fields=fields, writes=("reward",)
    )
    singles = [NormalizeRewards(part, 0.99) for part in parts]
    per_run(full)
    for k, (single, part) in enumerate(zip(singles, parts)):
        single(part)
        np.testing.assert_array_equal(
            full["reward"][:, k * B : (k + 1) * B], part["reward"]
        )
    state = per_run.state_dict()
    assert set(state) == {"run0", "run1"}
    per_run.load_state_dict(state)
