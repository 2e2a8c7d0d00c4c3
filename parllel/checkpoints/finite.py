"""The finite checks of training: states before a checkpoint, losses before an update.

A run that diverged must not overwrite its good checkpoints with NaN
weights: :meth:`~parllel.runners.Runner.save` calls
:func:`refuse_nonfinite_state` before writing, so the newest checkpoint on
disk stays the last good one. The algorithms (torch and JAX) call
:func:`check_finite_update` before applying an update. Both ask the backend
seam (:meth:`~parllel.backends.Backend.is_finite`) about tensors. The
samplers' check of each batch (:mod:`parllel.samplers.finite`) sits below this
layer and reads numpy arrays only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from parllel.backends import loaded_backends
from parllel.checkpoints.checkpoint import latest_checkpoint
from parllel.errors import NonFiniteError
from parllel.tree import tree_items


def nonfinite_paths(state: Any, prefix: str = "") -> list[str]:
    """Dotted paths of the floating-point arrays and tensors in ``state`` that
    hold NaN/inf.

    ``state`` is a nested structure of mappings, lists, tuples, numpy arrays
    and tensors (state dicts of models, optimizers, algorithms), walked as
    every tree is (:func:`~parllel.tree.tree_items`). A library's tensors
    are checked by its backend (:class:`~parllel.backends.Backend`,
    those whose library is imported); numpy arrays and other array types
    (``__array__`` and ``dtype``) here; other leaves are ignored.
    """
    return [
        path or "<tensor>"
        for path, leaf in tree_items(state, prefix)
        if not is_finite(leaf)
    ]


def is_finite(value: Any) -> bool:
    """Whether a tensor, array or number holds no NaN or infinity.

    A library's tensors are checked by its backend (those whose library is
    imported); numpy arrays, other array types (``__array__`` and ``dtype``)
    and Python numbers here; other values count as finite.
    """
    for backend in loaded_backends():
        if backend.owns(value):
            return backend.is_finite(value)
    if isinstance(value, float | int):
        return math.isfinite(value)
    if isinstance(value, np.ndarray | np.generic):
        array = value
    elif hasattr(value, "__array__") and hasattr(value, "dtype"):
        array = np.asarray(value)  # an array type no backend owns (JAX's)
    else:
        return True
    return array.dtype.kind not in "fc" or bool(np.isfinite(array).all())


def check_finite_update(algorithm: str, update: int, **values: Any) -> None:
    """Raise :class:`~parllel.errors.NonFiniteError` naming every non-finite value.

    Algorithms call it after computing an update's losses and gradient norms
    and before applying it: when all are finite, one check of their sum (one
    device synchronization).

    Args:
        algorithm: name for the message (``"PPO"``, ``"SAC"``, ``"DQN"``).
        update: the algorithm's update counter, for the message.
        **values: scalar tensors of one backend (on one device) or numbers.

    Example:
        >>> check_finite_update("DQN", 12, loss=loss, grad_norm=grad_norm)
    """
    scalars = [v.detach() if hasattr(v, "detach") else v for v in values.values()]
    total = scalars[0]
    for scalar in scalars[1:]:  # finite values have a finite sum (bar overflow)
        total = total + scalar
    if is_finite(total):  # the one synchronization
        return
    numbers = {name: float(scalar) for name, scalar in zip(values, scalars)}
    bad = tuple(name for name, number in numbers.items() if not math.isfinite(number))
    if not bad:  # the sum overflowed, no value did
        return
    shown = ", ".join(f"{name} = {numbers[name]}" for name in bad)
    raise NonFiniteError(
        f"{algorithm} update {update}: non-finite {shown}. The update was not "
        "applied, so the weights are those of the last finite update, and the "
        "newest checkpoint on disk is the last good one. Usual causes: NaN/inf "
        "in the batch (the samplers' check_finite catches those from envs), a "
        "learning rate that makes the weights diverge, log(0) or x/0 in a "
        "custom model or loss",
        terms=bad,
    )


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
