"""PolicyMapping: each (env, agent) row acts with one of several policies.

Multi-agent sample trees keep agents as one more dimension (``[T, B, A,
...]``). A :class:`PolicyMapping` is a :class:`~parllel.agents.Handler` over
those ``[B, A]`` rows that routes every row to one of several policy
handlers by an assignment array ``[B, A]`` of policy indices: each policy's
rows are gathered into one batch (one inference call per policy and step),
and its actions and agent info are scattered back into the sample tree.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from parllel import fields
from parllel.agents.base import AgentExample, Handler, check_mode
from parllel.agents.state import ALL, as_index
from parllel.errors import ConfigError, ShapeError
from parllel.tree import tree_items, tree_map

POLICY_INDEX_DTYPE = np.int16
"""dtype of ``agent_info.policy_index``."""


def _leaves(tree: Any) -> list[Any]:
    return [leaf for _, leaf in tree_items(tree)]


class PolicyMapping:
    """A :class:`~parllel.agents.Handler` routing ``[B, A]`` rows to several policies.

    Every policy is a feed-forward Handler built for ``n_envs * n_agents`` rows
    (row ``env * n_agents + agent``); ``assignment[b, a]`` names the policy of
    agent ``a`` of env ``b`` (default 0). :meth:`step` calls each policy once
    with its rows and records ``agent_info.policy_index`` (see
    docs/multiagent.md, "Policy mapping").

    Args:
        policies: the policy handlers (index 0 first; in self-play, the learner).
        value_policies: indices of the policies whose :meth:`value` is computed
            (None: all); the others' value is 0.

    Raises:
        ConfigError: no policy, a recurrent policy, or a policy whose
            ``n_envs`` is not ``n_envs * n_agents``.

    Example:
        >>> mapping = PolicyMapping([learner, opponent], n_envs=8, n_agents=2)
        >>> mapping.assign(3, [1, 0])  # env 3: agent 0 plays the opponent
        >>> example = mapping.example_outputs(cage.example[fields.OBSERVATION])
    """

    def __init__(
        self,
        policies: Sequence[Handler],
        n_envs: int,
        n_agents: int,
        *,
        value_policies: Sequence[int] | None = None,
    ) -> None:
        self.n_envs = int(n_envs)
        self.n_agents = int(n_agents)
        if self.n_envs < 1 or self.n_agents < 1:
            raise ConfigError(
                f"n_envs and n_agents must be >= 1, got {n_envs} and {n_agents}"
            )
        if not len(policies):
            raise ConfigError("PolicyMapping needs at least one policy handler")
        self._policies: list[Handler] = []
        self._info_keys: list[tuple[str, ...] | None] = []
        # agent-info keys of handlers seen before (a handler set again is not rerun)
        self._known_keys: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        for policy in policies:
            self.add_policy(policy)
        self._value_policies = None if value_policies is None else set(value_policies)
        self._assignment = np.zeros((self.n_envs, self.n_agents), POLICY_INDEX_DTYPE)
        self._all_envs = np.arange(self.n_envs)
        # name -> (signature, tree, rows)
        self._buffers: dict[str, tuple[Any, Any, int]] = {}
        self._slices: dict[Any, Any] = {}  # (name, m) -> tree of buffer[:m]
        self._mode = "sample"

    # -- policies and assignment -------------------------------------------------
    @property
    def n_rows(self) -> int:
        """Rows of every policy handler: ``n_envs * n_agents``."""
        return self.n_envs * self.n_agents

    @property
    def policies(self) -> tuple[Handler, ...]:
        """The policy handlers, by index."""
        return tuple(self._policies)

    def _checked(self, handler: Handler) -> Handler:
        if handler.recurrent:
            raise ConfigError(
                f"PolicyMapping supports feed-forward policies only; "
                f"{type(handler).__name__} holds a recurrent agent"
            )
        if int(handler.n_envs) != self.n_rows:
            raise ConfigError(
                f"every policy handler of a PolicyMapping is built for n_envs * "
                f"n_agents = {self.n_envs} * {self.n_agents} = {self.n_rows} rows; "
                f"got a {type(handler).__name__} with n_envs={handler.n_envs}"
            )
        return handler

    def add_policy(self, handler: Handler) -> int:
        """Append a policy handler; return its index."""
        self._policies.append(self._checked(handler))
        self._info_keys.append(self._remembered_keys(handler))
        return len(self._policies) - 1

    def set_policy(self, index: int, handler: Handler) -> None:
        """Replace the policy handler at ``index`` (rows assigned to it follow)."""
        if not 0 <= index < len(self._policies):
            raise ConfigError(
                f"policy index {index} out of range [0, {len(self._policies)})"
            )
        self._policies[index] = self._checked(handler)
        self._info_keys[index] = self._remembered_keys(handler)

    def _remembered_keys(self, handler: Handler) -> tuple[str, ...] | None:
        try:
            return self._known_keys.get(handler)
        except TypeError:  # not weak-referenceable
            return None

    def _remember_keys(self, index: int, agent_info: Any) -> tuple[str, ...]:
        keys = self._info_keys[index] = tuple(_info_mapping(agent_info))
        try:
            self._known_keys[self._policies[index]] = keys
        except TypeError:
            pass
        return keys

    @property
    def assignment(self) -> np.ndarray:
        """Policy index of every (env, agent), ``[n_envs, n_agents]`` (read-only)."""
        view = self._assignment.view()
        view.flags.writeable = False
        return view

    def assign(self, env_index: Any, policy_indices: Any) -> None:
        """Set the policies of the agents of ``env_index`` (an int, slice or int array).

        ``policy_indices`` broadcasts to ``[len(envs), n_agents]`` (an int: the
        same policy for every agent; ``[A]``: per agent).

        Raises:
            ConfigError: a policy index out of range.
        """
        values = np.asarray(policy_indices)
        if values.size and (values.min() < 0 or values.max() >= len(self._policies)):
            raise ConfigError(
                f"policy indices must be in [0, {len(self._policies)}), got "
                f"{values.tolist()}"
            )
        self._assignment[env_index] = values

    # -- Handler protocol --------------------------------------------------------
    @property
    def recurrent(self) -> bool:
        """Always False (recurrent policies are refused)."""
        return False

    @property
    def mode(self) -> str:
        """The mode last set with :meth:`set_mode`."""
        return self._mode

    def set_mode(self, mode: str) -> None:
        """Switch every policy to ``mode``."""
        self._mode = check_mode(mode)
        for policy in self._policies:
            policy.set_mode(mode)

    def example_outputs(
        self, observation: Any, action: Any = None, reward: Any = None
    ) -> AgentExample:
        """One env's outputs: ``action`` ``[A, ...]``, ``agent_info`` ``[A, ...]``.

        ``observation`` (and ``action``) are one env's examples, leaves
        ``[A, ...]``; each policy is run on agent 0's row. The agent info is
        the union of every policy's keys plus ``policy_index``.

        Raises:
            ConfigError: policies disagree on an action's or an info key's
                shape or dtype.
        """
        one_obs = tree_map(lambda leaf: np.asarray(leaf)[0], observation)
        one_action = (
            None if action is None else tree_map(lambda a: np.asarray(a)[0], action)
        )
        examples = [
            p.example_outputs(one_obs, one_action, reward) for p in self._policies
        ]
        for index, example in enumerate(examples):
            self._remember_keys(index, example.agent_info)
            _same_layout(examples[0].action, example.action, f"policy {index}'s action")
        info: dict[str, Any] = {}
        for index, example in enumerate(examples):
            for key, value in _info_mapping(example.agent_info).items():
                if key in info:
                    _same_layout(
                        info[key], value, f"policy {index}'s agent_info {key!r}"
                    )
                else:
                    info[key] = value
        stack = lambda leaf: np.repeat(np.asarray(leaf)[None], self.n_agents, 0)  # noqa: E731
        stacked_info = {key: tree_map(stack, value) for key, value in info.items()}
        stacked_info[fields.POLICY_INDEX] = np.zeros(self.n_agents, POLICY_INDEX_DTYPE)
        return AgentExample(tree_map(stack, examples[0].action), stacked_info, None)

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
        """Run every policy on its rows of ``env_indices``; write the outputs.

        ``observation`` and ``prev_action`` leaves are ``[n, A, ...]``;
        ``prev_reward`` is ``[n]`` (the env's reward, given to each of its
        agents) or ``[n, A]``.
        """
        envs = self._env_ids(env_indices, observation)
        assigned = self._assignment[envs]  # [n, A]
        has_info = len(out_agent_info) > 0
        if has_info and fields.POLICY_INDEX in out_agent_info:
            out_agent_info[fields.POLICY_INDEX][...] = assigned
        info_keys = [k for k in out_agent_info if k != fields.POLICY_INDEX]
        flat = assigned.reshape(-1)
        for index in np.unique(flat):
            rows = np.flatnonzero(flat == index)
            policy = self._policies[index]
            keys = self._policy_keys(int(index), observation, rows)
            inputs = self._gather_inputs(observation, prev_action, prev_reward, rows)
            m = len(rows)
            action_out = self._slice("action", out_action, m)
            written = tuple(k for k in info_keys if k in keys)
            info_out = self._info_slices(out_agent_info, written, m)
            policy.step(
                *inputs,
                out_action=action_out,
                out_agent_info=info_out,
                env_indices=self._policy_rows(envs, rows),
            )
            env_rows, agent_cols = np.divmod(rows, self.n_agents)
            for target, value in zip(_leaves(out_action), _leaves(action_out)):
                target[env_rows, agent_cols] = value
            for key in info_keys:
                if key in written:
                    pairs = zip(_leaves(out_agent_info[key]), _leaves(info_out[key]))
                    for target, value in pairs:
                        target[env_rows, agent_cols] = value
                else:
                    for target in _leaves(out_agent_info[key]):
                        target[env_rows, agent_cols] = 0

    def value(
        self,
        observation: Any,
        prev_action: Any,
        prev_reward: Any,
        env_indices: Any = ALL,
    ) -> np.ndarray:
        """Values ``[n, A]`` (float32) of every row, each from its policy.

        Uses the current assignment: ask for the values of ended episodes
        before reassigning their envs.
        """
        envs = self._env_ids(env_indices, observation)
        flat = self._assignment[envs].reshape(-1)
        values = np.zeros((len(envs), self.n_agents), np.float32)
        for index in np.unique(flat):
            policy = self._policies[index]
            if not callable(getattr(policy, "value", None)) or (
                self._value_policies is not None
                and int(index) not in self._value_policies
            ):
                continue
            rows = np.flatnonzero(flat == index)
            inputs = self._gather_inputs(observation, prev_action, prev_reward, rows)
            result = policy.value(*inputs, env_indices=self._policy_rows(envs, rows))
            env_rows, agent_cols = np.divmod(rows, self.n_agents)
            values[env_rows, agent_cols] = np.asarray(result).reshape(len(rows))
        return values

    def reset(self, env_indices: Any = None) -> None:
        """Nothing to reset: every policy is feed-forward."""

    def reset_one(self, env_index: int) -> None:
        """Nothing to reset: every policy is feed-forward."""

    def write_state(self, out: Any) -> None:
        """Nothing to write: no recurrent state."""

    # -- gather / scatter --------------------------------------------------------
    def _env_ids(self, env_indices: Any, observation: Any) -> np.ndarray:
        index = as_index(env_indices)
        envs = self._all_envs[index] if isinstance(index, slice) else index
        envs = np.asarray(envs, dtype=np.int64)
        if envs.ndim != 1:
            raise ConfigError(
                f"env_indices must be a slice or a 1-d int array, got {env_indices!r}"
            )
        for path, leaf in tree_items(observation):
            shape = np.shape(leaf)
            if tuple(shape[:2]) != (len(envs), self.n_agents):
                where = f" {path!r}" if path else ""
                raise ShapeError(
                    f"observation{where} has shape {tuple(shape)}; PolicyMapping "
                    f"expects [n_envs_stepped, n_agents, ...] = "
                    f"[{len(envs)}, {self.n_agents}, ...]"
                )
        return envs

    def _policy_rows(self, envs: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The policy handler's row indices (``env * A + agent``) of ``rows``."""
        return envs[rows // self.n_agents] * self.n_agents + rows % self.n_agents

    def _policy_keys(self, index: int, observation: Any, rows: np.ndarray) -> tuple:
        keys = self._info_keys[index]
        if keys is None:  # example_outputs was not called since it was set
            env, agent = divmod(int(rows[0]), self.n_agents)
            one = tree_map(lambda leaf: np.asarray(leaf)[env, agent], observation)
            example = self._policies[index].example_outputs(one)
            keys = self._remember_keys(index, example.agent_info)
        return keys

    def _gather_inputs(
        self, observation: Any, prev_action: Any, prev_reward: Any, rows: np.ndarray
    ) -> tuple[Any, Any, Any]:
        per_env = prev_reward is not None and all(
            np.ndim(leaf) == 1 for leaf in _leaves(prev_reward)
        )
        return (
            self._gather("observation", observation, rows),
            self._gather("prev_action", prev_action, rows),
            self._gather("prev_reward", prev_reward, rows, per_env=per_env),
        )

    def _gather(
        self, name: str, tree: Any, rows: np.ndarray, per_env: bool = False
    ) -> Any:
        """``tree``'s ``rows`` (of the flattened ``[n * A]``) in a reused buffer."""
        if tree is None:
            return None
        lead = 1 if per_env else 2
        name = f"{name}/env" if per_env else name
        view = self._slice(name, tree, len(rows), lead)
        source_rows = rows // self.n_agents if per_env else rows
        for source, target in zip(_leaves(tree), _leaves(view)):
            source = np.asarray(source)
            flat = source.reshape(-1, *source.shape[lead:])
            np.take(flat, source_rows, axis=0, out=target, mode="clip")
        return view

    def _buffer(self, name: str, like: Any, m: int, lead: int) -> Any:
        """A preallocated ``[n_rows, ...]`` tree for leaves like ``like``'s
        (more rows if ``m`` needs them: values asked for an env twice)."""
        signature = tuple(
            (path, np.shape(leaf)[lead:], np.asarray(leaf).dtype)
            for path, leaf in tree_items(like)
        )
        held = self._buffers.get(name)
        if held is None or held[0] != signature or held[2] < m:
            rows = max(self.n_rows, m)
            tree = tree_map(
                lambda leaf: np.zeros(
                    (rows, *np.shape(leaf)[lead:]), np.asarray(leaf).dtype
                ),
                like,
            )
            held = self._buffers[name] = (signature, tree, rows)
            stale = (name, "agent_info")
            self._slices = {k: v for k, v in self._slices.items() if k[0] not in stale}
        return held[1]

    def _slice(self, name: str, like: Any, m: int, lead: int = 2) -> Any:
        """The buffer's first ``m`` rows; the same objects for the same ``m``
        (a torch handler caches its zero-copy views by object)."""
        buffer = self._buffer(name, like, m, lead)
        view = self._slices.get((name, m))
        if view is None:
            view = self._slices[(name, m)] = tree_map(lambda leaf: leaf[:m], buffer)
        return view

    def _info_slices(self, out_agent_info: Any, keys: tuple[str, ...], m: int) -> dict:
        cache_key = ("agent_info", keys, m)
        views = self._slices.get(cache_key)
        if views is None:
            views = {
                key: self._slice(f"agent_info/{key}", out_agent_info[key], m)
                for key in keys
            }
            self._slices[cache_key] = views
        return views


def _info_mapping(agent_info: Any) -> Mapping[str, Any]:
    if agent_info is None:
        return {}
    if not isinstance(agent_info, Mapping):
        raise ConfigError(
            f"PolicyMapping needs each policy's agent_info to be a mapping, got "
            f"{type(agent_info).__name__}"
        )
    return agent_info


def _same_layout(expected: Any, got: Any, what: str) -> None:
    a = [(p, np.shape(v), np.asarray(v).dtype) for p, v in tree_items(expected)]
    b = [(p, np.shape(v), np.asarray(v).dtype) for p, v in tree_items(got)]
    if a != b:
        raise ConfigError(
            f"{what} does not match policy 0's: {b} (path, shape, dtype) vs {a}"
        )
