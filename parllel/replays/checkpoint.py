"""Saving and restoring a :class:`~parllel.replays.ReplayStorage`.

The replays' ``state_dict`` / ``load_state_dict`` call these (the storage
itself does not import this module: no import circle).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from parllel.errors import ConfigError
from parllel.replays.final_observations import map_leaves
from parllel.replays.rows import ROW_FIELDS, write_rows
from parllel.replays.storage import ReplayStorage
from parllel.tree import tree_items

__all__ = ["COUNTED_STATE_ENTRIES", "load_storage_state", "storage_state"]

#: Entries of a replay's ``state_dict`` whose first axis counts the saved
#: episode ends, so it differs from a fresh replay's (see
#: :func:`parllel.checkpoints.compatibility.check_state_shapes`'s ``counted``).
COUNTED_STATE_ENTRIES = ("storage.contents.final_observations",)


def storage_state(
    storage: ReplayStorage, include_contents: bool, copy: bool = True
) -> dict[str, Any]:
    """Counters, the tree's window position and optionally the rows.

    The contents hold every stored row of the row fields and the final
    observations of the stored steps that ended an episode
    (``contents["final_observations"]``: ``rows``, ``envs``, ``observations``).
    ``copy=False`` gives views of the rows instead of copies: enough to
    compare shapes before a resume, without a second replay in memory.
    """
    state: dict[str, Any] = {
        "cursor": storage.cursor,
        "size": storage.size,
        "steps_recorded": storage.steps_recorded,
        "steps_dropped_early": storage.steps_dropped_early,
        "window_start": storage.window_start(),
        "full_size": storage.full_size,
        "batch_shape": (storage.batch_length, storage.num_envs),
    }
    if include_contents:
        contents = {
            name: map_leaves(storage.rows[name], np.array if copy else np.asarray)
            for name in ROW_FIELDS
        }
        rows, envs = storage.ended_steps()
        contents["final_observations"] = {
            "rows": rows,
            "envs": envs,
            "observations": storage.final_observation(rows, envs),
        }
        state["contents"] = contents
    return state


def load_storage_state(storage: ReplayStorage, state: Mapping[str, Any]) -> None:
    """Restore :func:`storage_state` into ``storage``.

    With contents, the tree is rotated until its window is where it was
    saved, every row is written back and the final observations go into the
    table (a smaller table than the saved replay's may drop the oldest steps,
    as when recording). Without contents the replay restarts empty, aligned with
    the tree's current window (counters are kept).

    Raises:
        ConfigError: the state was saved from a differently shaped tree.
    """
    shape = (storage.batch_length, storage.num_envs)
    if (
        int(state["full_size"]) != storage.full_size
        or tuple(state["batch_shape"]) != shape
    ):
        raise ConfigError(
            f"replay state of full_size {state['full_size']} and batch_shape "
            f"{tuple(state['batch_shape'])} does not fit this tree "
            f"({storage.full_size}, {shape})"
        )
    storage.steps_recorded = int(state["steps_recorded"])
    storage.steps_dropped_early = int(state.get("steps_dropped_early", 0))
    storage.episode_break = True  # the sampler restarts its envs
    storage.final_observations.clear()
    if "contents" not in state:
        storage.cursor, storage.size = storage.window_start(), 0
        return
    for _ in range(storage.full_size // storage.batch_length + 1):
        if storage.window_start() == int(state["window_start"]):
            break
        storage.tree.rotate()
    contents = state["contents"]
    for name in ROW_FIELDS:
        write_rows(storage.tree[name], contents[name])
    storage.cursor, storage.size = int(state["cursor"]), int(state["size"])
    saved = contents["final_observations"]
    rows = np.asarray(saved["rows"], np.int64)
    envs = np.asarray(saved["envs"], np.int64)
    observations = saved["observations"]
    values = [np.asarray(leaf) for _, leaf in tree_items(observations)]
    storage.insert_final_observations(rows, envs, values)
