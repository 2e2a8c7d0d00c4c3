"""DQN with double-Q targets, a target network, Huber loss and replay weights."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F

from parllel.checkpoints.finite import check_finite_update
from parllel.errors import ConfigError
from parllel.replays.updates import Replay, UpdateCount
from parllel.torch.algos.gradients import clip_grad_norm
from parllel.torch.algos.off_policy import (
    hard_update,
    polyak_update,
    run_updates,
)
from parllel.torch.utils import check_device
from parllel.validation import (
    check_positive,
    check_target_update,
)

__all__ = ["DQN"]


class DQN:
    """Deep Q-learning over batches sampled from a replay.

    Double DQN, a target network copied every ``target_update_interval``
    updates (or polyak-averaged with ``tau``), the Huber loss weighted by the
    replay's importance weights, bootstrapping on truncation only; the update
    rule is written out in docs/off_policy.md ("DQN").

    Example:
        >>> agent = build_dqn_agent(obs_space, action_space)
        >>> optimizer = adam(agent.q_network.parameters(), learning_rate=1e-3)
        >>> dqn = DQN(agent, optimizer, target_update_interval=500)
        >>> metrics = dqn.optimize(replay)

    Args:
        agent: a :class:`~parllel.torch.agents.dqn_agent.DqnAgent`, or any
            object with a ``q_network``.
        optimizer: optimizer over every parameter of the Q-network.
        target_update_interval: updates between target copies (default 1000).
        tau: or polyak coefficient per update (exclusive with the interval).
        replay_ratio: gradient updates per env step (or ``updates_per_optimize``).

    Raises:
        ConfigError: bad hyperparameters, or an incomplete optimizer.
    """

    def __init__(
        self,
        agent: Any,
        optimizer: torch.optim.Optimizer,
        *,
        double_dqn: bool = True,
        target_update_interval: int | None = None,
        tau: float | None = None,
        huber_delta: float = 1.0,
        max_grad_norm: float | None = 10.0,
        updates_per_optimize: int | None = None,
        replay_ratio: float | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        network = getattr(agent, "q_network", None)
        if not isinstance(network, torch.nn.Module):
            raise ConfigError("agent.q_network must be a torch.nn.Module")
        target_update_interval = check_target_update(target_update_interval, tau)
        check_positive("huber_delta", huber_delta, allow_inf=True)
        if max_grad_norm is not None:
            check_positive("max_grad_norm", max_grad_norm, allow_inf=True)
        self.agent = agent
        self.q_network = network
        self.target_network = copy.deepcopy(network).requires_grad_(False)
        _check_optimizer(optimizer, network)
        self.optimizer = optimizer
        self.double_dqn = double_dqn
        self.target_update_interval = target_update_interval
        self.tau = tau
        self.huber_delta = float(huber_delta)
        self.max_grad_norm = max_grad_norm
        self.update_count = UpdateCount(updates_per_optimize, replay_ratio)
        parameter = next(network.parameters())
        self.device = check_device(device) if device is not None else parameter.device
        self.updates_done = 0

    @torch.no_grad()
    def target_values(self, batch: Any) -> torch.Tensor:
        """Targets ``y`` ``[batch]`` for a torch ``ReplayBatch``."""
        next_target_q = self.target_network(batch.next_observation)  # [batch, A]
        if self.double_dqn:
            next_action = self.q_network(batch.next_observation).argmax(-1)
            next_q = next_target_q.gather(-1, next_action.unsqueeze(-1)).squeeze(-1)
        else:
            next_q = next_target_q.max(-1).values
        not_terminated = (~batch.terminated).to(next_q.dtype)
        return batch.reward + batch.discount * not_terminated * next_q

    def update(self, batch: Any) -> tuple[dict[str, float], torch.Tensor]:
        """One gradient step on a torch ``ReplayBatch``.

        Returns:
            Metrics (``loss``, ``q``, ``target``, ``td_abs``, ``grad_norm``)
            and the new priorities ``|TD error|`` ``[batch]`` (detached).
        """
        target = self.target_values(batch)
        q_all = self.q_network(batch.observation)  # [batch, A]
        action = batch.action.long().reshape(q_all.shape[:-1])
        q = q_all.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        losses = F.huber_loss(q, target, reduction="none", delta=self.huber_delta)
        loss = (batch.weights * losses).mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = clip_grad_norm(
            list(self.q_network.parameters()),
            self.max_grad_norm if self.max_grad_norm is not None else math.inf,
        )
        check_finite_update("DQN", self.updates_done, loss=loss, grad_norm=grad_norm)
        self.optimizer.step()
        self.updates_done += 1
        interval = self.target_update_interval  # set when tau is None (__init__)
        if self.tau is not None:
            polyak_update(self.target_network, self.q_network, self.tau)
        elif interval is not None and self.updates_done % interval == 0:
            hard_update(self.target_network, self.q_network)
        td_abs = (q.detach() - target).abs()
        metrics = {
            "loss": float(loss.detach()),
            "q": float(q.detach().mean()),
            "target": float(target.mean()),
            "td_abs": float(td_abs.mean()),
            "grad_norm": float(grad_norm),
        }
        return metrics, td_abs

    def optimize(
        self, replay: Replay, new_steps: int | None = None
    ) -> dict[str, float]:
        """Run this call's updates (:func:`~parllel.torch.algos.off_policy.run_updates`).

        ``new_steps``: environment steps since the last call (needed with a
        ``replay_ratio``). A prioritized replay receives ``|TD error|`` of each
        sample after its update. Returns the metrics of :meth:`update`
        averaged over the updates, plus ``updates``.
        """
        return run_updates(
            replay, self.update_count(new_steps), self.device, self.update
        )

    def state_dict(self) -> dict[str, Any]:
        """Optimizer, target network and counters (not the agent)."""
        return {
            "optimizer": self.optimizer.state_dict(),
            "target_network": self.target_network.state_dict(),
            "updates_done": self.updates_done,
            "update_count": self.update_count.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.optimizer.load_state_dict(state["optimizer"])
        self.target_network.load_state_dict(state["target_network"])
        self.updates_done = int(state["updates_done"])
        self.update_count.load_state_dict(state["update_count"])


def _check_optimizer(optimizer: Any, network: torch.nn.Module) -> None:
    """Refuse anything but an optimizer holding every Q-network parameter."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ConfigError(
            f"optimizer must be a torch.optim.Optimizer; got {type(optimizer).__name__}"
        )
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    if any(id(p) not in held for p in network.parameters()):
        raise ConfigError(
            "the optimizer misses parameters of agent.q_network; build it over "
            "agent.q_network.parameters()"
        )
