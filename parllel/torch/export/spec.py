"""``policy_spec.json``: how to load a run's policy from its checkpoints.

The spec is a policy file's header (architecture, spaces, provenance; see
:mod:`parllel.torch.export.artifact`) without weights, plus the names of the
checkpoint objects holding the policy's weights and its observation
normalizer's statistics. :func:`~parllel.patterns.run_training` writes it
before training, so a run stopped before its export (a second Ctrl-C, a
crash) still loads from its newest checkpoint.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from parllel.errors import PolicyFileError
from parllel.torch.export.artifact import (
    PolicyRecord,
    build_record,
    check_header,
    describe_policy,
)
from parllel.torch.export.builders import agent_builder
from parllel.torch.export.factory import factory_reference
from parllel.torch.export.normalizer import normalizer_to_data

__all__ = ["SPEC_FILE", "read_policy_spec", "record_from_spec", "write_policy_spec"]

SPEC_FORMAT = "parllel-policy-spec"
SPEC_FILE = "policy_spec.json"
"""the file of a run directory saying how to load a policy from its checkpoints"""


def _object_name(objects: Mapping[str, Any], target: Any) -> str | None:
    return next((name for name, obj in objects.items() if obj is target), None)


def write_policy_spec(
    run_dir: str | os.PathLike[str],
    agent: Any,
    *,
    checkpoint_objects: Mapping[str, Any],
    observation_normalizer: Any = None,
    **describe: Any,
) -> Path:
    """Write ``policy_spec.json``: how to load the policy from the run's checkpoints.

    Args:
        run_dir: the run directory.
        agent: the agent (as for :func:`export_policy`).
        checkpoint_objects: the runner's ``checkpoint_objects``; the policy's
            modules and normalizer are found among them by identity.
        observation_normalizer: the run's observation normalizer, if any.
        **describe: ``algorithm``, ``env_id``, ... as for :func:`export_policy`.

    Returns:
        The spec file.
    """
    describe["env_factory"] = factory_reference(describe.get("env_factory"), run_dir)
    header = describe_policy(agent, **describe)
    modules = agent_builder(header["architecture"]["builder"]).modules(agent)
    header["format"] = SPEC_FORMAT
    header["checkpoint_objects"] = {
        name: _object_name(checkpoint_objects, module)
        for name, module in modules.items()
    }
    if observation_normalizer is not None:
        normalizer = normalizer_to_data(observation_normalizer, with_state=False)
        normalizer["checkpoint_object"] = _object_name(
            checkpoint_objects, observation_normalizer
        )
        header["observation_normalizer"] = normalizer
    else:
        header["observation_normalizer"] = None
    file = Path(run_dir) / SPEC_FILE
    temp = file.with_name(f".{file.name}.tmp")
    temp.write_text(json.dumps(header, indent=2) + "\n")
    os.replace(temp, file)
    return file


def read_policy_spec(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check a ``policy_spec.json`` written by :func:`write_policy_spec`."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise PolicyFileError(f"{path} does not exist") from None
    except (OSError, ValueError) as error:
        raise PolicyFileError(f"cannot read {path}: {error}") from error
    check_header(data, path, SPEC_FORMAT)
    return data


def record_from_spec(
    spec: Mapping[str, Any], objects: Mapping[str, Any], checkpoint: Path
) -> PolicyRecord:
    """A :class:`PolicyRecord` from a spec and a checkpoint's ``objects``.

    Raises:
        PolicyFileError: if the checkpoint lacks an object the spec names.
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
    normalizer = spec.get("observation_normalizer")
    if normalizer is not None:
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
        normalizer = {
            **normalizer,
            "leaves": {
                path: {**leaf, **state[path]}
                for path, leaf in normalizer["leaves"].items()
            },
        }
    return build_record(spec, weights, normalizer, checkpoint)
