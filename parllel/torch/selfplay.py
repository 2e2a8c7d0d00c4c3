"""Self-play with torch agents: learner snapshots and frozen opponent handlers.

Self-play lives in :mod:`parllel.multiagent.selfplay`; these helpers stay in
the torch backend because they copy torch modules, and the core does not
import torch (docs/multiagent.md "Self-play").

A snapshot is a CPU copy of the state dicts of the agent's modules (see
:func:`~parllel.torch.weights.agent_modules`), the opaque object an
:class:`~parllel.multiagent.OpponentPool` stores and checkpoints. An
opponent is a deep copy of the learner's agent with a snapshot loaded, in
``"sample"`` mode, without gradients, run by its own
:class:`~parllel.torch.handler.TorchHandler`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import torch

from parllel.errors import ConfigError
from parllel.torch.handler import TorchHandler
from parllel.torch.weights import agent_modules


def snapshot_state(agent: Any) -> dict[str, dict[str, torch.Tensor]]:
    """A frozen CPU copy of the agent's weights: ``{module name: state dict}``.

    Example:
        >>> pool.add(snapshot_state(agent), step=runner.env_steps)
    """
    return {
        name: {
            key: tensor.detach().to("cpu", copy=True)
            for key, tensor in module.state_dict().items()
        }
        for name, module in agent_modules(agent).items()
    }


def load_snapshot(agent: Any, snapshot: dict[str, dict[str, torch.Tensor]]) -> None:
    """Load a :func:`snapshot_state` into the agent's modules (same architecture).

    Raises:
        ConfigError: ``snapshot`` is not a snapshot (e.g. a fixed opponent
            of the pool reached a factory of snapshots), or its modules are
            not the agent's.
    """
    modules = agent_modules(agent)
    if not isinstance(snapshot, Mapping) or not all(
        isinstance(state, Mapping) for state in snapshot.values()
    ):
        raise ConfigError(
            f"expected a learner snapshot (snapshot_state(agent): a dict of module "
            f"state dicts), got {snapshot!r:.80}: a fixed opponent of the pool "
            f"(OpponentPool.add_fixed) reaches the opponent factory like a "
            f"snapshot, so a pool with fixed opponents needs a factory that builds "
            f"them and passes only snapshots on to opponent_factory/frozen_opponent"
        )
    if set(modules) != set(snapshot):
        raise ConfigError(
            f"the snapshot holds modules {sorted(snapshot)}, the agent has "
            f"{sorted(modules)}"
        )
    for name, module in modules.items():
        module.load_state_dict(snapshot[name])


def frozen_opponent(
    learner_agent: Any, snapshot: dict[str, dict[str, torch.Tensor]]
) -> Any:
    """A deep copy of ``learner_agent`` holding ``snapshot`` (on the learner's
    device): no gradients, ``"sample"`` mode.

    If the learner samples from a generator of its own (``agent.generator``),
    the opponent gets a fresh one seeded by a draw from it: a copy would
    repeat the learner's draws.
    """
    agent = copy.deepcopy(learner_agent)
    generator = getattr(learner_agent, "generator", None)
    if isinstance(generator, torch.Generator):
        device = generator.device
        seed = torch.randint(0, 2**62, (1,), generator=generator, device=device)
        agent.generator = torch.Generator(device).manual_seed(int(seed.item()))
    load_snapshot(agent, snapshot)
    for module in agent_modules(agent).values():
        module.requires_grad_(False)
    agent.set_mode("sample")
    return agent


def opponent_factory(learner_agent: Any) -> Callable[[Any, int], TorchHandler]:
    """The ``opponent_factory`` of a :class:`~parllel.multiagent.SelfPlay`
    for a torch learner: ``factory(snapshot, n_rows)`` builds a
    :class:`~parllel.torch.handler.TorchHandler` of :func:`frozen_opponent`.

    Example:
        >>> selfplay = SelfPlay(TorchHandler(agent, n_envs=B * 2), opponent_factory(agent),
        ...                     OpponentPool(20, seed=0), n_envs=B, n_agents=2,
        ...                     snapshot_learner=lambda: snapshot_state(agent))
    """

    def build(snapshot: Any, n_rows: int) -> TorchHandler:
        return TorchHandler(frozen_opponent(learner_agent, snapshot), n_envs=n_rows)

    return build
