"""Q-network and the epsilon-greedy DQN agent."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import torch
from torch import nn

from parllel.agents.base import AgentStep, check_mode
from parllel.errors import ConfigError
from parllel.torch.architecture import Architecture
from parllel.torch.models.cnn import NATURE_CNN, CnnEncoder
from parllel.torch.models.encoders import build_encoder, encoder_output_size
from parllel.torch.models.mlp import MLP
from parllel.validation import check_at_least

__all__ = ["DqnAgent", "QNetwork", "build_dqn_agent"]


class QNetwork(nn.Module):
    """Encoder and MLP to one Q value per action, ``[..., num_actions]``.

    Args:
        encoder: observation encoder with an ``output_size``.
        num_actions: number of discrete actions.
        hidden_sizes: MLP hidden sizes.
        activation: MLP activation.
    """

    def __init__(
        self,
        encoder: nn.Module,
        num_actions: int,
        hidden_sizes: Sequence[int] = (64, 64),
        activation: Callable[[], nn.Module] = nn.ReLU,
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.mlp = MLP(
            encoder_output_size(encoder), hidden_sizes, num_actions, activation
        )

    def forward(self, observation: Any) -> torch.Tensor:
        """Q values ``[..., num_actions]``."""
        return self.mlp(self.encoder(observation))


class DqnAgent:
    """:class:`~parllel.agents.Agent` acting epsilon-greedily on a Q-network.

    Set :attr:`epsilon` from a schedule as training goes (see
    :func:`parllel.schedules.epsilon_schedule`); ``"eval"`` mode acts
    greedily (or with :attr:`eval_epsilon`).

    Example:
        >>> agent = build_dqn_agent(env.observation_space, env.action_space)
        >>> agent.epsilon = schedule(global_step)

    Args:
        q_network: module mapping observations to ``[..., num_actions]``.
        num_actions: number of discrete actions.
        epsilon: initial probability of a uniformly random action.
        eval_epsilon: epsilon in ``"eval"`` mode.
        generator: torch generator of the exploration draws (on the
            Q-network's device; None: torch's global RNG), e.g. set by
            ``TorchHandler(agent, n_envs, seed=seeds.actions)``.
    """

    def __init__(
        self,
        q_network: nn.Module,
        num_actions: int,
        epsilon: float = 1.0,
        eval_epsilon: float = 0.0,
        generator: torch.Generator | None = None,
    ) -> None:
        check_at_least("num_actions", num_actions)
        self.q_network = q_network
        self.num_actions = int(num_actions)
        self.epsilon = float(epsilon)
        self.eval_epsilon = float(eval_epsilon)
        self.generator = generator
        self.evaluating = False

    def q_values(self, observation: Any) -> torch.Tensor:
        """Q values ``[..., num_actions]``."""
        return self.q_network(observation)

    def initial_state(self, n_envs: int) -> None:
        """Feed-forward: no state."""
        return None

    @torch.no_grad()
    def act(self, observation: Any, epsilon: float) -> torch.Tensor:
        """Greedy actions, each replaced by a uniform one with probability ``epsilon``."""
        q = self.q_values(observation)
        greedy = q.argmax(-1)
        if epsilon <= 0.0:
            return greedy
        device = greedy.device
        explore = (
            torch.rand(greedy.shape, generator=self.generator, device=device) < epsilon
        )
        random = torch.randint(
            self.num_actions, greedy.shape, generator=self.generator, device=device
        )
        return torch.where(explore, random, greedy)

    def step(
        self, observation: Any, prev_action: Any, prev_reward: Any, state: Any
    ) -> AgentStep:
        """Epsilon-greedy actions; no agent info."""
        epsilon = self.eval_epsilon if self.evaluating else self.epsilon
        return AgentStep(self.act(observation, epsilon), {}, None)

    @torch.no_grad()
    def value(
        self, observation: Any, prev_action: Any, prev_reward: Any, state: Any
    ) -> torch.Tensor:
        """``max_a Q(observation, a)``, ``[N]``."""
        return self.q_values(observation).max(-1).values

    def set_mode(self, mode: str) -> None:
        """``train``/``sample``/``eval``; ``eval`` uses :attr:`eval_epsilon`."""
        check_mode(mode)
        self.q_network.train(mode == "train")
        self.evaluating = mode == "eval"


def build_dqn_agent(
    observation_space: gym.Space,
    action_space: gym.spaces.Discrete,
    *,
    hidden_sizes: Sequence[int] | None = None,
    activation: Callable[[], nn.Module] = nn.ReLU,
    epsilon: float = 1.0,
    cnn: Mapping[str, Any] | None = None,
) -> DqnAgent:
    """Build a :class:`DqnAgent` with an MLP :class:`QNetwork`.

    Image observations (see :func:`~parllel.torch.models.encoders.build_encoder`) get
    the Nature-DQN network: :data:`~parllel.torch.models.cnn.NATURE_CNN` (three
    convs and a 512-unit ReLU layer; ``cnn=`` updates its settings), then a
    linear layer to the Q values (``hidden_sizes`` ``()``).
    ``hidden_sizes=None`` means ``(64, 64)`` for other observations.

    ``agent.architecture`` records the arguments (see
    :func:`parllel.torch.export_policy`).

    Raises:
        ConfigError: the action space is not ``Discrete``.
    """
    if not isinstance(action_space, gym.spaces.Discrete):
        raise ConfigError(f"DQN needs a Discrete action space; got {action_space}")
    num_actions = int(action_space.n)
    cnn_settings = {**NATURE_CNN, **dict(cnn or {})}
    channels_last = cnn_settings.pop("channels_last", None)
    encoder = build_encoder(
        observation_space, channels_last=channels_last, cnn_kwargs=cnn_settings
    )
    if hidden_sizes is None:
        images = any(isinstance(m, CnnEncoder) for m in encoder.modules())
        hidden_sizes = () if images else (64, 64)
    q_network = QNetwork(encoder, num_actions, hidden_sizes, activation)
    architecture = Architecture(
        "dqn",
        observation_space,
        action_space,
        dict(
            hidden_sizes=tuple(hidden_sizes),
            activation=activation,
            epsilon=epsilon,
            cnn=dict(cnn) if cnn is not None else None,
        ),
    )
    return architecture.attach(DqnAgent(q_network, num_actions, epsilon=epsilon))
