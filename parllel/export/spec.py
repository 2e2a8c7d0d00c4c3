"""``policy_spec.json``: how to load a run's policy from its checkpoints.

The spec is a policy file's header (:mod:`parllel.export.header`) without
weights, plus the names of the checkpoint objects holding the policy's
weights and its observation normalizer's statistics.
:func:`~parllel.runners.run_training` writes it before training (each
backend's ``PolicyExport.write_spec``), so a run stopped before its export
(a second Ctrl-C, a crash) still loads from its newest checkpoint. This
module holds what both backends share: the file, the checkpoint objects'
lookup and the choice between a run's export and its newest checkpoint.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from parllel.errors import PolicyFileError
from parllel.export.checkpoints import newest_checkpoint_objects, newest_checkpoint_step
from parllel.export.header import SPEC_FORMAT, check_header
from parllel.export.normalizer import normalizer_to_data

__all__ = [
    "SPEC_FILE",
    "CheckpointSource",
    "checkpoint_source",
    "normalizer_from_checkpoint",
    "read_policy_spec",
    "spec_weights",
    "write_spec_file",
]

SPEC_FILE = "policy_spec.json"
"""the file of a run directory saying how to load a policy from its checkpoints"""


def _object_name(objects: Mapping[str, Any], target: Any) -> str | None:
    return next((name for name, obj in objects.items() if obj is target), None)


def write_spec_file(
    run_dir: str | os.PathLike[str],
    header: Mapping[str, Any],
    weights: Mapping[str, Any],
    checkpoint_objects: Mapping[str, Any],
    observation_normalizer: Any = None,
) -> Path:
    """Write ``policy_spec.json`` (atomically) for a policy's ``header``.

    Args:
        run_dir: the run directory.
        header: the policy's header (:func:`~parllel.export.header.policy_header`).
        weights: ``{name in the policy: object}``; each object is found by
            identity among ``checkpoint_objects``.
        checkpoint_objects: the runner's ``checkpoint_objects``.
        observation_normalizer: the run's observation normalizer, if any
            (likewise found among them).

    Returns:
        The spec file.
    """
    spec = dict(header)
    spec["format"] = SPEC_FORMAT
    spec["checkpoint_objects"] = {
        name: _object_name(checkpoint_objects, obj) for name, obj in weights.items()
    }
    if observation_normalizer is not None:
        normalizer = normalizer_to_data(observation_normalizer, with_state=False)
        normalizer["checkpoint_object"] = _object_name(
            checkpoint_objects, observation_normalizer
        )
        spec["observation_normalizer"] = normalizer
    else:
        spec["observation_normalizer"] = None
    file = Path(run_dir) / SPEC_FILE
    temp = file.with_name(f".{file.name}.tmp")
    temp.write_text(json.dumps(spec, indent=2) + "\n")
    os.replace(temp, file)
    return file


def read_policy_spec(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check a ``policy_spec.json`` written by :func:`write_spec_file`.

    Raises:
        PolicyFileError: there is no such file.
        PolicyFileError: it cannot be read or is not a spec of a known format.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise PolicyFileError(f"{path} does not exist") from None
    except (OSError, ValueError) as error:
        raise PolicyFileError(f"cannot read {path}: {error}") from error
    check_header(data, path, SPEC_FORMAT)
    return data


def spec_weights(
    spec: Mapping[str, Any], objects: Mapping[str, Any], checkpoint: Path
) -> dict[str, Any]:
    """``{name in the policy: checkpoint object state}`` of the objects the spec names.

    Raises:
        PolicyFileError: the checkpoint lacks an object the spec names.
    """
    weights = {}
    for module, name in dict(spec.get("checkpoint_objects") or {}).items():
        if name is None or name not in objects:
            raise PolicyFileError(
                f"checkpoint {checkpoint} does not hold the policy's {module!r} "
                f"weights (spec names checkpoint object {name!r}; it has "
                f"{sorted(objects)})"
            )
        weights[module] = objects[name]
    return weights


def normalizer_from_checkpoint(
    spec: Mapping[str, Any], objects: Mapping[str, Any], checkpoint: Path
) -> dict[str, Any] | None:
    """The spec's observation normalizer with the checkpoint's statistics (or None).

    Raises:
        PolicyFileError: the checkpoint lacks the normalizer or a leaf's statistics.
    """
    normalizer = spec.get("observation_normalizer")
    if normalizer is None:
        return None
    name = normalizer.get("checkpoint_object")
    if name is None or name not in objects:
        raise PolicyFileError(
            f"checkpoint {checkpoint} does not hold the observation "
            f"normalizer's statistics (checkpoint object {name!r})"
        )
    state = objects[name]
    missing = sorted(set(normalizer["leaves"]) - set(state))
    if missing:
        raise PolicyFileError(
            f"checkpoint {checkpoint}: the observation normalizer {name!r} has "
            f"no statistics for leaves {missing}"
        )
    return {
        **normalizer,
        "leaves": {
            path: {**leaf, **state[path]} for path, leaf in normalizer["leaves"].items()
        },
    }


class CheckpointSource(NamedTuple):
    """Where a run's policy loads from when not from its export."""

    spec: dict[str, Any]
    checkpoint: Path
    step: int
    objects: dict[str, Any]


def checkpoint_source(
    run_dir: Path, export_file: str, exported_steps: int | None
) -> CheckpointSource | None:
    """The run's spec and newest checkpoint, if its policy loads from them
    rather than from its export (None: load the export).

    The checkpoint is used when it is newer than the export (at
    ``exported_steps``) or there is no export, and ``policy_spec.json``
    says how to read it; the export wins a tie.

    Raises:
        PolicyFileError: there is no export, and no checkpoint or no spec.
        PolicyFileError: the spec or the checkpoint cannot be read.
    """
    step = newest_checkpoint_step(run_dir)
    spec = (run_dir / SPEC_FILE).is_file()
    if (run_dir / export_file).is_file():
        if step is None or exported_steps is None or not spec:
            return None
        if step <= int(exported_steps):
            return None
    elif step is None or not spec:
        what = "no checkpoint" if step is None else f"no {SPEC_FILE}"
        raise PolicyFileError(
            f"{run_dir} has no {export_file} and {what} to load a policy from "
            "(export_policy writes the first; the checkpoints need the second, "
            "which run_training(..., policy=PolicyExport(...)) writes)"
        )
    path, newest, objects = newest_checkpoint_objects(run_dir)
    return CheckpointSource(
        read_policy_spec(run_dir / SPEC_FILE), path, newest, objects
    )
