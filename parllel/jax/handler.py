"""JaxHandler: runs a JAX agent's jitted policy on numpy sample-tree slots."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np

from parllel.agents.base import Agent, AgentExample
from parllel.agents.numpy_handler import batch_of_one, write_outputs
from parllel.agents.state import ALL, AgentHandler, EnvStates
from parllel.arrays import Array
from parllel.errors import ConfigError
from parllel.jax.agents.base import JaxAgent
from parllel.seeding import check_seed
from parllel.tree import tree_map
from parllel.tree.utils import tree_to_builtin

__all__ = ["JaxHandler", "jax_input"]


def jax_input(tree: Any) -> Any:
    """A sample-tree slot (ndarray, Array or tree of them) as a jit argument:
    numpy leaves in plain dicts and tuples (no copy here)."""
    if tree is None:
        return None
    return tree_to_builtin(
        tree, lambda leaf: leaf.to_ndarray() if isinstance(leaf, Array) else leaf
    )


def _host(tree: Any) -> Any:
    """Numpy leaves; integer actions widened to int64, as torch's."""
    return tree_map(
        lambda leaf: (
            leaf.astype(np.int64)
            if np.issubdtype(leaf.dtype, np.signedinteger)
            else leaf
        ),
        jax.device_get(tree),
    )


class JaxHandler(AgentHandler):
    """:class:`~parllel.agents.Handler` for a :class:`~parllel.jax.agents.JaxAgent`.

    At every step the sampler's numpy views go to one ``jax.jit``-compiled
    call of the agent's ``policy_step`` with ``agent.params`` and the
    handler's PRNG key (split inside the call, so no host work draws random
    numbers); its outputs come back as numpy views of the results and are
    written into the ``out`` slots (one copy each). On a CPU the inputs are
    the only other copy (XLA owns its input buffers). In ``"eval"`` mode the
    actions are the distribution's mode.

    JAX agents are feed-forward: :meth:`reset` and :meth:`write_state` have
    nothing to do, and recurrent agents are refused.

    Args:
        agent: the JAX agent (e.g. :class:`~parllel.jax.agents.ActorCriticAgent`).
        n_envs: number of envs stepped.
        seed: seed of the action draws (``seeds.actions``); None draws one
            from numpy's global RNG (seeded by ``seed_everything``).

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
        seed = (
            int(np.random.randint(2**31 - 1))
            if seed is None
            else check_seed("seed", seed)
        )
        super().__init__(cast(Agent, agent), n_envs, EnvStates(None, None))
        self.jax_agent = agent
        self._key = jax.random.key(seed)
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
            action, info, self._key = self._sample(
                params, jax_input(observation), self._key
            )
        action, info = jax.device_get((action, info))
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

    # -- checkpoints -------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The action key (checkpoint it to resume the same action stream)."""
        return {"key": np.asarray(jax.random.key_data(self._key))}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self._key = jax.random.wrap_key_data(jnp.asarray(state["key"]))
