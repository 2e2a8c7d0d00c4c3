"""Refusing checkpoints whose arrays or tensors hold NaN or infinity.

A run that diverged must not overwrite its good checkpoints with NaN
weights: :meth:`~parllel.runners.Runner.save` calls
:func:`refuse_nonfinite_state` before writing, so the newest checkpoint on
disk stays the last good one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from parllel.errors import NonFiniteError
from parllel.runtime.backends import loaded_backends
from parllel.runtime.checkpoint import latest_checkpoint
from parllel.tree import tree_items


def nonfinite_paths(state: Any, prefix: str = "") -> list[str]:
    """Dotted paths of the floating-point arrays and tensors in ``state`` that
    hold NaN/inf.

    ``state`` is a nested structure of mappings, lists, tuples, numpy arrays
    and tensors (state dicts of models, optimizers, algorithms), walked as
    every tree is (:func:`~parllel.tree.tree_items`). A library's tensors
    are checked by its backend (:class:`~parllel.runtime.backends.Backend`,
    those whose library is imported); numpy arrays and other array types
    (``__array__`` and ``dtype``) here; other leaves are ignored.
    """
    backends = loaded_backends()

    def finite(leaf: Any) -> bool:
        for backend in backends:
            if backend.owns(leaf):
                return backend.is_finite(leaf)
        if isinstance(leaf, np.ndarray | np.generic):
            array = leaf
        elif hasattr(leaf, "__array__") and hasattr(leaf, "dtype"):
            array = np.asarray(leaf)  # an array type no backend owns (JAX's)
        else:
            return True
        return array.dtype.kind not in "fc" or bool(np.isfinite(array).all())

    return [
        path or "<tensor>"
        for path, leaf in tree_items(state, prefix)
        if not finite(leaf)
    ]


def refuse_nonfinite_state(
    objects: Mapping[str, Any], checkpoint_dir: Path, step: int
) -> None:
    """Raise :class:`~parllel.errors.NonFiniteError` if any array or
    tensor of the checkpoint objects' states is not finite (nothing is written)."""
    bad = nonfinite_paths(objects)
    if not bad:
        return
    shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
    latest = latest_checkpoint(checkpoint_dir)
    kept = (
        f"the newest checkpoint, {latest}, is the last good one"
        if latest is not None
        else "there is no earlier checkpoint"
    )
    raise NonFiniteError(
        f"not writing the checkpoint of step {step}: {shown} hold NaN or "
        f"infinite values (training diverged); {kept}"
    )
