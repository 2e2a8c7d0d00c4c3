"""SamplerActor: one Ray actor holding a complete local parllel sampler.

The :class:`~parllel.distributed.RaySampler` makes it a Ray actor; this
module does not import ray at its top (only :meth:`SamplerActor.collect`
does, to fetch published weights it does not hold yet).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np
import torch

from parllel.cages import TrajInfo
from parllel.distributed.layout import batch_arrays
from parllel.errors import ConfigError
from parllel.samplers.background_process import load_sampler_state, sampler_state
from parllel.samplers.tree_ring import tree_layout
from parllel.torch.weights import agent_modules, module_tensors


class ActorInfo(NamedTuple):
    """What an actor reports once its sampler is built."""

    layout: Any  # the tree's layout (tree_layout)
    state: dict[str, Any]  # its transforms' state
    pid: int
    node_id: str | None
    incarnation: str  # new at every (re)start of the actor


class ActorBatch(NamedTuple):
    """One ``[T, B_i]`` batch an actor collected (the answer to one request)."""

    arrays: list[np.ndarray]  # every leaf with its padding, in flat order
    completed: list[TrajInfo]
    policy_version: int
    state: dict[str, Any]  # its transforms' state after the batch
    incarnation: str
    pid: int
    phase_times: dict[str, Any]  # the sampler's PhaseTimes.take() for this batch


def weights_of(modules: Mapping[str, torch.nn.Module]) -> dict[str, np.ndarray]:
    """The CPU state (parameters and buffers) of ``modules`` as numpy arrays,
    keyed like :func:`~parllel.torch.weights.module_tensors`."""
    return {
        name: tensor.detach().cpu().numpy()
        for name, tensor in module_tensors(modules).items()
    }


def load_weights(
    targets: Mapping[str, torch.Tensor], weights: Mapping[str, np.ndarray]
) -> None:
    """Copy published ``weights`` into the tensors ``targets`` (in place).

    Raises:
        ConfigError: the names or shapes differ.
    """
    if list(targets) != list(weights):
        missing = sorted(set(weights) - set(targets))
        extra = sorted(set(targets) - set(weights))
        raise ConfigError(
            f"the published weights do not match the actor's agent: it lacks "
            f"{missing} and has {extra} besides (pass modules= named as "
            "agent_modules(agent) names them, e.g. {'model': agent.model})"
        )
    with torch.no_grad():
        for name, target in targets.items():
            source = np.asarray(weights[name])  # read-only: in the object store
            if tuple(source.shape) != tuple(target.shape):
                raise ConfigError(
                    f"published weight {name!r} has shape {tuple(source.shape)}, "
                    f"the actor's {tuple(target.shape)}"
                )
            if target.device.type == "cpu":
                np.copyto(target.detach().numpy(), source)
            else:
                target.copy_(torch.tensor(source))


def _node_id() -> str | None:
    try:
        import ray

        return ray.get_runtime_context().get_node_id()
    except Exception:  # not in a Ray worker
        return None


class SamplerActor:
    """Builds a sampler with ``build_sampler(actor_index, *args)`` and collects
    whole batches with it on request.

    Args:
        build_sampler: returns a complete local sampler (cages, handler,
            tree, transforms) for actor ``actor_index``.
        actor_index: this actor's index.
        args: the builder's further arguments.
    """

    def __init__(
        self, build_sampler: Callable[..., Any], actor_index: int, args: tuple
    ) -> None:
        self.sampler = build_sampler(actor_index, *args)
        self.actor_index = actor_index
        self.incarnation = uuid.uuid4().hex
        self.policy_version = -1
        self.started = False
        self._targets: dict[str, torch.Tensor] | None = None

    def describe(self) -> ActorInfo:
        """The sampler's tree layout and state, this process and node."""
        return ActorInfo(
            tree_layout(self.sampler.sample_tree),
            sampler_state(self.sampler),
            os.getpid(),
            _node_id(),
            self.incarnation,
        )

    def _refresh(self, weights_box: list, version: int) -> None:
        if not weights_box or version <= self.policy_version:
            return
        import ray

        if self._targets is None:
            self._targets = module_tensors(agent_modules(self.sampler.handler.agent))
        load_weights(self._targets, ray.get(weights_box[0]))
        self.policy_version = version

    def collect(
        self, weights_box: list, version: int, state: dict[str, Any] | None
    ) -> ActorBatch:
        """Collect one batch.

        Args:
            weights_box: ``[ref]`` of the newest published weights (a list, so
                Ray does not fetch them unless this actor holds an older
                version), or ``[]`` if nothing is published.
            version: their version (0 without weights).
            state: transform state to load if this is the actor's first batch
                (a restarted actor continues from it), or None.
        """
        if not self.started:
            if state:
                load_sampler_state(self.sampler, state)
            self.started = True
        self._refresh(weights_box, version)
        if not weights_box:
            self.policy_version = version
        _, completed = self.sampler.collect_batch()
        return ActorBatch(
            batch_arrays(self.sampler.sample_tree),
            list(completed),
            self.policy_version,
            sampler_state(self.sampler),
            self.incarnation,
            os.getpid(),
            self.sampler.phase_times.take(),
        )

    def close(self) -> None:
        """Close the sampler's cages (their worker processes exit) and its tree."""
        for cage in self.sampler.cages:
            cage.close()
        self.sampler.sample_tree.close()
