"""SAC models (squashed Gaussian actor, twin Q critic as one batched network)
and the SAC agent, the JAX twins of :mod:`parllel.torch.agents.sac_agent`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, cast

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from parllel.agents.base import check_mode
from parllel.errors import ConfigError
from parllel.jax.distributions import GaussianParams, SquashedGaussian
from parllel.jax.inputs import jax_input
from parllel.jax.models.encoders import build_encoder
from parllel.jax.models.heads import GaussianHead
from parllel.jax.models.mlp import MLP
from parllel.jax.models.params import (
    load_params,
    params_from_torch,
    params_to_numpy,
    params_to_torch,
)
from parllel.seeding import check_seed
from parllel.tree import tree_map

__all__ = [
    "SacActor",
    "SacAgent",
    "SacPolicyParams",
    "TwinQ",
    "build_sac_agent",
    "twin_q_from_torch",
    "twin_q_to_torch",
]


class SacActor(nn.Module):
    """Encoder, MLP trunk and a state-dependent Gaussian head (pre-squash).

    Parameter names are the torch ``SacActor``'s (``trunk``, ``head``), so
    :func:`~parllel.jax.models.params.params_from_torch` converts its state dict.

    Attributes:
        encoder: observation encoder (e.g. from ``build_encoder``).
        action_dim: size of the action vector.
        hidden_sizes: trunk hidden sizes.
        activation: trunk activation.
    """

    encoder: nn.Module
    action_dim: int
    hidden_sizes: Sequence[int] = (256, 256)
    activation: Callable[[Any], Any] = nn.relu

    @nn.compact
    def __call__(self, observation: Any) -> GaussianParams:
        """Observations ``[..., *obs]`` to ``GaussianParams [..., A]``."""
        features = self.encoder(observation)
        features = MLP(
            tuple(self.hidden_sizes), activation=self.activation, name="trunk"
        )(features)
        head = GaussianHead(self.action_dim, state_dependent_std=True, name="head")
        return head(features)


class _QNetwork(nn.Module):
    """One Q network: ``encoder(observation)`` and the action into an MLP."""

    encoder: nn.Module
    hidden_sizes: Sequence[int]
    activation: Callable[[Any], Any]

    @nn.compact
    def __call__(self, observation: Any, action: Any) -> Any:
        features = self.encoder(observation)
        inputs = jnp.concatenate([features, action.astype(features.dtype)], axis=-1)
        mlp = MLP(tuple(self.hidden_sizes), 1, activation=self.activation, name="mlp")
        return mlp(inputs)[..., 0]


class TwinQ(nn.Module):
    """Two independent Q networks evaluated as one batched network.

    ``nn.vmap`` over one Q network with its parameters stacked on a leading
    axis of size 2 (``params["q"]["mlp"]["layers_0"]["kernel"]`` is
    ``[2, in, out]``): one batched matmul per layer serves both critics.

    Example:
        >>> critic = TwinQ(FlattenEncoder((3,)))
        >>> params = critic.init(key, jnp.zeros((8, 3)), jnp.zeros((8, 1)))["params"]
        >>> critic.apply({"params": params}, observation, action).shape  # [2, 8]

    Attributes:
        encoder: observation encoder (each critic gets its own copy).
        hidden_sizes: MLP hidden sizes.
        activation: MLP activation.
    """

    encoder: nn.Module
    hidden_sizes: Sequence[int] = (256, 256)
    activation: Callable[[Any], Any] = nn.relu

    @nn.compact
    def __call__(self, observation: Any, action: Any) -> Any:
        """Both Q values ``[2, ...]`` for observations and actions ``[..., A]``."""
        twin = nn.vmap(
            _QNetwork,
            variable_axes={"params": 0},
            split_rngs={"params": True},
            in_axes=None,
            out_axes=0,
            axis_size=2,
        )
        return twin(self.encoder, tuple(self.hidden_sizes), self.activation, name="q")(
            observation, action
        )


def twin_q_from_torch(state_dict: Mapping[str, Any]) -> Any:
    """:class:`TwinQ` parameters from a torch ``TwinQ`` state dict (numpy arrays).

    The torch critic's two encoders and MLPs (``encoders.i``, ``mlps.i``)
    become the stacked ``q/encoder`` and ``q/mlp`` leaves.
    """
    separate = params_from_torch(state_dict)
    stacked: dict[str, Any] = {}
    for torch_name, name in (("encoders", "encoder"), ("mlps", "mlp")):
        pair = [separate.get(f"{torch_name}_{i}") for i in range(2)]
        if pair[0] is not None:
            stacked[name] = jax.tree.map(lambda *x: jnp.stack(x), *pair)
    return {"q": stacked}


def twin_q_to_torch(params: Any) -> dict[str, np.ndarray]:
    """A torch ``TwinQ`` state dict (numpy arrays) from :class:`TwinQ`
    parameters; the inverse of :func:`twin_q_from_torch`."""
    separate: dict[str, Any] = {}
    for name, torch_name in (("encoder", "encoders"), ("mlp", "mlps")):
        if name in params["q"]:
            for i in range(2):
                separate[f"{torch_name}_{i}"] = jax.tree.map(
                    lambda x, i=i: x[i], params["q"][name]
                )
    return params_to_torch(separate)


class SacPolicyParams(NamedTuple):
    """What :meth:`SacAgent.policy_step` acts with: the actor's parameters and
    whether actions are uniform in the bounds (the warm-up), a bool scalar."""

    actor: Any
    random_actions: Any


class SacAgent:
    """:class:`~parllel.jax.agents.base.JaxAgent` for SAC: actor, twin critic, distribution.

    ``policy_step`` samples squashed actions (deterministic: ``squash(mean)``)
    and records no ``agent_info``. While :attr:`random_actions` is true (and
    not deterministic) actions are uniform within the bounds instead: the
    warm-up before learning starts, e.g. set by
    ``AttributeSchedule(agent, "random_actions", lambda step: step < 1_000)``;
    the flag travels in :attr:`params`, so it switches without a recompile.
    :class:`~parllel.jax.algos.SAC` trains :attr:`actor_params` and
    :attr:`critic_params` and writes them back after every call.

    Example:
        >>> agent = build_sac_agent(obs_space, action_space, seed=seeds.torch)
        >>> handler = JaxHandler(agent, n_envs=1, seed=seeds.actions)

    Args:
        actor: the :class:`SacActor`.
        critic: the :class:`TwinQ`.
        distribution: :class:`~parllel.jax.distributions.SquashedGaussian`.
        actor_params: the actor's parameters.
        critic_params: the critic's parameters (stacked, ``[2, ...]`` leaves).
    """

    def __init__(
        self,
        actor: SacActor,
        critic: TwinQ,
        distribution: SquashedGaussian,
        actor_params: Any,
        critic_params: Any,
    ) -> None:
        self.actor = actor
        self.critic = critic
        self.distribution = distribution
        self.action_dim = int(distribution.action_dim)
        self.actor_params = actor_params
        self.critic_params = critic_params
        self.random_actions = False
        self.mode = "sample"

    @property
    def params(self) -> SacPolicyParams:
        """The acting parameters: the actor's and the warm-up flag."""
        return SacPolicyParams(self.actor_params, np.bool_(self.random_actions))

    @params.setter
    def params(self, params: SacPolicyParams) -> None:
        self.actor_params = params.actor

    def dist_params(self, actor_params: Any, observation: Any) -> GaussianParams:
        """The actor's pre-squash ``GaussianParams [..., A]``."""
        return cast(
            GaussianParams, self.actor.apply({"params": actor_params}, observation)
        )

    def q_values(self, critic_params: Any, observation: Any, action: Any) -> Any:
        """Both critics' values ``[2, ...]``."""
        return self.critic.apply({"params": critic_params}, observation, action)

    def policy_step(
        self, params: Any, observation: Any, key: jax.Array, deterministic: bool
    ) -> tuple[Any, dict[str, Any]]:
        """Actions ``[N, A]`` (no agent info) for observations ``[N, ...]``."""
        dist_params = self.dist_params(params.actor, observation)
        if deterministic:
            return self.distribution.deterministic(dist_params), {}
        sample_key, uniform_key = jax.random.split(key)
        action = self.distribution.sample(dist_params, sample_key)
        uniform = jax.random.uniform(
            uniform_key, action.shape, action.dtype, minval=-1.0, maxval=1.0
        )
        center, scale = self.distribution.center, self.distribution.scale
        random_action = center + scale * uniform
        return jnp.where(params.random_actions, random_action, action), {}

    def initial_state(self, n_envs: int) -> None:
        """Feed-forward: no state."""
        return None

    def set_mode(self, mode: str) -> None:
        """``train``/``sample``/``eval``; the handler acts deterministically in ``eval``."""
        self.mode = check_mode(mode)

    def state_dict(self) -> dict[str, Any]:
        """Actor and critic parameters with numpy leaves (for checkpoints)."""
        return {
            "actor": params_to_numpy(self.actor_params),
            "critic": params_to_numpy(self.critic_params),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned.

        Raises:
            CheckpointMismatchError: other structures or shapes.
        """
        self.actor_params = load_params(self.actor_params, state["actor"], "actor")
        self.critic_params = load_params(self.critic_params, state["critic"], "critic")


def build_sac_agent(
    observation_space: gym.Space,
    action_space: gym.spaces.Box,
    *,
    seed: int,
    hidden_sizes: Sequence[int] = (256, 256),
    activation: Callable[[Any], Any] = nn.relu,
    min_log_std: float = -20.0,
    max_log_std: float = 2.0,
) -> SacAgent:
    """Build a :class:`SacAgent` with MLP actor and twin Q for a 1-D Box action
    space, as :func:`parllel.torch.agents.build_sac_agent` (torch's default
    initialization, the Gaussian head orthogonal with gain 0.01).

    Args:
        observation_space: space passed to ``build_encoder``.
        action_space: 1-D ``Box`` with finite bounds.
        seed: seed of the initialization key (e.g. ``seeds.torch``, the
            learner's stream).
        hidden_sizes: hidden sizes of the actor trunk and each Q MLP.
        activation: activation of every MLP.
        min_log_std: lower clip of the actor's log-std.
        max_log_std: upper clip of the actor's log-std.

    Raises:
        ConfigError: the action space is not a bounded 1-D Box.
    """
    if not isinstance(action_space, gym.spaces.Box) or len(action_space.shape) != 1:
        raise ConfigError(f"SAC needs a 1-D Box action space; got {action_space}")
    action_dim = int(action_space.shape[0])
    hidden = tuple(int(h) for h in hidden_sizes)
    actor = SacActor(build_encoder(observation_space), action_dim, hidden, activation)
    critic = TwinQ(build_encoder(observation_space), hidden, activation)
    distribution = SquashedGaussian(
        action_dim, action_space.low, action_space.high, min_log_std, max_log_std
    )
    observation = jax_input(
        tree_map(lambda x: np.asarray(x)[None], observation_space.sample())
    )
    action = np.zeros((1, action_dim), np.float32)
    actor_key, critic_key = jax.random.split(jax.random.key(check_seed("seed", seed)))
    # jitted: one compiled program instead of one per eager op
    actor_params = jax.jit(actor.init)(actor_key, observation)["params"]
    critic_params = jax.jit(critic.init)(critic_key, observation, action)["params"]
    return SacAgent(actor, critic, distribution, actor_params, critic_params)
