"""The seed axis: K runs of one configuration as one program.

K agents built by the same code (each from its own run's seeds) become one
:class:`SeedStack`: their parameters stacked on a leading axis ``[K, ...]``.
A :class:`SeededHandler` steps all ``K * B`` envs of one cage with one
``jax.vmap``-ed policy call (run ``k`` owns env columns ``k * B .. (k + 1) *
B``), each run drawing actions from its own key;
:class:`~parllel.jax.algos.SeededPPO` updates every run in one vmapped call.
:class:`RunView` is one run's slice, checkpointed like a single run's agent.
See ``docs/seeds.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np

from parllel.agents.base import Agent, AgentExample
from parllel.agents.numpy_handler import batch_of_one, write_outputs
from parllel.agents.state import ALL, AgentHandler, EnvStates
from parllel.errors import ConfigError, ShapeError
from parllel.jax.agents.base import JaxAgent
from parllel.jax.inputs import host_arrays, jax_input
from parllel.jax.models.params import load_params, params_to_numpy
from parllel.jax.seed_devices import place_runs, seed_sharding
from parllel.seeding import check_seed
from parllel.tree import tree_map

__all__ = ["RunView", "SeedStack", "SeededHandler", "run_columns", "stack_trees"]


def stack_trees(trees: Sequence[Any]) -> Any:
    """The pytrees ``trees`` (same structure) stacked on a new leading axis."""
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *trees)


def take_run(tree: Any, run: int) -> Any:
    """Run ``run``'s slice ``[run]`` of every leaf of a stacked pytree."""
    return jax.tree.map(lambda leaf: leaf[run], tree)


def put_run(tree: Any, run: int, value: Any) -> Any:
    """A stacked pytree with run ``run``'s slice replaced by ``value``."""
    return jax.tree.map(lambda leaf, new: leaf.at[run].set(new), tree, value)


def run_columns(run: int, envs_per_run: int) -> slice:
    """The env columns of run ``run`` in a ``[T, K * B]`` sample tree."""
    return slice(run * envs_per_run, (run + 1) * envs_per_run)


class SeedStack:
    """K agents of one configuration, their parameters stacked ``[K, ...]``.

    The first agent lends its pure functions (``policy_step``,
    ``policy_value``, ``evaluate``) to every run; the agents must come from
    the same code with different seeds (same network, same shapes).

    Example:
        >>> agents = [build_actor_critic_agent(obs, act, seed=s.torch) for s in run_seeds]
        >>> stack = SeedStack(agents)
        >>> stack.params  # every leaf [K, ...]

    Args:
        agents: one :class:`~parllel.jax.agents.base.JaxAgent` per run.

    Raises:
        ConfigError: no agents, or parameters of other shapes.
    """

    def __init__(self, agents: Sequence[JaxAgent]) -> None:
        if not agents:
            raise ConfigError("SeedStack needs at least one agent")
        shapes = [
            jax.tree.map(lambda leaf: np.shape(leaf), agent.params) for agent in agents
        ]
        for run, shape in enumerate(shapes[1:], start=1):
            if shape != shapes[0]:
                raise ConfigError(
                    f"run {run}'s parameters differ from run 0's in structure or "
                    "shape: the runs of a seed axis share one configuration"
                )
        self.agents = list(agents)
        self.agent = agents[0]
        self.sharding = seed_sharding(len(agents))
        self.params = self.place(stack_trees([agent.params for agent in agents]))

    def place(self, tree: Any) -> Any:
        """``tree``'s ``[K, ...]`` leaves split over the devices as the
        parameters are (:mod:`parllel.jax.seed_devices`)."""
        return place_runs(tree, self.sharding)

    @property
    def n_runs(self) -> int:
        """K, the number of runs."""
        return len(self.agents)

    def run_params(self, run: int) -> Any:
        """Run ``run``'s parameters (unstacked)."""
        return take_run(self.params, run)


class RunView:
    """One run of a :class:`SeedStack` as a checkpoint object: its
    ``state_dict`` is ``{"params": ...}`` with that run's numpy leaves, as a
    single run's :class:`~parllel.jax.agents.ActorCriticAgent` writes.

    Args:
        stack: the stacked runs.
        run: the run's index.
    """

    def __init__(self, stack: SeedStack, run: int) -> None:
        self.stack = stack
        self.run = run

    def state_dict(self) -> dict[str, Any]:
        """``{"params": ...}`` of this run (numpy leaves)."""
        return {"params": params_to_numpy(self.stack.run_params(self.run))}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore this run's parameters from :meth:`state_dict`'s output."""
        params = load_params(self.stack.run_params(self.run), state["params"])
        self.stack.params = put_run(self.stack.params, self.run, params)


class RunActionKey:
    """Run ``run``'s action key in a :class:`SeededHandler`, checkpointable
    as a generator (``get_state`` / ``set_state``, as
    :class:`~parllel.jax.ActionKey`)."""

    def __init__(self, handler: SeededHandler, run: int) -> None:
        self.handler = handler
        self.run = run

    def get_state(self) -> np.ndarray:
        """The key's data (numpy)."""
        return np.asarray(jax.random.key_data(self.handler.keys[self.run]))

    def set_state(self, state: Any) -> None:
        """Continue from a state :meth:`get_state` returned."""
        key = jax.random.wrap_key_data(jnp.asarray(np.asarray(state)))
        self.handler.keys = self.handler.keys.at[self.run].set(key)

    def state_dict(self) -> dict[str, Any]:
        """``{"key": ...}``, for a runner's checkpoint objects."""
        return {"key": self.get_state()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.set_state(state["key"])


class SeededHandler(AgentHandler):
    """:class:`~parllel.agents.Handler` stepping K runs' envs in one vmapped call.

    The sample tree has ``K * B`` env columns; run ``k`` owns columns
    ``run_columns(k, B)``. Each step reshapes the observations to ``[K, B,
    ...]`` and calls ``vmap(policy_step)`` with the stacked parameters and
    the K runs' keys, drawing exactly what K
    :class:`~parllel.jax.JaxHandler` s seeded ``actions_seeds`` would. Values
    of a subset of envs (the final observations of truncated episodes) are
    computed per run with that run's parameters.

    Example:
        >>> handler = SeededHandler(stack, envs_per_run=8,
        ...                         seeds=[s.actions for s in run_seeds])

    Args:
        stack: the runs' agents and stacked parameters.
        envs_per_run: B, the envs of each run.
        seeds: each run's action seed (``seeds.actions`` of its run).

    Raises:
        ConfigError: a recurrent agent, or not one seed per run.
    """

    def __init__(
        self, stack: SeedStack, envs_per_run: int, *, seeds: Sequence[int]
    ) -> None:
        agent = stack.agent
        if agent.initial_state(int(envs_per_run)) is not None:
            raise ConfigError("SeededHandler runs feed-forward agents only")
        if len(seeds) != stack.n_runs:
            raise ConfigError(
                f"SeededHandler needs one action seed per run: {stack.n_runs} "
                f"runs, {len(seeds)} seeds"
            )
        super().__init__(
            cast(Agent, agent), stack.n_runs * int(envs_per_run), EnvStates(None, None)
        )
        self.stack = stack
        self.envs_per_run = int(envs_per_run)
        self.keys = jnp.stack(
            [jax.random.key(check_seed("seed", seed)) for seed in seeds]
        )
        self._acting: tuple[Any, Any] = (None, None)
        policy_step = agent.policy_step

        def sample(params: Any, observation: Any, key: jax.Array) -> Any:
            key, draw = jax.random.split(key)
            action, info = policy_step(params, observation, draw, False)
            return action, info, key

        def greedy(params: Any, observation: Any) -> Any:
            return policy_step(params, observation, jax.random.key(0), True)

        self._sample = jax.jit(jax.vmap(sample))
        self._greedy = jax.jit(jax.vmap(greedy))
        value = getattr(agent, "policy_value", None)
        self._value = None if value is None else jax.jit(value)
        self._values = None if value is None else jax.jit(jax.vmap(value))

    def _acting_params(self) -> Any:
        """The stack's parameters on one device: a step of a few envs costs
        less there than split over devices (copied once per update)."""
        params = self.stack.params
        if self.stack.sharding is None:
            return params
        if self._acting[0] is not params:
            self._acting = (params, jax.device_put(params, jax.devices()[0]))
        return self._acting[1]

    def action_key(self, run: int) -> RunActionKey:
        """Run ``run``'s action key, as a checkpoint object."""
        return RunActionKey(self, run)

    def _by_run(self, tree: Any) -> Any:
        """``[K * B, ...]`` leaves as ``[K, B, ...]``."""
        K, B = self.stack.n_runs, self.envs_per_run

        def split(leaf: Any) -> Any:
            array = np.asarray(leaf)
            if array.shape[:1] != (K * B,):
                raise ShapeError(
                    f"SeededHandler steps all {K} x {B} envs at once; got a "
                    f"leading dim of {array.shape[:1]}"
                )
            return array.reshape(K, B, *array.shape[1:])

        return tree_map(split, jax_input(tree))

    @staticmethod
    def _flat(tree: Any) -> Any:
        return tree_map(
            lambda leaf: leaf.reshape(-1, *leaf.shape[2:]), host_arrays(tree)
        )

    # -- the Handler protocol --------------------------------------------------
    def example_outputs(
        self, observation: Any, action: Any = None, reward: Any = None
    ) -> AgentExample:
        """One env's action and agent info (numpy) for ``observation``."""
        action_out, info = jax.device_get(
            self.stack.agent.policy_step(
                self.stack.run_params(0),
                jax_input(batch_of_one(observation)),
                jax.random.key(0),
                False,
            )
        )

        def first(leaf: Any) -> Any:
            leaf = np.asarray(leaf)[0]
            if np.issubdtype(leaf.dtype, np.signedinteger):
                return leaf.astype(np.int64)
            return leaf

        return AgentExample(tree_map(first, action_out), tree_map(first, info), None)

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
        """Every run's actions in one call, written into the slots."""
        observation = self._by_run(observation)
        params = self._acting_params()
        if self._mode == "eval":
            action, info = self._greedy(params, observation)
        else:
            action, info, self.keys = self._sample(params, observation, self.keys)
        action, info = self._flat((action, info))
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
        """Values (numpy ``[N]``): of every env in one vmapped call, or of
        the envs ``env_indices`` run by run, each with its own parameters."""
        if self._value is None or self._values is None:
            raise ConfigError(
                f"{type(self.stack.agent).__name__} has no policy_value(params, "
                "observation): it cannot bootstrap an on-policy batch"
            )
        if env_indices is ALL or env_indices is None:
            values = self._values(self._acting_params(), self._by_run(observation))
            return np.asarray(values).reshape(-1)
        runs = np.asarray(env_indices) // self.envs_per_run
        inputs = jax_input(observation)
        out = np.empty(len(runs), np.float32)
        for run in np.unique(runs):
            rows = np.nonzero(runs == run)[0]
            run_input = tree_map(lambda leaf, rows=rows: np.asarray(leaf)[rows], inputs)
            out[rows] = self._value(self.stack.run_params(int(run)), run_input)
        return out

    def reset(self, env_indices: Any = None) -> None:
        """Nothing to reset (feed-forward)."""

    def reset_one(self, env_index: int) -> None:
        """Nothing to reset (feed-forward)."""

    def write_state(self, out: Any) -> None:
        """Nothing to write (feed-forward)."""

    def close(self) -> None:
        """Nothing held."""
