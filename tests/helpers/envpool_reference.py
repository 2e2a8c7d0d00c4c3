"""EnvPool stepped directly, as the reference the EnvPoolCage tests compare with."""

from __future__ import annotations

import envpool
import gymnasium as gym
import numpy as np

from parllel.cages import TrajInfo


def random_actions(space: gym.Space, T: int, n: int, seed: int = 0) -> np.ndarray:
    """``[T, n]`` random actions of ``space`` (in its dtype)."""
    space.seed(seed)
    return np.stack([np.stack([space.sample() for _ in range(n)]) for _ in range(T)])


def rows(observation, i: int) -> dict:
    """Env ``i``'s observation by path suffix (a Dict's leaves: ``".key"``)."""
    if isinstance(observation, dict):
        return {f".{key}": np.array(value[i]) for key, value in observation.items()}
    return {"": np.array(observation[i])}


def direct_steps(task: str, kwargs: dict, seeds, actions: np.ndarray) -> dict:
    """EnvPool stepped directly: each env's first ``T`` transitions.

    Returns ``observation``: arrays ``[T + 1, n, ...]`` by path suffix (``""``
    for an array observation, ``".position"`` for a Dict's leaf; row ``t +
    1``: the next observation as a parllel cage stores it, the reset
    observation where the episode ended), ``[T, n]`` rewards, flags and
    infos (routing keys left out), and ``final``: ``{(t, env): the episode's
    last observation}`` (by suffix too).
    """
    T, n = actions.shape[:2]
    pool = envpool.make_gymnasium(task, num_envs=n, seed=list(seeds), **kwargs)
    try:
        observation, _ = pool.reset()
        obs = [[rows(observation, i)] for i in range(n)]
        rewards = [[] for _ in range(n)]
        terminated = [[] for _ in range(n)]
        truncated = [[] for _ in range(n)]
        infos = [[] for _ in range(n)]
        final = {}
        taken = np.zeros(n, int)  # actions each env consumed
        resetting = np.zeros(n, bool)  # its next step is EnvPool's reset
        while (taken < T).any() or resetting.any():
            step_actions = np.stack(
                [actions[min(taken[i], T - 1), i] for i in range(n)]
            )
            o, r, te, tr, info = pool.step(step_actions)
            for i in range(n):
                if resetting[i]:  # NEXT_STEP: the action was ignored
                    # (its reward is 0, but dm_control tasks repeat the last one)
                    assert not te[i] and not tr[i]
                    obs[i][-1] = rows(o, i)
                    resetting[i] = False
                    continue
                if taken[i] >= T:
                    continue
                rewards[i].append(r[i])
                terminated[i].append(te[i])
                truncated[i].append(tr[i])
                infos[i].append({k: v[i] for k, v in info.items() if k != "players"})
                obs[i].append(rows(o, i))
                if te[i] or tr[i]:
                    final[(int(taken[i]), i)] = rows(o, i)
                    resetting[i] = True
                taken[i] += 1
    finally:
        pool.close()
    return {
        "observation": {
            suffix: np.stack(
                [np.stack([step[suffix] for step in o]) for o in obs], axis=1
            )
            for suffix in obs[0][0]
        },
        "reward": np.stack([np.stack(r) for r in rewards], axis=1),
        "terminated": np.array(terminated).T,
        "truncated": np.array(truncated).T,
        "infos": infos,
        "final": final,
    }


def episodes_of(expected: dict) -> list[tuple[int, int, float, bool, bool]]:
    """``(env, length, return, terminated, truncated)`` of each finished episode."""
    T, n = expected["reward"].shape
    found = []
    for i in range(n):
        start = 0
        for t in range(T):
            if expected["terminated"][t, i] or expected["truncated"][t, i]:
                rewards = expected["reward"][start : t + 1, i].astype(np.float64)
                found.append(
                    (
                        i,
                        t + 1 - start,
                        float(np.sum(rewards)),
                        bool(expected["terminated"][t, i]),
                        bool(expected["truncated"][t, i]),
                    )
                )
                start = t + 1
    return sorted(found)


def summary(trajs: list[TrajInfo]) -> list[tuple[int, int, float, bool, bool]]:
    """``(env, length, return, terminated, truncated)`` of each trajectory."""
    return sorted(
        (t.env_index, t.length, t.return_, t.terminated, t.truncated) for t in trajs
    )


def assert_episodes_match(trajs: list[TrajInfo], expected: dict) -> None:
    """The cage's finished episodes are the direct run's, one by one: env,
    length and end flags exactly, the return to float precision (compared
    element by element: ``pytest.approx`` takes no nested structures)."""
    got, wanted = summary(trajs), episodes_of(expected)
    assert len(got) == len(wanted), (got, wanted)
    for episode, reference in zip(got, wanted):
        (env, length, return_, terminated, truncated) = episode
        assert (env, length, terminated, truncated) == (
            reference[0],
            reference[1],
            reference[3],
            reference[4],
        ), (episode, reference)
        np.testing.assert_allclose(return_, reference[2], rtol=1e-6, atol=1e-12)
