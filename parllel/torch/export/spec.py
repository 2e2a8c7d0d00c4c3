"""``policy_spec.json`` of a torch run: how to load its policy from its checkpoints.

The spec is a policy file's header (architecture, spaces, provenance; see
:mod:`parllel.torch.export.artifact`) without weights, plus the names of the
checkpoint objects holding the policy's modules and its observation
normalizer (the file itself: :mod:`parllel.export.spec`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from parllel.export.factory import factory_reference
from parllel.export.spec import (
    normalizer_from_checkpoint,
    spec_weights,
    write_spec_file,
)
from parllel.torch.export.artifact import (
    PolicyRecord,
    build_record,
    check_torch_backend,
    describe_policy,
)
from parllel.torch.export.builders import agent_builder

__all__ = ["record_from_spec", "write_policy_spec"]


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
    return write_spec_file(
        run_dir, header, modules, checkpoint_objects, observation_normalizer
    )


def record_from_spec(
    spec: Mapping[str, Any], objects: Mapping[str, Any], checkpoint: Path
) -> PolicyRecord:
    """A :class:`PolicyRecord` from a spec and a checkpoint's ``objects``.

    Raises:
        PolicyFileError: if the checkpoint lacks an object the spec names, or
            the spec is of another backend's run (a JAX run's).
    """
    check_torch_backend(spec, checkpoint)
    return build_record(
        spec,
        spec_weights(spec, objects, checkpoint),
        normalizer_from_checkpoint(spec, objects, checkpoint),
        checkpoint,
    )
