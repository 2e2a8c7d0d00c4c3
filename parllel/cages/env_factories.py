"""PerEnvFactories: a different env factory for each env of a cage."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from parllel.errors import ConfigError

__all__ = ["PerEnvFactories", "build_env"]


class PerEnvFactories:
    """One factory per env: env ``i`` (by global env index) is built by ``factories[i]``.

    Pass it wherever a cage takes an env factory, e.g. to record videos of
    env 0 only, or to give each env its own level. Every factory gets the
    cage's ``env_kwargs``; all must build envs with the same spaces. Calling
    the object itself builds env 0's kind (probes, e.g. layout measurement).

    Example:
        >>> factories = PerEnvFactories(
        ...     [lambda: RecordVideo(gym.make("CartPole-v1", render_mode="rgb_array"), "videos")]
        ...     + [lambda: gym.make("CartPole-v1")] * 7
        ... )
        >>> cage = SerialCage(factories, n_envs=8)
    """

    def __init__(self, factories: Sequence[Callable[..., Any]]) -> None:
        self.factories = list(factories)
        if not self.factories:
            raise ConfigError("PerEnvFactories needs at least one factory")
        for i, factory in enumerate(self.factories):
            if not callable(factory):
                raise ConfigError(f"factory {i} must be callable, got {factory!r}")

    def __len__(self) -> int:
        return len(self.factories)

    def __call__(self, **env_kwargs: Any) -> Any:
        """Build an env as env 0's factory does."""
        return self.factories[0](**env_kwargs)

    def build(self, env_index: int, env_kwargs: dict[str, Any]) -> Any:
        """Build env ``env_index`` with its own factory."""
        return self.factories[env_index](**env_kwargs)

    def check_covers(self, env_indices: range) -> None:
        """Raise ConfigError unless there is a factory for every index."""
        if env_indices and env_indices[-1] >= len(self.factories):
            raise ConfigError(
                f"{len(self.factories)} env factories for envs "
                f"{env_indices[0]}..{env_indices[-1]}: give one factory per env"
            )


def build_env(
    env_factory: Callable[..., Any], env_kwargs: dict[str, Any], env_index: int
) -> Any:
    """Env ``env_index`` from a factory (or from its own, with PerEnvFactories)."""
    if isinstance(env_factory, PerEnvFactories):
        return env_factory.build(env_index, env_kwargs)
    return env_factory(**env_kwargs)
