"""The PPO training sampler of train_cartpole.py and train_mujoco.py: in the
learner's process, or in a background process (asynchronous sampling)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from parllel.samplers import BackgroundSampler
from parllel.torch import TorchHandler


@contextmanager
def training_sampler(
    build: Callable[..., Any],
    args: tuple,
    agent: Any,
    n_envs: int,
    max_lag: int | None,
) -> Iterator[tuple[Any, TorchHandler | None]]:
    """``(sampler, publisher)`` for an on-policy runner, closed afterwards.

    Without ``max_lag``: ``build(*args, agent=agent)`` (its cage and sample
    tree closed afterwards) and no publisher. With it: a
    ``BackgroundSampler`` whose process runs ``build(*args, None, weights)``
    with that lag bound, following the weights the returned publisher
    shares from ``agent`` (the process and the shared weights closed
    afterwards).
    """
    if max_lag is None:
        sampler = build(*args, agent=agent)
        try:
            yield sampler, None
        finally:
            sampler.cages[0].close()
            sampler.sample_tree.close()
        return
    publisher = TorchHandler(agent, n_envs=n_envs)
    weights = publisher.share_weights()
    sampler = BackgroundSampler(build, *args, None, weights, max_lag=max_lag)
    try:
        yield sampler, publisher
    finally:
        sampler.close()
        weights.close()
