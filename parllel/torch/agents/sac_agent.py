"""SAC models (squashed Gaussian actor, twin Q critic) and the SAC agent."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import torch
from torch import nn

from parllel.agents.base import AgentStep, check_mode
from parllel.errors import ConfigError
from parllel.torch.architecture import Architecture
from parllel.torch.distributions import SquashedGaussian
from parllel.torch.distributions.base import GaussianParams
from parllel.torch.models.dtypes import to_model_dtype
from parllel.torch.models.encoders import build_encoder, encoder_output_size
from parllel.torch.models.heads import GaussianHead
from parllel.torch.models.mlp import MLP
from parllel.tree.utils import tree_items

__all__ = ["SacActor", "SacAgent", "TwinQ", "build_sac_agent"]


class SacActor(nn.Module):
    """Encoder, MLP trunk and a state-dependent Gaussian head.

    Args:
        encoder: observation encoder with an ``output_size``.
        trunk: MLP on the encoder's features.
        head: :class:`~parllel.torch.models.GaussianHead` with
            ``state_dependent_std=True``.
    """

    def __init__(self, encoder: nn.Module, trunk: MLP, head: GaussianHead) -> None:
        super().__init__()
        self.encoder, self.trunk, self.head = encoder, trunk, head

    def forward(self, observation: Any) -> GaussianParams:
        """Observations ``[..., *obs]`` to pre-squash ``GaussianParams [..., A]``."""
        return self.head(self.trunk(self.encoder(observation)))


class TwinQ(nn.Module):
    """Two independent Q networks ``Q_i(observation, action)``.

    Each has its own encoder; features and the action are concatenated and
    fed to an MLP with one output.

    Args:
        make_encoder: builds a fresh observation encoder (called twice).
        action_dim: size of the action vector.
        hidden_sizes: MLP hidden sizes.
        activation: MLP activation.
    """

    def __init__(
        self,
        make_encoder: Callable[[], nn.Module],
        action_dim: int,
        hidden_sizes: Sequence[int] = (256, 256),
        activation: Callable[[], nn.Module] = nn.ReLU,
    ) -> None:
        super().__init__()
        self.encoders = nn.ModuleList([make_encoder(), make_encoder()])
        self.mlps = nn.ModuleList(
            [
                MLP(encoder_output_size(enc) + action_dim, hidden_sizes, 1, activation)
                for enc in self.encoders
            ]
        )

    def forward(
        self, observation: Any, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Both Q values ``[...]`` for observations and actions ``[..., A]``."""
        values = []
        for encoder, mlp in zip(self.encoders, self.mlps):
            features = encoder(observation)  # in the model's dtype
            features = torch.cat([features, to_model_dtype(action, features)], -1)
            values.append(mlp(features).squeeze(-1))
        return values[0], values[1]


class SacAgent:
    """:class:`~parllel.agents.Agent` for SAC: actor, twin critic, distribution.

    ``step`` samples squashed actions (``"eval"`` mode: ``squash(mean)``) and
    records no agent info; while :attr:`random_actions` is true, actions are
    uniform within the bounds (the warm-up, e.g. set by ``AttributeSchedule``).
    :class:`~parllel.torch.algos.sac.SAC` trains :attr:`actor` and
    :attr:`critic`.

    Example:
        >>> agent = build_sac_agent(env.observation_space, env.action_space)
        >>> action, log_prob = agent.sample_with_log_prob(observation)

    Args:
        actor: module mapping observations to ``GaussianParams``.
        critic: module mapping ``(observation, action)`` to ``(q1, q2)``.
        generator: the torch generator :meth:`step` and :meth:`value` draw from
            (None: torch's global RNG, which :meth:`sample_with_log_prob` uses).
    """

    def __init__(
        self,
        actor: nn.Module,
        critic: nn.Module,
        distribution: Any,
        generator: torch.Generator | None = None,
    ) -> None:
        self.actor = actor
        self.critic = critic
        self.distribution = distribution
        self.action_dim = int(distribution.action_dim)
        self.deterministic = False
        self.random_actions = False
        self.generator = generator

    def sample_with_log_prob(
        self, observation: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterized actions ``[..., A]`` and their log-probs ``[...]``."""
        return self.distribution.sample_with_log_prob(self.actor(observation))

    def q_values(
        self, observation: Any, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(q1, q2)``, each ``[...]``."""
        return self.critic(observation, action)

    def initial_state(self, n_envs: int) -> None:
        """Feed-forward: no state."""
        return None

    @torch.no_grad()
    def step(
        self, observation: Any, prev_action: Any, prev_reward: Any, state: Any
    ) -> AgentStep:
        """Sampled (or, in eval mode, deterministic) actions; no agent info."""
        if self.random_actions and not self.deterministic:
            # uniform within the bounds; the actor does not run (as SB3 and
            # CleanRL sample the action space during warm-up)
            _, leaf = next(tree_items(observation))
            uniform = torch.rand(
                (leaf.shape[0], self.action_dim),
                generator=self.generator,
                dtype=next(self.actor.parameters()).dtype,  # as the actor's mean
                device=leaf.device,
            )
            center = self.distribution.center.to(uniform)
            scale = self.distribution.scale.to(uniform)
            return AgentStep(center + scale * (uniform * 2.0 - 1.0), {}, None)
        params = self.actor(observation)
        if self.deterministic:
            action = self.distribution.deterministic(params)
        else:
            action = self.distribution.sample(params, self.generator)
        return AgentStep(action, {}, None)

    @torch.no_grad()
    def value(
        self, observation: Any, prev_action: Any, prev_reward: Any, state: Any
    ) -> torch.Tensor:
        """``min(q1, q2)`` at a sampled action, ``[N]`` (SAC does not need it)."""
        params = self.actor(observation)
        action, _ = self.distribution.sample_with_log_prob(params, self.generator)
        return torch.minimum(*self.critic(observation, action))

    def set_mode(self, mode: str) -> None:
        """``train``/``sample``/``eval``; ``eval`` makes actions deterministic."""
        check_mode(mode)
        self.actor.train(mode == "train")
        self.critic.train(mode == "train")
        self.deterministic = mode == "eval"


def build_sac_agent(
    observation_space: gym.Space,
    action_space: gym.spaces.Box,
    *,
    hidden_sizes: Sequence[int] = (256, 256),
    activation: Callable[[], nn.Module] = nn.ReLU,
    min_log_std: float = -20.0,
    max_log_std: float = 2.0,
) -> SacAgent:
    """Build a :class:`SacAgent` with MLP actor and twin Q for a 1-D Box action space.

    Args:
        observation_space: space (or example) passed to ``build_encoder``.
        action_space: 1-D ``Box`` with finite bounds.
        hidden_sizes: hidden sizes of the actor trunk and each Q MLP.
        activation: activation of every MLP.
        min_log_std: lower clip of the actor's log-std.
        max_log_std: upper clip of the actor's log-std.

    Returns:
        The agent; ``agent.architecture`` records these arguments (see
        :func:`parllel.torch.export_policy`).

    Raises:
        ConfigError: the action space is not a bounded 1-D Box.
    """
    if not isinstance(action_space, gym.spaces.Box) or len(action_space.shape) != 1:
        raise ConfigError(f"SAC needs a 1-D Box action space; got {action_space}")
    action_dim = int(action_space.shape[0])
    encoder = build_encoder(observation_space)
    trunk = MLP(encoder_output_size(encoder), hidden_sizes, activation=activation)
    head = GaussianHead(trunk.output_size, action_dim, state_dependent_std=True)
    actor = SacActor(encoder, trunk, head)
    critic = TwinQ(
        lambda: build_encoder(observation_space), action_dim, hidden_sizes, activation
    )
    distribution = SquashedGaussian(
        action_dim, action_space.low, action_space.high, min_log_std, max_log_std
    )
    architecture = Architecture(
        "sac",
        observation_space,
        action_space,
        dict(
            hidden_sizes=tuple(hidden_sizes),
            activation=activation,
            min_log_std=min_log_std,
            max_log_std=max_log_std,
        ),
    )
    return architecture.attach(SacAgent(actor, critic, distribution))
