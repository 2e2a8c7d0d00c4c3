"""A runner's checkpoint files: the state of a run they hold, writing one
(never with NaN weights) and reading one back, every object checked before
any is loaded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from parllel.checkpoints.checkpoint import (
    load_checkpoint,
    load_latest_checkpoint,
    save_checkpoint,
)
from parllel.checkpoints.compatibility import (
    NEVER_COMPARED,
    check_config,
    check_object,
    config_difference_hint,
    load_object,
)
from parllel.checkpoints.finite import refuse_nonfinite_state
from parllel.errors import CheckpointError, CheckpointMismatchError
from parllel.logging import EpisodeStats
from parllel.runners.callbacks import Stateful

__all__ = [
    "SavedCounters",
    "read_checkpoint",
    "restore_objects",
    "run_state",
    "write_checkpoint",
]


def run_state(
    *,
    env_steps: int,
    updates: int,
    train_stats: EpisodeStats,
    total_steps: int,
    elapsed_s: float,
    rng: Mapping[str, Any],
    config: Mapping[str, Any],
    objects: Mapping[str, Stateful],
) -> dict[str, Any]:
    """A run's checkpoint state: its counters, RNG states, config and the
    ``state_dict()`` of every checkpoint object."""
    return {
        "runner": {
            "env_steps": env_steps,
            "updates": updates,
            "train_stats": train_stats.state_dict(),
            "total_steps": total_steps,
            "elapsed_s": elapsed_s,
        },
        "rng": rng,
        "config": config,
        "objects": {name: obj.state_dict() for name, obj in objects.items()},
    }


class SavedCounters(NamedTuple):
    """The counters a checkpoint's :func:`run_state` holds."""

    env_steps: int
    updates: int
    elapsed_s: float
    total_steps: int | None

    @classmethod
    def of(cls, state: Mapping[str, Any], train_stats: EpisodeStats) -> SavedCounters:
        """The counters of ``state``; ``train_stats`` takes its statistics."""
        runner = state["runner"]
        train_stats.load_state_dict(runner["train_stats"])
        total = runner.get("total_steps")
        return cls(
            int(runner["env_steps"]),
            int(runner["updates"]),
            float(runner.get("elapsed_s", 0.0)),
            None if total is None else int(total),
        )


def write_checkpoint(
    directory: Path, state: Mapping[str, Any], step: int, keep_last: int
) -> Path:
    """Write ``state`` (atomically) as the checkpoint of ``step``, keeping the
    newest ``keep_last``; return its path.

    Raises:
        NonFiniteError: a floating-point array or tensor of
            ``state["objects"]`` holds NaN or inf (NaN weights never replace
            the last good checkpoint); nothing is written.
    """
    refuse_nonfinite_state(state["objects"], directory, step)
    return save_checkpoint(directory, dict(state), step=step, keep_last=keep_last)


def read_checkpoint(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """The checkpoint at ``path`` (a file, or a directory: its newest readable
    one, an unreadable newer one set aside with a warning) and its path."""
    path = Path(path)
    if path.is_dir():
        return load_latest_checkpoint(path, set_aside_unreadable=True)
    return path, load_checkpoint(path)


def restore_objects(
    path: Path,
    state: Mapping[str, Any],
    objects: Mapping[str, Stateful],
    config: Mapping[str, Any],
    config_keys: Sequence[str] | Mapping[str, str] | None,
) -> None:
    """Load every checkpoint object's state, once every one was checked.

    Shapes are checked first (they say what does not fit), then the
    ``config_keys`` that say why.

    Raises:
        CheckpointError: the checkpoint has no state for an object.
        CheckpointMismatchError: an object's tensors or arrays have other
            shapes (followed by the config keys that differ), or a
            ``config_keys`` entry differs; nothing is loaded then.
    """
    saved_config = state.get("config", {})
    saved_objects = state.get("objects", {})
    missing = sorted(set(objects) - set(saved_objects))
    if missing:
        raise CheckpointError(f"checkpoint {path} has no state for {missing}")
    try:
        for name, obj in objects.items():
            check_object(name, obj, saved_objects[name])
    except CheckpointMismatchError as error:
        raise CheckpointMismatchError(
            f"{error}{config_difference_hint(saved_config, config)}"
        ) from None
    if config_keys is not None:
        check_config(saved_config, config, keys=config_keys, ignore=NEVER_COMPARED)
    for name, obj in objects.items():
        load_object(name, obj, saved_objects[name])
