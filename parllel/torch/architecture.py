"""The record of how an agent was built, so an exported policy can be rebuilt.

Model weights alone do not say which modules to build. The builders of
parllel (:func:`~parllel.torch.models.build_actor_critic`,
:func:`~parllel.torch.agents.build_sac_agent`,
:func:`~parllel.torch.agents.build_dqn_agent`) attach an
:class:`Architecture` to what they return: the name of a registered agent
builder (see :func:`parllel.torch.export.register_agent_builder`), the two
spaces, and the keyword arguments they were called with.
:func:`parllel.torch.export_policy` stores it next to the weights, and
:func:`parllel.torch.load_policy` calls the same builder again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

__all__ = ["ARCHITECTURE_ATTRIBUTE", "Architecture", "architecture_of"]

ARCHITECTURE_ATTRIBUTE = "architecture"
"""the attribute of a model or agent holding its :class:`Architecture`"""


@dataclasses.dataclass(frozen=True)
class Architecture:
    """How an agent was built: builder name, spaces and keyword arguments.

    Example:
        >>> model, distribution = build_actor_critic(obs_space, action_space)
        >>> model.architecture.builder, model.architecture.kwargs["hidden_sizes"]
        ('actor_critic', (64, 64))

    Attributes:
        builder: the name the agent builder is registered under
            (``"actor_critic"``, ``"sac"``, ``"dqn"``, or a user's).
        observation_space: the observation space the agent was built for.
        action_space: the action space the agent was built for.
        kwargs: the builder's other keyword arguments.
    """

    builder: str
    observation_space: Any
    action_space: Any
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def attach(self, target: Any) -> Any:
        """Set ``target.architecture`` to this record; return ``target``."""
        setattr(target, ARCHITECTURE_ATTRIBUTE, self)
        return target


def architecture_of(agent: Any) -> Architecture | None:
    """The :class:`Architecture` of an agent (or of its ``model``), if recorded."""
    for candidate in (agent, getattr(agent, "model", None)):
        found = getattr(candidate, ARCHITECTURE_ATTRIBUTE, None)
        if isinstance(found, Architecture):
            return found
    return None
