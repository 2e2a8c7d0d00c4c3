"""The numpy policy file (``policy.npz``): a JAX run's export, read without JAX.

One ``numpy.savez`` archive, read with ``numpy.load(allow_pickle=False)``:

- ``header``: the JSON header of :mod:`parllel.export.header`, whose
  ``architecture`` holds ``builder``, ``network`` (the flax modules as
  plain data, evaluated by :mod:`parllel.export.network`) and
  ``distribution`` (:mod:`parllel.export.actions`);
- ``weights/<module>/<path>/<leaf>``: the parameters (the flax pytree's
  nested names joined by ``/``);
- ``normalizer/<i>/{count,mean,m2}``: the statistics of the observation
  normalizer's ``i``-th leaf (its settings are in the header).
"""

from __future__ import annotations

import dataclasses
import json
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from parllel.checkpoints.files import atomic_write
from parllel.errors import PolicyFileError
from parllel.export.header import FORMAT, check_header, check_policy_path

__all__ = [
    "NPZ_POLICY_FILE",
    "NumpyPolicyRecord",
    "is_npz_policy",
    "read_npz_policy",
    "write_npz_policy",
]

NPZ_POLICY_FILE = "policy.npz"
"""a JAX run's export in its run directory (a torch run's is ``policy.pt``)"""
_HEADER = "header"
_STATS = ("count", "mean", "m2")


@dataclasses.dataclass
class NumpyPolicyRecord:
    """What a ``policy.npz`` (or a spec plus a checkpoint) holds.

    Attributes:
        header: the JSON header (architecture, spaces, provenance).
        weights: ``{module: nested dict of numpy arrays}``.
        observation_normalizer: the normalizer's data with its statistics, or None.
        source: the file the weights were read from.
    """

    header: dict[str, Any]
    weights: dict[str, Any]
    observation_normalizer: dict[str, Any] | None
    source: Path


def _flatten(tree: Mapping[str, Any], prefix: str) -> dict[str, np.ndarray]:
    flat: dict[str, np.ndarray] = {}
    for name, value in tree.items():
        key = f"{prefix}/{name}"
        if isinstance(value, Mapping):
            flat |= _flatten(value, key)
        else:
            flat[key] = np.asarray(value)
    return flat


def write_npz_policy(
    path: str | os.PathLike[str],
    header: Mapping[str, Any],
    weights: Mapping[str, Any],
    observation_normalizer: Mapping[str, Any] | None,
) -> Path:
    """Write a ``policy.npz`` atomically (a crash leaves the previous file).

    Args:
        path: the file.
        header: the JSON-able header.
        weights: ``{module: nested dict of arrays}``.
        observation_normalizer: :func:`~parllel.export.normalizer.normalizer_to_data`'s
            output (with statistics), or None.
    """
    arrays = _flatten(weights, "weights")
    header = dict(header)
    if observation_normalizer is None:
        header["observation_normalizer"] = None
    else:
        leaves = {}
        for index, (leaf_path, leaf) in enumerate(
            observation_normalizer["leaves"].items()
        ):
            leaves[leaf_path] = {"feature_shape": list(leaf["feature_shape"])}
            for stat in _STATS:
                arrays[f"normalizer/{index}/{stat}"] = np.asarray(leaf[stat])
        header["observation_normalizer"] = {
            "clip": float(observation_normalizer["clip"]),
            "epsilon": float(observation_normalizer["epsilon"]),
            "leaves": leaves,
        }
    arrays[_HEADER] = np.array(json.dumps(header))

    def write(file: IO[bytes]) -> None:
        np.savez(file, **arrays)  # type: ignore[arg-type]

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(path, write)


def is_npz_policy(path: Path) -> bool:
    """Whether ``path`` is a numpy archive with a policy header (not a torch file)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return f"{_HEADER}.npy" in archive.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


def _unflatten(arrays: Mapping[str, np.ndarray], prefix: str) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for key, value in arrays.items():
        if not key.startswith(prefix):
            continue
        *parents, leaf = key[len(prefix) :].split("/")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def read_npz_policy(path: str | os.PathLike[str]) -> NumpyPolicyRecord:
    """Read and check a file written by :func:`write_npz_policy`.

    Raises:
        PolicyFileError: there is no such file.
        PolicyFileError: it cannot be read, is not a parllel policy file of a
            format this version reads, or holds no weights.
    """
    path = Path(path)
    check_policy_path(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
        header = json.loads(str(arrays.pop(_HEADER)))
    except Exception as error:
        raise PolicyFileError(
            f"cannot read policy file {path}: {type(error).__name__}: {error}"
        ) from error
    check_header(header, path, FORMAT)
    weights = _unflatten(arrays, "weights/")
    if not weights:
        raise PolicyFileError(f"{path} holds no weights")
    normalizer = header.get("observation_normalizer")
    if normalizer is not None:
        stats = _unflatten(arrays, "normalizer/")
        try:
            normalizer = {
                **normalizer,
                "leaves": {
                    leaf_path: {**leaf, **stats[str(index)]}
                    for index, (leaf_path, leaf) in enumerate(
                        normalizer["leaves"].items()
                    )
                },
            }
        except (KeyError, TypeError, AttributeError) as error:
            raise PolicyFileError(
                f"{path}: bad observation normalizer statistics ({error})"
            ) from None
    return NumpyPolicyRecord(header, weights, normalizer, path)
