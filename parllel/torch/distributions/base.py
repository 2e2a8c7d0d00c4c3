"""Distribution protocol and the parameter containers models produce.

A distribution object is stateless apart from its configuration: every
method takes the parameters a model produced (a small NamedTuple whose
fields are tensors with matching leading dims), so the same object serves
sampling, the loss, and logging.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

import torch

__all__ = ["DistParams", "Distribution", "GaussianParams"]


class DistParams(NamedTuple):
    """Parameters of a :class:`~parllel.torch.distributions.Categorical`.

    Attributes:
        logits: unnormalized log-probabilities ``[..., num_actions]``.
    """

    logits: torch.Tensor


class GaussianParams(NamedTuple):
    """Parameters of a diagonal Gaussian (also before tanh squashing).

    Attributes:
        mean: ``[..., action_dim]``.
        log_std: ``[..., action_dim]`` (or broadcastable to it, e.g. ``[action_dim]``).
    """

    mean: torch.Tensor
    log_std: torch.Tensor


@runtime_checkable
class Distribution(Protocol):
    """What agents and algorithms need from an action distribution.

    Shapes: for parameters with leading dims ``[...]``, ``sample`` and
    ``deterministic`` return actions ``[..., *action_shape]`` and the other
    methods return ``[...]`` (summed over action dims).
    """

    def sample(
        self, dist_params: NamedTuple, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Draw one action per set of parameters (no gradient), from
        ``generator`` (torch's global RNG if None)."""
        ...

    def deterministic(self, dist_params: NamedTuple) -> torch.Tensor:
        """The mode: the action a greedy evaluation takes."""
        ...

    def log_likelihood(self, x: torch.Tensor, dist_params: NamedTuple) -> torch.Tensor:
        """Log-probability (density) of actions ``x``."""
        ...

    def entropy(self, dist_params: NamedTuple) -> torch.Tensor:
        """Entropy of the distribution."""
        ...

    def kl(self, old_params: NamedTuple, new_params: NamedTuple) -> torch.Tensor:
        """``KL(old || new)``."""
        ...
