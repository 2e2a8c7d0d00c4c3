"""Actor-critic network (flax.linen) and its builder from gymnasium spaces."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import gymnasium as gym
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from parllel.errors import ConfigError
from parllel.jax.distributions import Categorical, Gaussian, SquashedGaussian
from parllel.jax.models.encoders import NATURE_CNN, build_encoder, is_image_encoder
from parllel.jax.models.heads import CategoricalHead, GaussianHead, ValueHead
from parllel.jax.models.mlp import MLP

__all__ = ["ActorCriticNetwork", "ActorCriticOutput", "build_actor_critic"]


class ActorCriticOutput(NamedTuple):
    """What :class:`ActorCriticNetwork` returns: ``dist_params`` (a NamedTuple
    of arrays with the input's leading dims) and ``value`` ``[...]``."""

    dist_params: Any
    value: Any


class ActorCriticNetwork(nn.Module):
    """Encoder, trunks, policy head and value head (feed-forward).

    ``observation [*lead, ...] -> encoder -> trunk (shared) -> policy_trunk
    -> policy_head`` and ``-> value_trunk -> value_head``, the layout of the
    torch ``ActorCriticModel`` (with the same submodule names, so
    :func:`~parllel.jax.models.params.params_from_torch` converts its state dict).
    Any leading dims.

    Attributes:
        encoder: observation to features ``[..., F]``.
        policy_head: features to distribution parameters.
        value_head: features to values.
        trunk: optional module shared by both heads.
        policy_trunk: optional module before the policy head.
        value_trunk: optional module before the value head.
    """

    encoder: nn.Module
    policy_head: nn.Module
    value_head: nn.Module
    trunk: nn.Module | None = None
    policy_trunk: nn.Module | None = None
    value_trunk: nn.Module | None = None

    def __call__(self, observation: Any) -> ActorCriticOutput:
        """Distribution parameters and values of ``observation``."""
        features = self.encoder(observation)
        if self.trunk is not None:
            features = self.trunk(features)
        policy = features if self.policy_trunk is None else self.policy_trunk(features)
        value = features if self.value_trunk is None else self.value_trunk(features)
        return ActorCriticOutput(self.policy_head(policy), self.value_head(value))


def build_actor_critic(
    observation_space: gym.Space,
    action_space: gym.Space,
    *,
    hidden_sizes: Sequence[int] | None = None,
    activation: Callable[[Any], Any] = nn.tanh,
    shared_trunk: bool = True,
    squash: bool = False,
    init_log_std: float = 0.0,
    orthogonal_init: bool | None = None,
    cnn: Mapping[str, Any] | None = None,
    param_dtype: Any = jnp.float32,
) -> tuple[ActorCriticNetwork, Any]:
    """Build an :class:`ActorCriticNetwork` and its distribution for two spaces.

    The semantics of :func:`parllel.torch.models.build_actor_critic`
    (feed-forward only): ``(64, 64)`` tanh trunks for vectors, the Nature CNN
    (no trunk, orthogonal ``sqrt(2)``) for images; heads orthogonal (0.01
    policy, 1 value); ``Discrete`` actions get a :class:`Categorical`, 1-D
    ``Box`` a :class:`Gaussian` with a state-independent log-std, or a
    :class:`SquashedGaussian` to the bounds with ``squash=True``.

    Returns:
        ``(network, distribution)``; initialize parameters with
        :func:`~parllel.jax.models.params.init_params`.

    Raises:
        ConfigError: unsupported action space, or ``squash`` with infinite bounds.
    """
    cnn_settings = {**NATURE_CNN, **dict(cnn or {})}
    channels_last = cnn_settings.pop("channels_last", None)
    if orthogonal_init is not False:
        cnn_settings["init_scale"] = math.sqrt(2)
    encoder = build_encoder(
        observation_space,
        channels_last=channels_last,
        cnn_kwargs=cnn_settings,
        param_dtype=param_dtype,
    )
    images = is_image_encoder(encoder)
    if hidden_sizes is None:
        hidden_sizes = () if images else (64, 64)
    if orthogonal_init is None:
        orthogonal_init = images
    gain = math.sqrt(2) if orthogonal_init else None

    def trunk() -> MLP | None:
        if not hidden_sizes:
            return None
        return MLP(
            tuple(int(h) for h in hidden_sizes),
            activation=activation,
            hidden_init_scale=gain,
            param_dtype=param_dtype,
        )

    head: nn.Module
    distribution: Any
    if isinstance(action_space, gym.spaces.Discrete):
        num_actions = int(action_space.n)
        head = CategoricalHead(num_actions, param_dtype=param_dtype)
        distribution = Categorical(num_actions)
    elif isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        action_dim = int(action_space.shape[0])
        head = GaussianHead(
            action_dim, init_log_std=init_log_std, param_dtype=param_dtype
        )
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
        raise ConfigError(
            f"build_actor_critic supports Discrete and 1-D Box actions; got "
            f"{action_space}"
        )
    value_head = ValueHead(param_dtype=param_dtype)
    if shared_trunk:
        network = ActorCriticNetwork(encoder, head, value_head, trunk=trunk())
    else:
        network = ActorCriticNetwork(
            encoder,
            head,
            value_head,
            policy_trunk=trunk(),
            value_trunk=trunk(),
        )
    return network, distribution
