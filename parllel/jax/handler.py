"""JaxHandler: runs a JAX agent's jitted policy on numpy sample-tree slots."""

from __future__ import annotations

from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np

from parllel.agents.base import Agent, AgentExample
from parllel.agents.numpy_handler import batch_of_one, write_outputs
from parllel.agents.state import ALL, AgentHandler, EnvStates
from parllel.errors import ConfigError
from parllel.jax.agents.base import JaxAgent
from parllel.jax.inputs import host_arrays, jax_input
from parllel.seeding import check_seed
from parllel.tree import tree_map

__all__ = ["ActionKey", "JaxHandler"]


class ActionKey:
    """The PRNG key a handler draws actions with, checkpointable as a generator.

    ``get_state()`` / ``set_state()`` (numpy key data) make it a
    :class:`~parllel.backends.StatefulGenerator`: the runners
    checkpoint it with the run's RNG states, as a torch handler's generator.

    Args:
        seed: the seed of the first key (e.g. ``seeds.actions``).
    """

    def __init__(self, seed: int) -> None:
        self.key = jax.random.key(check_seed("seed", seed))

    def get_state(self) -> np.ndarray:
        """The key's data (numpy)."""
        return np.asarray(jax.random.key_data(self.key))

    def set_state(self, state: Any) -> None:
        """Continue from a state :meth:`get_state` returned."""
        self.key = jax.random.wrap_key_data(jnp.asarray(np.asarray(state)))


def _host(tree: Any) -> Any:
    """Numpy leaves; integer actions widened to int64, as torch's."""
    return tree_map(
        lambda leaf: (
            leaf.astype(np.int64)
            if np.issubdtype(leaf.dtype, np.signedinteger)
            else leaf
        ),
        host_arrays(tree),
    )


class JaxHandler(AgentHandler):
    """:class:`~parllel.agents.Handler` for a :class:`~parllel.jax.agents.base.JaxAgent`.

    Each step is one ``jax.jit``-compiled call of the agent's ``policy_step``
    with ``agent.params`` and the handler's PRNG key; outputs are copied into
    the ``out`` slots. ``"eval"`` mode takes the distribution's mode.
    Feed-forward agents only (see docs/jax.md, "What is compiled").

    Args:
        agent: the JAX agent (e.g. :class:`~parllel.jax.agents.ActorCriticAgent`).
        seed: seed of the action draws (``seeds.actions``); None draws one from
            numpy's global RNG. The key (:class:`ActionKey`) is checkpointed.

    Example:
        >>> handler = JaxHandler(agent, n_envs=8, seed=seeds.actions)
        >>> sample_tree = build_sample_tree(cage, handler, batch_T=32)
    """

    def __init__(
        self, agent: JaxAgent, n_envs: int, *, seed: int | None = None
    ) -> None:
        if agent.initial_state(int(n_envs)) is not None:
            raise ConfigError(
                "JaxHandler runs feed-forward agents; recurrent JAX agents are "
                "not supported (use parllel.torch for recurrent PPO)"
            )
        seed = int(np.random.randint(2**31 - 1)) if seed is None else seed
        super().__init__(cast(Agent, agent), n_envs, EnvStates(None, None))
        self.jax_agent = agent
        self.generator = ActionKey(seed)
        policy_step = agent.policy_step

        def sample(params: Any, observation: Any, key: jax.Array) -> Any:
            key, draw = jax.random.split(key)
            action, info = policy_step(params, observation, draw, False)
            return action, info, key

        def greedy(params: Any, observation: Any) -> Any:
            return policy_step(params, observation, jax.random.key(0), True)

        self._sample = jax.jit(sample)
        self._greedy = jax.jit(greedy)
        value = getattr(agent, "policy_value", None)
        self._value = None if value is None else jax.jit(value)

    # -- the Handler protocol --------------------------------------------------
    def example_outputs(
        self, observation: Any, action: Any = None, reward: Any = None
    ) -> AgentExample:
        """One env's action and agent info (numpy) for ``observation``; the
        handler's key is not advanced."""
        step = self.jax_agent.policy_step(
            self.jax_agent.params,
            jax_input(batch_of_one(observation)),
            jax.random.key(0),
            False,
        )
        action_out, info = _host(step)
        first = tree_map(lambda leaf: leaf[0], (action_out, info))
        return AgentExample(first[0], first[1], None)

    def step(
        self,
        observation: Any,
        prev_action: Any,
        prev_reward: Any,
        *,
        out_action: Any,
        out_agent_info: Any,
        env_indices: Any = ALL,
    ) -> None:
        """Run the policy on ``observation`` and write its outputs into the slots."""
        params = self.jax_agent.params
        if self._mode == "eval":
            action, info = self._greedy(params, jax_input(observation))
        else:
            key = self.generator
            action, info, key.key = self._sample(
                params, jax_input(observation), key.key
            )
        action, info = host_arrays((action, info))
        write_outputs(out_action, action)
        if len(out_agent_info):
            write_outputs(out_agent_info, info)

    def value(
        self,
        observation: Any,
        prev_action: Any,
        prev_reward: Any,
        env_indices: Any = ALL,
    ) -> np.ndarray:
        """Values (numpy ``[N]``) of ``observation``."""
        if self._value is None:
            raise ConfigError(
                f"{type(self.jax_agent).__name__} has no policy_value(params, "
                "observation): it cannot bootstrap an on-policy batch"
            )
        return np.asarray(self._value(self.jax_agent.params, jax_input(observation)))

    def reset(self, env_indices: Any = None) -> None:
        """Nothing to reset (feed-forward)."""

    def reset_one(self, env_index: int) -> None:
        """Nothing to reset (feed-forward)."""

    def write_state(self, out: Any) -> None:
        """Nothing to write (feed-forward)."""

    def close(self) -> None:
        """Nothing held."""
