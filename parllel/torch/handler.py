"""TorchHandler: runs a torch agent on numpy sample-tree slots, zero-copy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from parllel import fields
from parllel.agents.base import Agent, AgentExample
from parllel.agents.numpy_handler import batch_of_one, zero_batch_of_one
from parllel.agents.state import ALL, AgentHandler, EnvStates, as_index
from parllel.errors import ConfigError, DtypeError
from parllel.seeding import check_seed
from parllel.torch.transfer import Transfer
from parllel.torch.utils import check_device, numpy_to_torch_tree, tree_to_device
from parllel.torch.weights import SharedWeights, agent_modules, module_tensors
from parllel.tree import tree_items, tree_map

MAX_CACHED_VIEWS = 4096


def _to_numpy(tree: Any) -> Any:
    return tree_map(lambda leaf: leaf.detach().cpu().numpy(), tree)


def _give_generator(agent: Any, device: torch.device, seed: int) -> None:
    """Give ``agent`` a ``torch.Generator`` on ``device`` seeded with ``seed``."""
    if not hasattr(agent, "generator"):
        raise ConfigError(
            f"TorchHandler(seed=...) gives the agent a generator to sample "
            f"actions from, but {type(agent).__name__} has no "
            "`generator` attribute: add one that its step() samples from "
            "(as ActorCriticAgent does: distribution.sample(params, "
            "self.generator)), or leave seed=None"
        )
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    setattr(agent, "generator", generator)  # noqa: B010 - any agent type


def _dtype_error(exc: RuntimeError, observation: Any) -> DtypeError:
    """The error for a model that fails on the observations' dtype."""
    dtypes = sorted(
        {str(np.asarray(leaf).dtype) for _, leaf in tree_items(observation)}
    )
    return DtypeError(
        f"the agent's model failed on the env's observations ({', '.join(dtypes)}): "
        f"{exc}. parllel's encoders (build_encoder, FlattenEncoder, CnnEncoder, "
        "OneHotEncoder) cast observations to the model's dtype; a model that reads "
        "them without one must cast them itself, e.g. with "
        "parllel.torch.models.to_model_dtype(observation, weight)"
    )


class TorchHandler(AgentHandler):
    """:class:`~parllel.agents.Handler` for a torch :class:`~parllel.agents.Agent`.

    Wraps the sampler's numpy views with ``torch.from_numpy`` (zero-copy,
    cached), moves them to the agent's device, calls the agent under
    ``torch.no_grad()`` and copies actions and agent info back; keeps the
    per-env recurrent state on the device. Close it before the sample tree (it
    unregisters page-locked memory). See docs/samplers.md and docs/gpu.md.

    Args:
        device: where the agent runs (default: ``agent.device``, else CPU).
        seed: seed of the agent's action generator (``seeds.actions``), so the
            actions depend on it alone; None: the agent keeps its own.
        pin_memory: page-lock the sample tree's buffers for asynchronous copies
            (default: on CUDA; CUDA only).

    Raises:
        ConfigError: ``seed`` for an agent without ``generator``, or a seed that
            is not a non-negative int.

    Example:
        >>> agent = ActorCriticAgent(*build_actor_critic(obs_space, action_space))
        >>> handler = TorchHandler(agent, n_envs=8, seed=seeds.actions)
        >>> example = handler.example_outputs(cage.example[fields.OBSERVATION])
    """

    def __init__(
        self,
        agent: Agent,
        n_envs: int,
        device: Any = None,
        *,
        seed: int | None = None,
        pin_memory: bool | None = None,
        transfer: Transfer | None = None,
    ) -> None:
        self.device = check_device(device or getattr(agent, "device", "cpu"))
        if pin_memory and transfer is None and self.device.type != "cuda":
            raise ConfigError(
                f"TorchHandler(pin_memory=True) page-locks the sample tree for "
                f"copies to a CUDA device, but the handler's device is "
                f"{str(self.device)!r}, which reads the tree in place: leave "
                "pin_memory out (None: on for CUDA, off otherwise)"
            )
        self.transfer = transfer or Transfer(self.device, pin_memory=pin_memory)
        if seed is not None:
            _give_generator(agent, self.device, check_seed("seed", seed))
        with torch.no_grad():
            state = tree_to_device(agent.initial_state(int(n_envs)), self.device)
            one = tree_to_device(agent.initial_state(1), self.device)
        super().__init__(agent, n_envs, EnvStates(state, one))
        # id -> [numpy view, torch view, page lock (held from its second use)]
        self._views: dict[int, list[Any]] = {}
        # weights shared with other processes: (weights, this agent's tensors)
        self._shared: tuple[SharedWeights, dict[str, torch.Tensor]] | None = None
        self._role = ""  # "share_weights" (publisher) or "follow_weights"
        self._policy_version: int | None = None
        self._refresh_every_step = False

    @property
    def generator(self) -> torch.Generator | None:
        """The generator the agent samples actions from (None: torch's global
        RNG); its state is checkpointed with the run's RNG states."""
        generator = getattr(self.agent, "generator", None)
        return generator if isinstance(generator, torch.Generator) else None

    # -- numpy to torch ------------------------------------------------------
    def _view(self, tree: Any) -> Any:
        """Cached zero-copy torch view of a numpy view (or tree) that the caller reuses.

        A view is page-locked the second time it is seen: views the sampler
        reuses every step are locked, arrays passed fresh once are not (their
        copies are staged by the driver); evicted views release their lock.
        """
        self.transfer.check_open()
        if tree is None:
            return None
        hit = self._views.get(id(tree))
        if hit is None or hit[0] is not tree:
            if len(self._views) >= MAX_CACHED_VIEWS:
                self._forget_views()
            self._views[id(tree)] = hit = [tree, numpy_to_torch_tree(tree), None]
        elif hit[2] is None and self.transfer.pin_memory:
            hit[2] = self.transfer.pin(tree)
        return hit[1]

    def _forget_views(self) -> None:
        """Drop the cached views and release their page locks."""
        views, self._views = self._views, {}
        for _, _, hold in views.values():
            if hold is not None:
                hold.release()

    def _input(self, tree: Any, cached: bool = True) -> Any:
        if tree is None:
            return None
        if cached:
            return self.transfer.to_device(self._view(tree))
        return tree_to_device(numpy_to_torch_tree(tree), self.device)

    def _index(self, env_indices: Any) -> Any:
        index = as_index(env_indices)
        if isinstance(index, np.ndarray):
            return torch.from_numpy(index).to(self.device)
        return index

    # -- the Handler protocol --------------------------------------------------
    def example_outputs(
        self, observation: Any, action: Any = None, reward: Any = None
    ) -> AgentExample:
        """One env's action, agent info and state (numpy) for ``observation``."""
        try:
            with torch.no_grad():
                step = self.agent.step(
                    self._input(batch_of_one(observation), cached=False),
                    self._input(zero_batch_of_one(action), cached=False),
                    self._input(zero_batch_of_one(reward), cached=False),
                    tree_to_device(self.agent.initial_state(1), self.device),
                )
        except RuntimeError as exc:
            if "dtype" not in str(exc):
                raise
            raise _dtype_error(exc, observation) from exc
        first = tree_map(lambda leaf: leaf[0], _to_numpy(step[:2]))
        state = None if step.state is None else _to_numpy(step.state[0])
        agent_info = first[1]
        if self._role == "follow_weights" and isinstance(agent_info, Mapping):
            # a follower records, per step, the weights version that acted
            mapping_type: Any = type(agent_info)
            agent_info = mapping_type(
                {**agent_info, fields.POLICY_VERSION: np.int64(0)}
            )
        return AgentExample(first[0], agent_info, state)

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
        """Run the agent for ``env_indices`` and copy its outputs into the slots."""
        index = self._index(env_indices)
        if self._refresh_every_step:
            self._load_newer_weights()
        with torch.no_grad():
            step = self.agent.step(
                self._input(observation),
                self._input(prev_action),
                self._input(prev_reward),
                self._states.gather(index),
            )
            self.transfer.to_host(self._view(out_action), step.action)
            if len(out_agent_info):
                out_info = self._view(out_agent_info)
                if fields.POLICY_VERSION in out_info:
                    out_info[fields.POLICY_VERSION].fill_(self._policy_version or 0)
                    out_info = {
                        k: v for k, v in out_info.items() if k != fields.POLICY_VERSION
                    }
                self.transfer.to_host(out_info, step.agent_info)
            self._states.scatter(index, step.state)
            self.transfer.wait()  # before anyone reads the output slots

    def value(
        self,
        observation: Any,
        prev_action: Any,
        prev_reward: Any,
        env_indices: Any = ALL,
    ) -> np.ndarray:
        """Values (numpy) of ``observation`` with the current state of ``env_indices``."""
        with torch.no_grad():
            value = self.agent.value(
                self._input(observation, cached=False),
                self._input(prev_action, cached=False),
                self._input(prev_reward, cached=False),
                self._states.gather(self._index(env_indices)),
            )
        return value.detach().cpu().numpy()

    def reset(self, env_indices: Any = None) -> None:
        """Reset the state of ``env_indices`` (all envs if None)."""
        with torch.no_grad():
            self._states.reset(self._index(env_indices))

    def reset_one(self, env_index: int) -> None:
        """Reset the state of one env."""
        self.reset(slice(int(env_index), int(env_index) + 1))

    def write_state(self, out: Any) -> None:
        """Copy the current state ``[n_envs, ...]`` into ``out`` (e.g. INITIAL_STATE)."""
        if self._states.empty:
            return
        targets = [leaf for _, leaf in tree_items(numpy_to_torch_tree(out))]
        states = [leaf for _, leaf in tree_items(self._states.state)]
        with torch.no_grad():
            for target, state in zip(targets, states):
                target.copy_(state)

    def close(self) -> None:
        """Release the page-locked sample-tree memory (idempotent; unregistered
        when no other handler holds it) and refuse further steps; call it
        before closing the sample tree."""
        self._forget_views()
        self.transfer.close()

    # -- weights shared across processes ---------------------------------------
    def _link(
        self, weights: SharedWeights | None, modules: Any, start_method: str | None
    ) -> SharedWeights:
        self._role = "share_weights" if weights is None else "follow_weights"
        tensors = module_tensors(modules or agent_modules(self.agent))
        if weights is None:
            weights = SharedWeights(tensors, start_method)
        self._shared = (weights, tensors)
        return weights

    def share_weights(
        self, modules: Any = None, start_method: str | None = None
    ) -> SharedWeights:
        """Learner side: put the agent's weights in shared memory as version 0.

        Pass the returned :class:`~parllel.torch.weights.SharedWeights` to the
        sampling process (e.g. to a background sampler's builder) and call
        :meth:`publish_weights` after every update; close it at the end.

        Args:
            modules: ``{name: nn.Module}`` to share (default:
                :func:`~parllel.torch.weights.agent_modules` of the agent).
            start_method: start method of the processes that will read them.
        """
        weights = self._link(None, modules, start_method)
        self._policy_version = 0
        return weights

    def publish_weights(self) -> int:
        """Learner side: publish the agent's current weights; return the new version."""
        weights, tensors = self._linked("publish_weights", "share_weights")
        self._policy_version = weights.publish(tensors)
        return self._policy_version

    def follow_weights(
        self, weights: SharedWeights, modules: Any = None, *, every: str = "batch"
    ) -> int:
        """Sampler side: load the newest published weights now and follow them;
        return that version.

        From now on :meth:`example_outputs` adds ``agent_info.policy_version``
        (build the sample tree after this call), and every step records there
        the version that chose the action.

        Args:
            weights: the learner's :class:`~parllel.torch.weights.SharedWeights`.
            modules: ``{name: nn.Module}`` matching the learner's (default: the
                agent's modules).
            every: ``"batch"``: newer weights are loaded only by
                :meth:`refresh_weights` (a background sampler calls it before
                each batch); ``"step"``: also before every step, as soon as
                they are published (a version check per step; the lag bound
                still holds, since versions only grow).
        """
        if every not in ("batch", "step"):
            raise ConfigError(f"every must be 'batch' or 'step', got {every!r}")
        self._link(weights, modules, None)
        self._policy_version = None
        self._refresh_every_step = every == "step"
        return self.refresh_weights()

    def _load_newer_weights(self) -> None:
        weights, tensors = self._linked("refresh_weights", "follow_weights")
        held = -1 if self._policy_version is None else self._policy_version
        if weights.version > held:
            self._policy_version = weights.read_into(tensors, newer_than=held)

    def refresh_weights(self, min_version: int = 0, check_alive: Any = None) -> int:
        """Sampler side: wait until ``min_version`` is published, load the
        newest version if it is newer than the agent's; return the agent's version.

        ``check_alive()`` runs every 0.1 s while waiting and may raise.
        """
        weights, tensors = self._linked("refresh_weights", "follow_weights")
        weights.wait_for_version(min_version, check_alive)
        held = -1 if self._policy_version is None else self._policy_version
        self._policy_version = weights.read_into(tensors, newer_than=held)
        return self._policy_version

    @property
    def policy_version(self) -> int | None:
        """Version of the weights the agent holds (None: not shared or followed)."""
        return self._policy_version

    def _linked(
        self, call: str, setup: str
    ) -> tuple[SharedWeights, dict[str, torch.Tensor]]:
        if self._shared is None or self._role != setup:
            raise ConfigError(f"{call}() needs {setup}() first")
        return self._shared
