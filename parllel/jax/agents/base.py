"""What a JAX agent provides: parameters and pure, jittable policy functions."""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax

__all__ = ["JaxAgent", "PolicyEvaluation"]


class PolicyEvaluation(NamedTuple):
    """What PPO needs of the current policy at the batch's samples, each ``[N]``."""

    log_prob: Any
    entropy: Any
    value: Any


@runtime_checkable
class JaxAgent(Protocol):
    """A JAX agent: a parameter pytree and pure functions of it.

    The functions take the parameters as an argument (never ``self.params``)
    so :class:`~parllel.jax.JaxHandler` and the algorithms can ``jax.jit``
    them once and call them with new parameters after every update. The
    algorithm that trains the agent writes ``agent.params``; the handlers
    read it at every step.

    Attributes:
        params: the parameter pytree the policy acts with.
    """

    params: Any

    def policy_step(
        self, params: Any, observation: Any, key: jax.Array, deterministic: bool
    ) -> tuple[Any, dict[str, Any]]:
        """Actions ``[N, ...]`` and ``agent_info`` (``{name: [N, ...]}``);
        ``deterministic`` (static under jit) picks the distribution's mode."""
        ...

    def set_mode(self, mode: str) -> None:
        """Switch to ``"train"``, ``"sample"`` or ``"eval"``."""
        ...

    def initial_state(self, n_envs: int) -> Any:
        """None: JAX agents are feed-forward."""
        ...
