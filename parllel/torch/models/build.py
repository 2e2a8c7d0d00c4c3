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

    Observations go through :func:`build_encoder`, then (optionally) a
    :class:`RecurrentCore`, then MLP trunks of ``hidden_sizes``: one shared
    trunk, or separate policy and value trunks (``shared_trunk=False``).

    Image observations (``uint8`` ``(C, H, W)``, ``(H, W, C)``, frame stacks
    ``(k, H, W, 1)``; see :func:`build_encoder`) get the Atari defaults of
    CleanRL's and SB3's PPO: the Nature CNN (:data:`NATURE_CNN`: convs 32 8x8
    stride 4, 64 4x4 stride 2, 64 3x3 stride 1, then a 512-unit ReLU layer),
    no MLP trunk, and orthogonal init (gain ``sqrt(2)`` for the convs and the
    512 layer, 0.01 for the policy head, 1 for the value head).
    ``Discrete`` actions get a :class:`Categorical`; ``Box`` actions a
    :class:`Gaussian` with a state-independent log-std, or a
    :class:`SquashedGaussian` scaled to the bounds with ``squash=True``.

    Args:
        observation_space: observation space (or see :func:`build_encoder`).
        action_space: ``Discrete`` or 1-D ``Box``.
        hidden_sizes: trunk layer sizes; None: ``(64, 64)``, or ``()`` (no
            trunk after the CNN's 512 layer) for image observations.
        activation: trunk activation.
        shared_trunk: one trunk for both heads, or one each.
        recurrent_cell: ``"lstm"``, ``"gru"`` or None (feed-forward).
        recurrent_size: hidden size of the recurrent core.
        squash: tanh-squash Box actions into their bounds.
        init_log_std: initial log-std for Box actions.
        orthogonal_init: trunk (and CNN) layers orthogonal with gain
            ``sqrt(2)`` and zero biases, as SB3's and CleanRL's actor-critics
            (the heads always are: gain 0.01 for the policy, 1 for the
            value); False: torch's default initialization; None: True for
            image observations, False otherwise.
        cnn: :class:`CnnEncoder` settings for image observations, over
            :data:`NATURE_CNN` (``channels``, ``kernel_sizes``, ``strides``,
            ``paddings``, ``output_size`` (None: convs only),
            ``channels_last``).

    Returns:
        ``(model, distribution)``; ``model.architecture`` records these
        arguments (see :func:`parllel.torch.export_policy`).
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
