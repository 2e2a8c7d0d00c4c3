"""Actor-critic model built by composition, for PPO-style algorithms.

One class covers feed-forward and recurrent, discrete and continuous:
the encoder turns observations into features, an optional
:class:`RecurrentCore` carries memory, and two heads read the result, one
producing distribution parameters, one a state value. Optional trunks
(e.g. :class:`MLP`) sit between the shared features and each head, and an
optional separate value encoder makes the value network fully separate
(value encoder, value trunk, value head; no core).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import nn

from parllel.errors import ShapeError
from parllel.torch.models.leading_dims import (
    flatten_leading_dims,
    infer_leading_dims,
    restore_leading_dims,
)
from parllel.torch.models.recurrent import RecurrentCore, RecurrentState

__all__ = ["ActorCriticModel", "ActorCriticOutput"]


class ActorCriticOutput(NamedTuple):
    """What :class:`ActorCriticModel` returns.

    Attributes:
        dist_params: NamedTuple of tensors with the input's leading dims
            (e.g. ``DistParams(logits [T, B, A])``).
        value: ``[T, B]`` / ``[B]`` / ``[]``, matching the input.
        state: the recurrent state after the last step (``None`` without a
            core); each tensor ``[num_layers, B, H]``.
    """

    dist_params: Any
    value: torch.Tensor
    state: RecurrentState | None


class ActorCriticModel(nn.Module):
    """Encoder, optional recurrent core, policy head and value head.

    ``model(observation, state=None, resets=None)`` returns
    ``ActorCriticOutput(dist_params, value, state)`` for inputs with leading
    dims ``[]``, ``[B]`` or ``[T, B]`` (a ``[B]`` input to a recurrent model is
    one time step). ``trunk`` is shared by both heads; ``value_encoder`` gives
    the value branch its own encoder (and no core). See docs/torch.md.

    Example:
        >>> model = ActorCriticModel(
        ...     encoder=MLP(4, (64, 64)),
        ...     policy_head=CategoricalHead(64, 2),
        ...     value_head=ValueHead(64),
        ... )
        >>> out = model(torch.zeros(16, 8, 4))   # [T, B, obs_dim]
        >>> out.dist_params.logits.shape, out.value.shape
        (torch.Size([16, 8, 2]), torch.Size([16, 8]))

    Args:
        encoder: observation to features ``[..., F]``, keeping leading dims.
        policy_head: features to a NamedTuple of distribution parameters.
        core: optional :class:`RecurrentCore` after the encoder.
    """

    def __init__(
        self,
        encoder: nn.Module,
        policy_head: nn.Module,
        value_head: nn.Module,
        core: RecurrentCore | None = None,
        trunk: nn.Module | None = None,
        policy_trunk: nn.Module | None = None,
        value_trunk: nn.Module | None = None,
        value_encoder: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.core = core
        self.trunk = trunk if trunk is not None else nn.Identity()
        self.policy_trunk = policy_trunk if policy_trunk is not None else nn.Identity()
        self.value_trunk = value_trunk if value_trunk is not None else nn.Identity()
        self.policy_head = policy_head
        self.value_head = value_head
        self.value_encoder = value_encoder

    @property
    def is_recurrent(self) -> bool:
        """True if the model has a recurrent core."""
        return self.core is not None

    def initial_state(
        self, batch_size: int, device: torch.device | str | None = None
    ) -> RecurrentState | None:
        """Zero recurrent state for ``batch_size`` envs (``None`` if feed-forward)."""
        return (
            None if self.core is None else self.core.initial_state(batch_size, device)
        )

    def forward(
        self,
        observation: Any,
        state: RecurrentState | None = None,
        resets: torch.Tensor | None = None,
    ) -> ActorCriticOutput:
        """Evaluate policy and value.

        Args:
            observation: tensor or nested mapping of tensors with leading
                dims ``[]``, ``[B]`` or ``[T, B]``.
            state: recurrent state entering the first step (zeros if None);
                ignored without a core.
            resets: optional bool tensor with the input's leading dims; True
                where a new episode starts (the state entering that step is
                zeroed). Ignored without a core.

        Returns:
            An :class:`ActorCriticOutput`.
        """
        features = self.encoder(observation)  # [*lead, F]
        leading = infer_leading_dims(features, 1)
        new_state = None
        if self.core is not None:
            T, B = leading.T, leading.B
            sequence = features.reshape(T, B, features.shape[-1])  # [T, B, F]
            if resets is not None:
                if resets.numel() != T * B:
                    raise ShapeError(
                        f"resets must match the observation's leading dims "
                        f"{(T, B)[2 - leading.ndim :]}; got {tuple(resets.shape)}"
                    )
                resets = resets.reshape(T, B)
            sequence, new_state = self.core(sequence, state, resets)  # [T, B, H]
            features = sequence.reshape(T * B, sequence.shape[-1])  # [T * B, H]
        else:
            features = flatten_leading_dims(features, leading)  # [T * B, F]
        features = self.trunk(features)
        dist_params = self.policy_head(self.policy_trunk(features))
        if self.value_encoder is not None:
            value_features = flatten_leading_dims(
                self.value_encoder(observation), leading
            )  # [T * B, F_value]
        else:
            value_features = features
        value = self.value_head(self.value_trunk(value_features))  # [T * B]
        dist_params, value = restore_leading_dims((dist_params, value), leading)
        return ActorCriticOutput(dist_params, value, new_state)
