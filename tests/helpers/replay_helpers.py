"""A scripted sampler that fills a full-size replay tree, plus a reference history.

Every observation encodes ``[env, episode, step_in_episode]``, actions encode
the global step, so a sampled transition can be checked against the truth.
Episodes end after scripted lengths, by termination or truncation; auto-reset
writes the next episode's reset observation into ``OBSERVATION[t + 1]`` and
the episode's last observation into ``FINAL_OBSERVATION[t]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

from parllel import fields
from parllel.tree import ArrayDict, buffer_from_example

#: scripted episode ends of three envs (``ends`` of :class:`ScriptedSampler`)
SCRIPTED_ENDS = [
    [(3, "term"), (5, "trunc")],
    [(2, "trunc"), (4, "term"), (1, "term")],
    [(1, "trunc"), (6, "term")],
]


def scripted_ends(longest: int) -> st.SearchStrategy[list]:
    """``ends`` of :class:`ScriptedSampler` for up to 3 envs: 1 to 4
    episodes an env, of 1 to ``longest`` steps, each ending by termination
    or truncation."""
    episode = st.tuples(st.integers(1, longest), st.sampled_from(["term", "trunc"]))
    return st.lists(st.lists(episode, min_size=1, max_size=4), min_size=3, max_size=3)


def assert_equal_trees(a: Any, b: Any) -> None:
    """Nested dicts of arrays with the same keys, values and dtypes."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_equal_trees(a[key], b[key])
    else:
        np.testing.assert_array_equal(a, b)
        assert np.asarray(a).dtype == np.asarray(b).dtype


def build_replay_tree(
    T: int, B: int, N: int, dict_obs: bool = False, final_slot: bool = False
) -> ArrayDict:
    """A replay tree of full-size Arrays with the fields replays need.

    ``final_slot=True``: ``FINAL_OBSERVATION`` is a ``[T, B]`` slot (as
    ``build_sample_tree(..., full_size=N)`` makes it) instead of full-size.
    """
    obs_example = (
        {"state": np.zeros(3, np.float32), "extra": np.zeros((), np.int64)}
        if dict_obs
        else np.zeros(3, np.float32)
    )

    def alloc(example, padding=0):
        return buffer_from_example(example, (T, B), padding=padding, full_size=N)

    return ArrayDict(
        {
            fields.OBSERVATION: alloc(obs_example, padding=1),
            fields.ACTION: alloc(np.int64(0)),
            fields.REWARD: alloc(np.float32(0)),
            fields.TERMINATED: alloc(np.bool_(False)),
            fields.TRUNCATED: alloc(np.bool_(False)),
            fields.DONE: alloc(np.bool_(False)),
            fields.FINAL_OBSERVATION: (
                buffer_from_example(obs_example, (T, B))
                if final_slot
                else alloc(obs_example)
            ),
        }
    )


def encode(env: int, episode: int, step: int, dict_obs: bool):
    state = np.array([env, episode, step], np.float32)
    return {"state": state, "extra": np.int64(episode)} if dict_obs else state


@dataclass
class Step:
    """The truth about one env step (global step ``g``, env ``b``)."""

    observation: tuple
    action: int
    reward: float
    next_observation: tuple  # the episode's own next observation (final if done)
    terminated: bool
    truncated: bool


@dataclass
class ScriptedSampler:
    """Writes scripted episodes into a replay tree's window, batch by batch.

    ``ends[b]`` is a list of ``(length, "term" | "trunc")`` cycled per env.
    ``rewards`` (optional) is an ``[steps, B]`` array; default distinct values.
    """

    tree: ArrayDict
    ends: list
    dict_obs: bool = False
    rewards: np.ndarray | None = None
    history: dict = field(default_factory=dict)  # (g, b) -> Step
    global_step: int = 0

    def __post_init__(self):
        T, B = self.tree[fields.ACTION].batch_shape
        self.T, self.B = T, B
        self.episode = [0] * B
        self.step_in_episode = [0] * B
        self.end_index = [0] * B
        for b in range(B):
            self.tree[fields.OBSERVATION][0, b] = encode(b, 0, 0, self.dict_obs)

    def record_into(self, replay: Any, batches: int) -> None:
        """Collect ``batches`` batches (the tree rotated before each one but
        the very first) and record each into ``replay``."""
        for _ in range(batches):
            if self.global_step:
                self.tree.rotate()
            self.collect()
            replay.record_batch()

    def _state(self, b):
        return (b, self.episode[b], self.step_in_episode[b])

    def collect(self):
        tree, B = self.tree, self.B
        for t in range(self.T):
            g = self.global_step
            for b in range(B):
                length, kind = self.ends[b][self.end_index[b] % len(self.ends[b])]
                obs = self._state(b)
                reward = (
                    float(self.rewards[g, b])
                    if self.rewards is not None
                    else float(g * 10 + b)
                )
                next_state = (b, obs[1], obs[2] + 1)
                done = next_state[2] >= length
                terminated, truncated = (
                    done and kind == "term",
                    done and kind == "trunc",
                )
                tree[fields.ACTION][t, b] = g
                tree[fields.REWARD][t, b] = reward
                tree[fields.TERMINATED][t, b] = terminated
                tree[fields.TRUNCATED][t, b] = truncated
                tree[fields.DONE][t, b] = done
                if done:
                    tree[fields.FINAL_OBSERVATION][t, b] = encode(
                        *next_state, self.dict_obs
                    )
                    self.episode[b] += 1
                    self.step_in_episode[b] = 0
                    self.end_index[b] += 1
                else:
                    # garbage where no episode ended: must never be read
                    tree[fields.FINAL_OBSERVATION][t, b] = encode(
                        -1, -1, -1, self.dict_obs
                    )
                    self.step_in_episode[b] += 1
                tree[fields.OBSERVATION][t + 1, b] = encode(
                    *self._state(b), self.dict_obs
                )
                self.history[(g, b)] = Step(
                    obs, g, reward, next_state, terminated, truncated
                )
            self.global_step += 1


def state_of(observation, index: int, dict_obs: bool = False) -> tuple:
    """The ``(env, episode, step)`` tuple encoded in sample ``index``."""
    leaf = observation["state"] if dict_obs else observation
    return tuple(int(x) for x in leaf[index])
