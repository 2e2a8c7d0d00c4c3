"""Stop an update whose loss or gradient norm is NaN or infinite.

The algorithms call :func:`check_finite_update` after ``backward()`` and
before ``optimizer.step()``: one device synchronization per gradient step,
and the weights are never touched by a non-finite update.
"""

from __future__ import annotations

import math

import torch

from parllel.errors import NonFiniteLossError


def check_finite_update(algorithm: str, update: int, **values: torch.Tensor) -> None:
    """Raise :class:`~parllel.errors.NonFiniteLossError` naming every non-finite value.

    Args:
        algorithm: name for the message (``"PPO"``, ``"SAC"``, ``"DQN"``).
        update: the algorithm's update counter, for the message.
        **values: scalar tensors (losses, gradient norms), on one device.

    Example:
        >>> check_finite_update("DQN", 12, loss=loss, grad_norm=grad_norm)
    """
    tensors = [v.detach() for v in values.values()]
    total = tensors[0]
    for tensor in tensors[1:]:  # finite values have a finite sum (bar overflow)
        total = total + tensor
    if bool(torch.isfinite(total).all()):  # the one synchronization
        return
    stacked = torch.stack([t.reshape(()).double() for t in tensors])
    if bool(torch.isfinite(stacked).all()):  # the sum overflowed, no value did
        return
    numbers = dict(zip(values, stacked.tolist()))
    bad = tuple(name for name, number in numbers.items() if not math.isfinite(number))
    shown = ", ".join(f"{name} = {numbers[name]}" for name in bad)
    raise NonFiniteLossError(
        f"{algorithm} update {update}: non-finite {shown}. The optimizer step was "
        "skipped, so the weights are those of the last finite update, and the "
        "newest checkpoint on disk is the last good one. Usual causes: NaN/inf "
        "in the batch (the samplers' check_finite catches those from envs), a "
        "learning rate that makes the weights diverge, log(0) or x/0 in a "
        "custom model or loss",
        terms=bad,
    )
