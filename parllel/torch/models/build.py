"""One-call construction of common actor-critic setups from gymnasium spaces."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from torch import nn

from parllel.errors import ConfigError
from parllel.torch.architecture import Architecture
from parllel.torch.distributions import Categorical, Gaussian, SquashedGaussian
from parllel.torch.models.actor_critic import ActorCriticModel
from parllel.torch.models.cnn import NATURE_CNN, CnnEncoder
from parllel.torch.models.encoders import build_encoder, encoder_output_size
from parllel.torch.models.heads import CategoricalHead, GaussianHead, ValueHead
from parllel.torch.models.mlp import MLP
from parllel.torch.models.recurrent import RecurrentCore

__all__ = ["build_actor_critic"]


def build_actor_critic(
    observation_space: gym.Space,
    action_space: gym.Space,
    *,
    hidden_sizes: Sequence[int] | None = None,
    activation: Callable[[], nn.Module] = nn.Tanh,
    shared_trunk: bool = True,
    recurrent_cell: str | None = None,
    recurrent_size: int = 128,
    squash: bool = False,
    init_log_std: float = 0.0,
    orthogonal_init: bool | None = None,
    cnn: Mapping[str, Any] | None = None,
) -> tuple[ActorCriticModel, Any]:
    """Build an :class:`ActorCriticModel` and its distribution for two spaces.

    Observations go through :func:`build_encoder`, an optional
    :class:`RecurrentCore` and MLP trunks of ``hidden_sizes``. Image
    observations get CleanRL's and SB3's Atari defaults (:data:`NATURE_CNN`, no
    trunk, orthogonal init). ``Discrete`` actions get a :class:`Categorical`,
    ``Box`` actions a :class:`Gaussian` (or :class:`SquashedGaussian` with
    ``squash=True``). See docs/torch.md ("Models").

    Args:
        action_space: ``Discrete`` or 1-D ``Box``.
        hidden_sizes: trunk layer sizes; None: ``(64, 64)``, or ``()`` for images.
        shared_trunk: one trunk for both heads, or one each.
        recurrent_cell: ``"lstm"``, ``"gru"`` or None (feed-forward).
        orthogonal_init: orthogonal trunk layers with gain ``sqrt(2)`` (the heads
            always are); None: True for image observations.
        cnn: :class:`CnnEncoder` settings over :data:`NATURE_CNN`.

    Returns:
        ``(model, distribution)``; ``model.architecture`` records the arguments
        (for :func:`parllel.torch.export_policy`).
    """
    cnn_settings = {**NATURE_CNN, **dict(cnn or {})}
    channels_last = cnn_settings.pop("channels_last", None)
    if orthogonal_init is not False:
        cnn_settings["init_scale"] = math.sqrt(2)
    encoder = build_encoder(
        observation_space, channels_last=channels_last, cnn_kwargs=cnn_settings
    )
    images = any(isinstance(m, CnnEncoder) for m in encoder.modules())
    if hidden_sizes is None:
        hidden_sizes = () if images else (64, 64)
    if orthogonal_init is None:
        orthogonal_init = images
    architecture = Architecture(
        "actor_critic",
        observation_space,
        action_space,
        dict(
            hidden_sizes=tuple(hidden_sizes),
            activation=activation,
            shared_trunk=shared_trunk,
            recurrent_cell=recurrent_cell,
            recurrent_size=recurrent_size,
            squash=squash,
            init_log_std=init_log_std,
            orthogonal_init=orthogonal_init,
            cnn=dict(cnn) if cnn is not None else None,
        ),
    )
    feature_size = encoder_output_size(encoder)
    core = None
    if recurrent_cell is not None:
        core = RecurrentCore(feature_size, recurrent_size, cell=recurrent_cell)
        feature_size = core.output_size

    def trunk() -> MLP:
        gain = math.sqrt(2) if orthogonal_init else None
        return MLP(
            feature_size, hidden_sizes, activation=activation, hidden_init_scale=gain
        )

    policy_trunk = trunk()
    value_trunk = None if shared_trunk else trunk()
    trunk_size = policy_trunk.output_size

    if isinstance(action_space, gym.spaces.Discrete):
        num_actions = int(action_space.n)
        head: nn.Module = CategoricalHead(trunk_size, num_actions)
        distribution: Any = Categorical(num_actions)
    elif isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        action_dim = int(action_space.shape[0])
        head = GaussianHead(trunk_size, action_dim, init_log_std=init_log_std)
        if squash:
            bounds = np.concatenate([action_space.low, action_space.high])
            if not np.isfinite(bounds).all():
                raise ConfigError("squash=True needs finite action bounds")
            distribution = SquashedGaussian(
                action_dim, action_space.low, action_space.high
            )
        else:
            distribution = Gaussian(action_dim)
    else:
        stacked = isinstance(action_space, gym.spaces.MultiDiscrete) or (
            isinstance(action_space, gym.spaces.Box) and len(action_space.shape) > 1
        )
        hint = (
            "; if these are stacked multi-agent actions (a multi-agent cage's "
            "spaces.action), build the model from one agent's space: pass "
            "parllel.multiagent.unstack_space(space)"
            if stacked
            else ""
        )
        raise ConfigError(
            f"build_actor_critic supports Discrete and 1-D Box actions; got "
            f"{action_space}{hint}"
        )

    if shared_trunk:
        model = ActorCriticModel(
            encoder, head, ValueHead(trunk_size), core=core, trunk=policy_trunk
        )
    else:
        model = ActorCriticModel(
            encoder,
            head,
            ValueHead(trunk_size),
            core=core,
            policy_trunk=policy_trunk,
            value_trunk=value_trunk,
        )
    return architecture.attach(model), distribution
