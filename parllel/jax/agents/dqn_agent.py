"""The Q-network and the epsilon-greedy DQN agent, the JAX twins of
:mod:`parllel.torch.agents.dqn_agent`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from parllel.agents.base import check_mode
from parllel.errors import ConfigError
from parllel.jax.inputs import jax_input
from parllel.jax.models.encoders import NATURE_CNN, build_encoder, is_image_encoder
from parllel.jax.models.mlp import MLP
from parllel.jax.models.params import init_params, load_params, params_to_numpy
from parllel.seeding import check_seed
from parllel.tree import tree_map
from parllel.validation import check_at_least, check_fraction

__all__ = ["DqnAgent", "DqnPolicyParams", "QNetwork", "build_dqn_agent"]


class QNetwork(nn.Module):
    """Encoder and MLP to one Q value per action, ``[..., num_actions]``.

    Parameter names are the torch ``QNetwork``'s (``encoder``, ``mlp``), so
    :func:`~parllel.jax.models.params.params_from_torch` converts its state dict.

    Attributes:
        encoder: observation encoder (e.g. from ``build_encoder``).
        num_actions: number of discrete actions.
        hidden_sizes: MLP hidden sizes.
        activation: MLP activation.
    """

    encoder: nn.Module
    num_actions: int
    hidden_sizes: Sequence[int] = (64, 64)
    activation: Callable[[Any], Any] = nn.relu

    @nn.compact
    def __call__(self, observation: Any) -> Any:
        """Q values ``[..., num_actions]`` for observations ``[..., *obs]``."""
        mlp = MLP(
            tuple(self.hidden_sizes),
            int(self.num_actions),
            activation=self.activation,
            name="mlp",
        )
        return mlp(self.encoder(observation))


class DqnPolicyParams(NamedTuple):
    """What :meth:`DqnAgent.policy_step` acts with: the Q-network's parameters
    and the exploration epsilon (a float32 scalar, so a new epsilon needs no
    recompile)."""

    q: Any
    epsilon: Any


class DqnAgent:
    """:class:`~parllel.jax.agents.base.JaxAgent` acting epsilon-greedily on a Q-network.

    ``policy_step`` takes the greedy action, replaced by a uniform one with
    probability :attr:`epsilon` (both draws from the handler's key); the
    deterministic call (the handler's ``"eval"`` mode) is greedy, as the
    torch ``DqnAgent`` with its default ``eval_epsilon=0``. Set
    :attr:`epsilon` from a schedule as training goes (e.g.
    ``AttributeSchedule(agent, "epsilon", epsilon_schedule(...))``);
    :class:`~parllel.jax.algos.DQN` trains :attr:`q_params`.

    Example:
        >>> agent = build_dqn_agent(obs_space, action_space, seed=seeds.torch)
        >>> handler = JaxHandler(agent, n_envs=4, seed=seeds.actions)

    Args:
        q_network: the :class:`QNetwork`.
        num_actions: number of discrete actions.
        q_params: the Q-network's parameters.
        epsilon: initial probability of a uniformly random action.
    """

    def __init__(
        self,
        q_network: QNetwork,
        num_actions: int,
        q_params: Any,
        epsilon: float = 1.0,
    ) -> None:
        check_at_least("num_actions", num_actions)
        check_fraction("epsilon", epsilon)
        self.q_network = q_network
        self.num_actions = int(num_actions)
        self.q_params = q_params
        self.epsilon = float(epsilon)
        self.mode = "sample"

    @property
    def params(self) -> DqnPolicyParams:
        """The acting parameters: the Q-network's and the current epsilon."""
        return DqnPolicyParams(self.q_params, np.float32(self.epsilon))

    @params.setter
    def params(self, params: DqnPolicyParams) -> None:
        self.q_params = params.q

    def q_values(self, q_params: Any, observation: Any) -> Any:
        """Q values ``[..., num_actions]`` (a pure function of ``q_params``)."""
        return self.q_network.apply({"params": q_params}, observation)

    def policy_step(
        self, params: Any, observation: Any, key: jax.Array, deterministic: bool
    ) -> tuple[Any, dict[str, Any]]:
        """Actions ``[N]`` (int32, no agent info) for observations ``[N, ...]``."""
        greedy = jnp.argmax(self.q_values(params.q, observation), axis=-1)
        greedy = greedy.astype(jnp.int32)
        if deterministic:
            return greedy, {}
        explore_key, action_key = jax.random.split(key)
        explore = jax.random.uniform(explore_key, greedy.shape) < params.epsilon
        uniform = jax.random.randint(
            action_key, greedy.shape, 0, self.num_actions, jnp.int32
        )
        return jnp.where(explore, uniform, greedy), {}

    def initial_state(self, n_envs: int) -> None:
        """Feed-forward: no state."""
        return None

    def set_mode(self, mode: str) -> None:
        """``train``/``sample``/``eval``; the handler acts greedily in ``eval``."""
        self.mode = check_mode(mode)

    def state_dict(self) -> dict[str, Any]:
        """The Q-network's parameters with numpy leaves (for checkpoints)."""
        return {"q_network": params_to_numpy(self.q_params)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned.

        Raises:
            CheckpointMismatchError: other structures or shapes.
        """
        self.q_params = load_params(self.q_params, state["q_network"], "q_network")


def build_dqn_agent(
    observation_space: gym.Space,
    action_space: gym.spaces.Discrete,
    *,
    seed: int,
    hidden_sizes: Sequence[int] | None = None,
    activation: Callable[[Any], Any] = nn.relu,
    epsilon: float = 1.0,
    cnn: Mapping[str, Any] | None = None,
) -> DqnAgent:
    """Build a :class:`DqnAgent`, as :func:`parllel.torch.agents.build_dqn_agent`.

    Image observations get the Nature-DQN network
    (:data:`~parllel.jax.models.NATURE_CNN`, ``cnn=`` updates its settings)
    and a linear layer to the Q values (``hidden_sizes`` ``()``); other
    observations an MLP of ``(64, 64)`` by default. Every layer has torch's
    default initialization, as the torch Q-network.

    Args:
        observation_space: space passed to ``build_encoder``.
        action_space: a ``Discrete`` space.
        seed: seed of the initialization key (e.g. ``seeds.torch``, the
            learner's stream).
        hidden_sizes: MLP hidden sizes (None: the defaults above).
        activation: MLP activation.
        epsilon: initial exploration epsilon.
        cnn: overrides of the Nature CNN settings (``channels_last`` too).

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
        hidden_sizes = () if is_image_encoder(encoder) else (64, 64)
    network = QNetwork(
        encoder, num_actions, tuple(int(h) for h in hidden_sizes), activation
    )
    observation = jax_input(
        tree_map(lambda x: np.asarray(x)[None], observation_space.sample())
    )
    key = jax.random.key(check_seed("seed", seed))
    params = init_params(network, observation, key)
    return DqnAgent(network, num_actions, params, epsilon=epsilon)
