"""Atomic checkpoints, finding the latest one, compatibility checks, RNG state.

A checkpoint is one file ``checkpoint_{step:012d}.pt`` holding any nested
dict of numpy arrays, library tensors (stored portably) and Python values,
written atomically (a crash leaves the previous checkpoints or the new one).
Reading unpickles: load only checkpoints you trust. See docs/logging.md
("Checkpoints")::

    save_checkpoint(run.checkpoints_dir, state, step=step, keep_last=3)
    state = load_checkpoint(latest_checkpoint(run.path))
    check_state_dict(state["model"], model, name="model")
    restore_rng_state(state["rng"], rng)
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from parllel._warnings import warn_at_caller
from parllel.backends import StatefulGenerator, backend_named, loaded_backends
from parllel.checkpoints.compatibility import (  # noqa: F401 - re-exported here
    check_config,
    check_state_dict,
    check_state_shapes,
)
from parllel.checkpoints.files import atomic_write, read_state, write_state
from parllel.errors import (
    CheckpointError,
    CheckpointMismatchError,
    ParllelWarning,
)

CHECKPOINT_PATTERN = re.compile(r"^checkpoint_(\d+)\.pt$")
FORMAT_KEY = "parllel_checkpoint"
FORMAT_VERSION = 2
_TEMP_PREFIX = ".checkpoint_"
UNREADABLE_SUFFIX = ".unreadable"


def checkpoint_name(step: int) -> str:
    """The file name of the checkpoint at ``step`` (sorts by step)."""
    return f"checkpoint_{int(step):012d}.pt"


def list_checkpoints(directory: str | os.PathLike[str]) -> list[Path]:
    """Checkpoint files in ``directory`` (or its ``checkpoints/``), oldest first."""
    directory = _checkpoint_dir(Path(directory))
    if not directory.is_dir():
        return []
    found = [
        (int(match.group(1)), entry)
        for entry in directory.iterdir()
        if (match := CHECKPOINT_PATTERN.match(entry.name)) and entry.is_file()
    ]
    return [entry for _, entry in sorted(found)]


def _checkpoint_dir(directory: Path) -> Path:
    """Accept a run directory (with ``checkpoints/``) or the directory itself."""
    nested = directory / "checkpoints"
    return nested if nested.is_dir() else directory


def latest_checkpoint(run_dir: str | os.PathLike[str]) -> Path | None:
    """The checkpoint with the highest step, or None if there is none.

    Args:
        run_dir: a run directory (its ``checkpoints/`` is searched) or a
            directory of checkpoint files.
    """
    checkpoints = list_checkpoints(run_dir)
    return checkpoints[-1] if checkpoints else None


def save_checkpoint(
    directory: str | os.PathLike[str],
    state: Mapping[str, Any],
    *,
    step: int,
    keep_last: int | None = 3,
) -> Path:
    """Save ``state`` atomically as ``directory/checkpoint_{step}.pt``.

    Then delete all but the ``keep_last`` newest checkpoints (by step) and any
    temporary files an earlier crash left behind. The old checkpoints are only
    deleted after the new one is safely in place.

    Args:
        directory: where checkpoints go (created if needed); a run directory
            is accepted and its ``checkpoints/`` used.
        state: nested dict of tensors, numpy arrays and Python values.
        step: the global step (env steps) the state belongs to.
        keep_last: how many checkpoints to keep, or None to keep all.

    Returns:
        The path of the new checkpoint.
    """
    if keep_last is not None and keep_last < 1:
        raise CheckpointError(f"keep_last must be >= 1 or None, got {keep_last}")
    directory = _checkpoint_dir(Path(directory))
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob(f"{_TEMP_PREFIX}*.tmp"):
        stale.unlink(missing_ok=True)
    envelope = {FORMAT_KEY: FORMAT_VERSION, "step": int(step), "state": dict(state)}
    path = atomic_write(
        directory / checkpoint_name(step), lambda file: write_state(file, envelope)
    )
    if keep_last is not None:
        for old in list_checkpoints(directory)[:-keep_last]:
            old.unlink(missing_ok=True)
    return path


def _read_checkpoint_file(path: Path, device: str | None) -> dict[str, Any]:
    """The ``state`` of one checkpoint file (see :func:`load_checkpoint`)."""
    try:
        with path.open("rb") as file:
            envelope = read_state(file, device)
    except Exception as error:
        raise CheckpointError(f"could not read checkpoint {path}: {error}") from error
    if not isinstance(envelope, dict) or FORMAT_KEY not in envelope:
        raise CheckpointError(f"{path} is not a parllel checkpoint")
    if envelope[FORMAT_KEY] != FORMAT_VERSION:
        raise CheckpointError(
            f"{path} has checkpoint format {envelope[FORMAT_KEY]}; this parllel "
            f"reads format {FORMAT_VERSION}"
        )
    return envelope["state"]


def load_checkpoint(
    path: str | os.PathLike[str], *, device: str | None = "cpu"
) -> dict[str, Any]:
    """Load the state saved by :func:`save_checkpoint`.

    Args:
        path: a checkpoint file, or a directory (run or checkpoints), in which
            case its newest readable checkpoint is loaded (see
            :func:`load_latest_checkpoint`).
        device: where tensors go (the backend's device name; None: where
            they were saved from).

    Returns:
        The ``state`` dict as it was saved.

    Raises:
        CheckpointError: if there is no such file or no checkpoint in
            the directory.
        CheckpointError: if the file (or every file of the directory)
            cannot be read or is not a parllel checkpoint.
        CheckpointError: if the file was written by a newer checkpoint format.
    """
    path = Path(path)
    if path.is_dir():
        return load_latest_checkpoint(path, device=device)[1]
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    return _read_checkpoint_file(path, device)


def load_latest_checkpoint(
    directory: str | os.PathLike[str],
    *,
    device: str | None = "cpu",
    set_aside_unreadable: bool = False,
) -> tuple[Path, dict[str, Any]]:
    """Load the newest checkpoint of a directory that can be read.

    A newer checkpoint that cannot be read (truncated by a full disk, damaged
    in a copy) is skipped with a :class:`~parllel.errors.ParllelWarning`
    naming it, the error and the checkpoint loaded instead.

    Args:
        directory: a run directory (its ``checkpoints/``) or a directory of
            checkpoint files.
        device: where tensors go (the backend's device name; None: where
            they were saved from).
        set_aside_unreadable: rename each skipped file to
            ``<name>.unreadable``, so later runs neither load nor keep it in
            place of a good checkpoint.

    Returns:
        The path of the loaded checkpoint and its ``state``.

    Raises:
        CheckpointError: if the directory holds no checkpoint.
        CheckpointError: if none of its checkpoints can be read.
    """
    candidates = list_checkpoints(directory)
    if not candidates:
        raise CheckpointError(f"no checkpoint_*.pt in {directory}")
    skipped: list[tuple[Path, CheckpointError]] = []
    for path in reversed(candidates):
        try:
            state = _read_checkpoint_file(path, device)
        except CheckpointError as error:
            skipped.append((path, error))
            continue
        for bad, unreadable in skipped:
            cause = unreadable.__cause__ or unreadable
            aside = ""
            if set_aside_unreadable:
                os.replace(bad, bad.with_name(bad.name + UNREADABLE_SUFFIX))
                aside = f", renamed to {bad.name}{UNREADABLE_SUFFIX}"
            warn_at_caller(
                f"checkpoint {bad} is unreadable ({type(cause).__name__}: {cause}"
                f"{aside}); loading {path.name} (step {checkpoint_step(path)}) "
                "instead",
                ParllelWarning,
            )
        return path, state
    raise CheckpointError(
        f"no readable checkpoint in {directory}:\n"
        + "\n".join(f"  {error}" for _, error in skipped)
    )


def checkpoint_step(path: str | os.PathLike[str]) -> int:
    """The step encoded in a checkpoint's file name."""
    match = CHECKPOINT_PATTERN.match(Path(path).name)
    if match is None:
        raise CheckpointError(f"{path} is not named like checkpoint_<step>.pt")
    return int(match.group(1))


# -- RNG state -------------------------------------------------------------------


def capture_rng_state(
    generator: np.random.Generator | None = None,
    generators: Mapping[str, StatefulGenerator] | None = None,
) -> dict[str, Any]:
    """Snapshot python ``random``, numpy's global RNG and the loaded backends'.

    A backend's global RNG (torch's CPU and CUDA ones) is in the snapshot when
    its library is imported (:func:`~parllel.backends.loaded_backends`).

    Args:
        generator: also snapshot this numpy generator.
        generators: also snapshot these generators, by name (e.g.
            ``{"actions": handler.generator}``, the sampler's action draws).

    Returns:
        A picklable dict for a checkpoint; give it to :func:`restore_rng_state`.
    """
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "backends": {
            backend.name: backend.capture_rng() for backend in loaded_backends()
        },
    }
    if generator is not None:
        state["generator"] = generator.bit_generator.state
    if generators:
        state["generators"] = {
            name: named.get_state() for name, named in generators.items()
        }
    return state


def restore_rng_state(
    state: Mapping[str, Any],
    generator: np.random.Generator | None = None,
    generators: Mapping[str, StatefulGenerator] | None = None,
) -> None:
    """Put back the RNG states :func:`capture_rng_state` returned.

    Args:
        state: the snapshot (each backend's RNG in it is restored, importing
            that backend).
        generator: a numpy generator to restore in place; the snapshot must
            contain one, of the same bit generator type.
        generators: generators to restore in place, by the names they were
            captured under; the snapshot must hold each.

    Raises:
        CheckpointMismatchError: if ``generator`` is given but the snapshot has
            no generator state or one of another bit generator, or a
            generator's name is not in the snapshot.
    """
    saved_generators = dict(state.get("generators", {}))
    missing = sorted(set(generators or {}) - set(saved_generators))
    if missing:
        raise CheckpointMismatchError(
            f"the RNG snapshot holds no state of the generators {missing} "
            f"(it holds {sorted(saved_generators)}): was the checkpoint written by "
            "a run whose handler had no seed= (e.g. TorchHandler(..., "
            "seed=seeds.actions))?"
        )
    if generator is not None:
        saved = state.get("generator")
        if saved is None:
            raise CheckpointMismatchError("the RNG snapshot holds no generator state")
        kind = type(generator.bit_generator).__name__
        if saved.get("bit_generator") != kind:
            raise CheckpointMismatchError(
                f"the RNG snapshot is of a {saved.get('bit_generator')} generator, "
                f"the generator to restore is a {kind}"
            )
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    for name, backend_state in state.get("backends", {}).items():
        backend_named(name).restore_rng(backend_state)
    if generator is not None:
        generator.bit_generator.state = state["generator"]
    for name, named in (generators or {}).items():
        named.set_state(saved_generators[name])
