"""The policies the tool samples with: random actions, or a small torch MLP.

Random actions (a :class:`~parllel.agents.RandomAgent` in a
:class:`~parllel.agents.NumpyHandler`) measure the envs and the sampler
alone. The ``mlp`` policy is the examples' actor-critic
(:func:`~parllel.torch.models.build_actor_critic`: two hidden layers of 64,
or the Nature CNN for image observations) in a
:class:`~parllel.torch.handler.TorchHandler` on the CPU, torch on one thread
as in the examples: inference then takes its share of the main process, as in
training. torch is imported only for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from parllel.agents import Handler, NumpyHandler, RandomAgent
from parllel.cages import EnvSpaces
from parllel.errors import ConfigError, MissingDependencyError
from parllel.errors.base import install_hint

__all__ = ["POLICIES", "build_handler", "policy_threads", "require_policy"]

POLICIES = ("random", "mlp")


def _torch() -> Any:
    try:
        import torch
    except ImportError as error:
        raise MissingDependencyError(
            f"the 'mlp' policy needs the 'torch' package: {install_hint('torch')} "
            "(or use --policy random)"
        ) from error
    return torch


def require_policy(policy: str) -> None:
    """Check that ``policy`` is known and its packages are installed.

    Raises:
        ConfigError: an unknown policy.
        MissingDependencyError: ``mlp`` without torch (names the ``torch`` extra).
    """
    if policy not in POLICIES:
        raise ConfigError(f"unknown policy {policy!r}; choose from {list(POLICIES)}")
    if policy == "mlp":
        _torch()


def build_handler(policy: str, spaces: EnvSpaces, n_envs: int) -> Handler:
    """A handler for ``n_envs`` envs of these spaces running ``policy``.

    Raises:
        ConfigError: the MLP cannot be built for these spaces.
        MissingDependencyError: ``mlp`` without torch.
    """
    require_policy(policy)
    if policy == "random":
        return NumpyHandler(RandomAgent(spaces.action, seed=0), n_envs)
    torch = _torch()
    from parllel.torch.agents import ActorCriticAgent
    from parllel.torch.handler import TorchHandler
    from parllel.torch.models import build_actor_critic

    torch.manual_seed(0)
    try:
        model, distribution = build_actor_critic(spaces.observation, spaces.action)
    except Exception as exc:  # the builder's own errors name the space
        raise ConfigError(
            f"the 'mlp' policy cannot be built for {spaces.env_name}'s spaces "
            f"(observation {spaces.observation}, action {spaces.action}): {exc}; "
            "use --policy random"
        ) from exc
    return TorchHandler(ActorCriticAgent(model, distribution), n_envs)


@contextmanager
def policy_threads(policy: str) -> Iterator[None]:
    """Run torch on one thread while ``policy`` is ``mlp`` (restored afterwards)."""
    if policy != "mlp":
        yield
        return
    torch = _torch()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
