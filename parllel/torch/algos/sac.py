"""Soft Actor-Critic: twin Q, polyak targets, automatic entropy tuning."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch

from parllel.checkpoints.finite import check_finite_update
from parllel.errors import ConfigError
from parllel.replays.updates import Replay, UpdateCount
from parllel.torch.algos.gradients import clip_grad_norm
from parllel.torch.algos.off_policy import (
    TargetAverager,
    run_updates,
)
from parllel.torch.algos.sac_setup import (
    EntropyCoefficient,
    build_sac_optimizer,
    check_alpha,
    check_sac_optimizer,
)
from parllel.torch.utils import check_device
from parllel.validation import check_count, check_fraction, check_positive

__all__ = ["SAC", "EntropyCoefficient", "build_sac_optimizer"]


class SAC:
    """Soft Actor-Critic over batches sampled from a replay.

    Twin Q with a polyak-averaged target, a squashed Gaussian actor and
    automatic entropy tuning; the losses, the one-backward-pass update,
    ``policy_delay`` and every option are described in docs/off_policy.md
    ("SAC").

    Example:
        >>> alpha = EntropyCoefficient(1.0)  # learned; a float fixes alpha
        >>> optimizer = build_sac_optimizer(agent, alpha, learning_rate=3e-4)
        >>> sac = SAC(agent, optimizer, alpha, replay_ratio=1.0)
        >>> metrics = sac.optimize(replay, new_steps=T * B)

    Raises:
        ConfigError: invalid hyperparameters, or an optimizer that misses
            parameters of the actor, the critic or a learned alpha.
    """

    def __init__(
        self,
        agent: Any,
        optimizer: torch.optim.Optimizer,
        alpha: EntropyCoefficient | float | None = None,
        *,
        target_entropy: float | None = None,
        tau: float = 0.005,
        updates_per_optimize: int | None = None,
        replay_ratio: float | None = None,
        max_grad_norm: float | None = None,
        policy_delay: int = 1,
        device: torch.device | str | None = None,
    ) -> None:
        for name in ("actor", "critic"):
            if not isinstance(getattr(agent, name, None), torch.nn.Module):
                raise ConfigError(f"agent.{name} must be a torch.nn.Module")
        check_fraction("tau", tau, allow_zero=False)
        if max_grad_norm is not None:
            check_positive("max_grad_norm", max_grad_norm, allow_inf=True)
        self.policy_delay = check_count("policy_delay", policy_delay)
        self.agent = agent
        self.update_count = UpdateCount(updates_per_optimize, replay_ratio)
        self.tau = float(tau)
        self.max_grad_norm = max_grad_norm
        parameter = next(agent.critic.parameters())
        self.device = check_device(device) if device is not None else parameter.device
        self.target_critic = copy.deepcopy(agent.critic).requires_grad_(False)
        self._average_target = TargetAverager(self.target_critic, agent.critic)
        self.target_entropy = (
            -float(agent.action_dim)
            if target_entropy is None
            else float(target_entropy)
        )
        self._actor_params = list(agent.actor.parameters())
        self._critic_params = list(agent.critic.parameters())
        alpha = check_alpha(alpha, parameter.device)
        check_sac_optimizer(optimizer, agent, alpha)
        self._optimizers = [optimizer]
        self.optimizer = optimizer
        self.entropy_coefficient = alpha
        self.log_alpha = alpha.log_alpha
        self.learn_alpha = alpha.learnable
        self.updates_done = 0
        self.last_td_error: torch.Tensor | None = None

    @property
    def alpha(self) -> float:
        """The current entropy coefficient."""
        return float(self.log_alpha.detach().exp())

    @torch.no_grad()
    def target_q(self, batch: Any) -> torch.Tensor:
        """Critic targets ``y`` ``[batch]`` for a torch ``ReplayBatch``."""
        next_action, next_log_prob = self.agent.sample_with_log_prob(
            batch.next_observation
        )
        q1, q2 = self.target_critic(batch.next_observation, next_action)
        soft_value = torch.minimum(q1, q2) - self.log_alpha.exp() * next_log_prob
        not_terminated = (~batch.terminated).to(soft_value.dtype)
        return batch.reward + batch.discount * not_terminated * soft_value

    def _frozen_critic_q(self, observation: Any, action: torch.Tensor) -> torch.Tensor:
        """``min(Q_1, Q_2)(s, action)`` with gradients to ``action`` only."""
        for p in self._critic_params:
            p.requires_grad_(False)
        try:
            return torch.minimum(*self.agent.critic(observation, action))
        finally:
            for p in self._critic_params:
                p.requires_grad_(True)

    def update(self, batch: Any) -> dict[str, float]:
        """One update of critic, actor and alpha on a torch ``ReplayBatch``.

        With ``policy_delay=1`` the three losses are built on the same batch
        and parameters (the actor's loss sees the critic before this step, its
        gradient does not reach the critic), summed, and back-propagated once;
        then the optimizer steps. With a delay the critic steps alone, and on
        every ``policy_delay``-th update the actor and alpha then take
        ``policy_delay`` steps. The target critic is polyak-averaged after
        every update.

        Returns:
            ``q1_loss``, ``q2_loss``, ``q1``, ``q2``, ``target_q`` (batch
            means) and ``alpha``; where the actor stepped, ``pi_loss``,
            ``alpha_loss`` and ``entropy`` (``-mean(log_pi)``); with
            ``max_grad_norm`` the clipped gradient norms. :attr:`last_td_error`
            keeps ``|TD error|`` ``[batch]`` (mean of both critics) for
            prioritized replay.
        """
        target = self.target_q(batch)  # [batch], no gradient
        q1, q2 = self.agent.critic(batch.observation, batch.action)  # [batch] each
        td1, td2 = q1 - target, q2 - target
        weights = batch.weights
        critic_losses = {
            "q1_loss": 0.5 * (weights * td1.square()).mean(),
            "q2_loss": 0.5 * (weights * td2.square()).mean(),
        }
        metrics: dict[str, float] = {}
        if self.policy_delay == 1:
            actor_losses, entropy = self._actor_losses(batch.observation)
            self._step({**critic_losses, **actor_losses}, metrics)
            metrics["entropy"] = entropy
        else:
            self._step(critic_losses, metrics, actor=False)
            if self.updates_done % self.policy_delay == 0:
                for _ in range(self.policy_delay):
                    actor_losses, entropy = self._actor_losses(batch.observation)
                    self._step(actor_losses, metrics, critic=False)
                metrics["entropy"] = entropy
        self._average_target(self.tau)
        self.updates_done += 1
        self.last_td_error = 0.5 * (td1.detach().abs() + td2.detach().abs())
        metrics.update(
            alpha=self.alpha,
            q1=float(q1.detach().mean()),
            q2=float(q2.detach().mean()),
            target_q=float(target.mean()),
        )
        return metrics

    def _actor_losses(self, observation: Any) -> tuple[dict[str, torch.Tensor], float]:
        """``pi_loss`` (and ``alpha_loss`` if alpha is learned), and the entropy."""
        action, log_prob = self.agent.sample_with_log_prob(observation)
        q_new = self._frozen_critic_q(observation, action)
        log_alpha = self.log_alpha
        losses = {"pi_loss": (log_alpha.detach().exp() * log_prob - q_new).mean()}
        log_prob_detached = log_prob.detach()
        if self.learn_alpha:
            losses["alpha_loss"] = -(
                log_alpha * (log_prob_detached + self.target_entropy)
            ).mean()
        return losses, -float(log_prob_detached.mean())

    def _step(
        self,
        losses: dict[str, torch.Tensor],
        metrics: dict[str, float],
        *,
        actor: bool = True,
        critic: bool = True,
    ) -> None:
        """Back-propagate the summed ``losses`` once and step the optimizer.

        Only parameters with gradients move (the others have none after
        ``zero_grad(set_to_none=True)``). The losses and the clipped gradient
        norms of the stepped parts go into ``metrics``.
        """
        for optimizer in self._optimizers:
            optimizer.zero_grad(set_to_none=True)
        sum(losses.values()).backward()  # type: ignore[union-attr]
        norms = {}
        if self.max_grad_norm is not None:
            for name, params, stepped in (
                ("critic_grad_norm", self._critic_params, critic),
                ("actor_grad_norm", self._actor_params, actor),
            ):
                if stepped:
                    norms[name] = clip_grad_norm(params, self.max_grad_norm)
        check_finite_update("SAC", self.updates_done, **losses, **norms)
        for optimizer in self._optimizers:
            optimizer.step()
        metrics.update({name: float(value) for name, value in norms.items()})
        metrics.update({name: value.item() for name, value in losses.items()})

    def optimize(
        self, replay: Replay, new_steps: int | None = None
    ) -> dict[str, float]:
        """Run this call's updates (:func:`~parllel.torch.algos.off_policy.run_updates`).

        ``new_steps``: environment steps since the last call (needed with a
        ``replay_ratio``). Prioritized replays get the mean absolute TD error
        of the two critics as new priorities. Returns the metrics of
        :meth:`update` averaged over the updates, plus ``updates``.
        """
        return run_updates(
            replay, self.update_count(new_steps), self.device, self._update_td
        )

    def _update_td(self, batch: Any) -> tuple[dict[str, float], torch.Tensor | None]:
        """:meth:`update`, and the TD errors it recorded (the new priorities)."""
        return self.update(batch), self.last_td_error

    def state_dict(self) -> dict[str, Any]:
        """Optimizers, target critic, ``log_alpha``, counters (not the agent)."""
        return {
            "optimizers": [o.state_dict() for o in self._optimizers],
            "target_critic": self.target_critic.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
            "updates_done": self.updates_done,
            "update_count": self.update_count.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`.

        Raises:
            ConfigError: the state has a different number of optimizers.
        """
        if len(state["optimizers"]) != len(self._optimizers):
            raise ConfigError(
                f"the SAC state has {len(state['optimizers'])} optimizers, this SAC "
                f"{len(self._optimizers)}"
            )
        for optimizer, saved in zip(self._optimizers, state["optimizers"]):
            optimizer.load_state_dict(saved)
        self.target_critic.load_state_dict(state["target_critic"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.updates_done = int(state["updates_done"])
        self.update_count.load_state_dict(state["update_count"])
