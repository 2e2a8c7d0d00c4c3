"""Refusing checkpoints whose tensors hold NaN or infinity.

A run that diverged must not overwrite its good checkpoints with NaN
weights: :meth:`~parllel.runners.Runner.save` calls
:func:`refuse_nonfinite_state` before writing, so the newest checkpoint on
disk stays the last good one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from parllel.errors import NonFiniteCheckpointError
from parllel.runtime.checkpoint import latest_checkpoint
from parllel.tree import tree_items


def nonfinite_tensors(state: Any, prefix: str = "") -> list[str]:
    """Dotted paths of the floating-point tensors in ``state`` that hold NaN/inf.

    ``state`` is a nested structure of mappings, lists, tuples and tensors
    (state dicts of models, optimizers, algorithms), walked as every tree is
    (:func:`~parllel.tree.tree_items`); other leaves are ignored.
    """
    return [
        path or "<tensor>"
        for path, leaf in tree_items(state, prefix)
        if isinstance(leaf, torch.Tensor)
        and (leaf.is_floating_point() or leaf.is_complex())
        and not bool(torch.isfinite(leaf).all())
    ]


def refuse_nonfinite_state(
    objects: Mapping[str, Any], checkpoint_dir: Path, step: int
) -> None:
    """Raise :class:`~parllel.errors.NonFiniteCheckpointError` if any tensor of
    the checkpoint objects' states is not finite (nothing is written)."""
    bad = nonfinite_tensors(objects)
    if not bad:
        return
    shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
    latest = latest_checkpoint(checkpoint_dir)
    kept = (
        f"the newest checkpoint, {latest}, is the last good one"
        if latest is not None
        else "there is no earlier checkpoint"
    )
    raise NonFiniteCheckpointError(
        f"not writing the checkpoint of step {step}: {shown} hold NaN or "
        f"infinite values (training diverged); {kept}"
    )
