"""The header every policy file and spec shares: format, spaces, provenance.

A policy export (torch's ``policy.pt``, JAX's ``policy.npz``) and a run's
``policy_spec.json`` start with the same plain-data header::

    {"format": "parllel-policy", "format_version": 1, "backend": "torch" | "jax",
     "architecture": {"builder": ..., ...},
     "observation_space": {...}, "action_space": {...},
     "trained_with": {"algorithm", "env_id", "env_factory", "env_steps"},
     "metadata": {...}, "versions": {...}}

:func:`policy_header` builds it, :func:`check_header` checks one read back.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterable, Mapping
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

from parllel import DISTRIBUTION
from parllel.checkpoints.checkpoint import CHECKPOINT_PATTERN
from parllel.errors import ConfigError, PolicyFileError
from parllel.export.spaces import space_to_data

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "SPEC_FORMAT",
    "check_header",
    "check_policy_path",
    "policy_header",
]

FORMAT = "parllel-policy"
"""the ``format`` of a policy file"""
SPEC_FORMAT = "parllel-policy-spec"
"""the ``format`` of a run's ``policy_spec.json``"""
FORMAT_VERSION = 1


def _version(name: str) -> str | None:
    try:
        return importlib_metadata.version(name)
    except importlib_metadata.PackageNotFoundError:
        return None


def policy_header(
    *,
    backend: str,
    architecture: Mapping[str, Any],
    spaces: Mapping[str, tuple[Any, Any]],
    libraries: Iterable[str],
    algorithm: str | None = None,
    env_id: str | None = None,
    env_factory: str | None = None,
    env_steps: int | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The header of a policy file (everything but weights and statistics).

    Args:
        backend: the library the policy was trained with (``"torch"``, ``"jax"``).
        architecture: ``{"builder": name, ...}`` as plain data.
        spaces: ``{"observation_space": (given, recorded), "action_space":
            (given, recorded)}``: the space given by the caller (None: the
            one the agent was built from, ``recorded``).
        libraries: the distributions whose versions are recorded, besides
            parllel, gymnasium and numpy.
        algorithm: what trained it.
        env_id: the gymnasium id of the env.
        env_factory: the recorded reference to the env's factory.
        env_steps: env steps of training.
        metadata: more plain values to store.

    Raises:
        ConfigError: a space with no plain form.
    """
    data: dict[str, Any] = {}
    for name, (given, recorded) in spaces.items():
        space = given if given is not None else recorded
        try:
            data[name] = space_to_data(space)
        except ConfigError as error:
            raise ConfigError(
                f"{name}: {error} (the agent was built from {recorded!r}; pass "
                f"{name}= the env's space)"
            ) from None
    versioned = {"parllel": DISTRIBUTION, "gymnasium": "gymnasium", "numpy": "numpy"}
    versioned |= {name: name for name in libraries}
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "backend": backend,
        "architecture": dict(architecture),
        **data,
        "trained_with": {
            "algorithm": algorithm,
            "env_id": env_id,
            "env_factory": env_factory,
            "env_steps": None if env_steps is None else int(env_steps),
        },
        "metadata": dict(metadata or {}),
        "versions": {name: _version(dist) for name, dist in versioned.items()},
    }


def check_header(data: Any, path: Path, expected: str) -> None:
    """Raise :class:`PolicyFileError` unless ``data`` is an ``expected`` file
    (:data:`FORMAT` or :data:`SPEC_FORMAT`) of a version this parllel reads."""
    if not isinstance(data, Mapping) or data.get("format") != expected:
        raise PolicyFileError(f"{path} is not a parllel policy file")
    version = data.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise PolicyFileError(
            f"{path} has policy format {version!r}; this parllel reads up to "
            f"{FORMAT_VERSION}"
        )


def check_policy_path(path: Path) -> None:
    """Raise unless ``path`` is a file that may be a policy file.

    Raises:
        PolicyFileError: there is no such file.
        PolicyFileError: it is a checkpoint (the run directory loads one).
    """
    if not path.is_file():
        raise PolicyFileError(f"policy file {path} does not exist")
    if CHECKPOINT_PATTERN.match(path.name) and not zipfile.is_zipfile(path):
        raise PolicyFileError(
            f"{path} is not a parllel policy file (a checkpoint? pass the run "
            "directory to load_policy)"
        )
