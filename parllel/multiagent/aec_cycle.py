"""A faster step for ParallelEnvs that PettingZoo converts from AEC envs.

:func:`aec_cycle_of` recognizes an ``aec_to_parallel`` conversion and
:func:`step_aec_cycle` runs its cycle of AEC steps directly: the same
``step`` calls through the wrappers and the same results as the
conversion's own ``step`` (tested on MPE and classic envs), without its
attribute reads through every wrapper and its dropped observations. See
docs/multiagent.md ("Adapters").
"""

from __future__ import annotations

from typing import Any

__all__ = ["aec_cycle_of", "step_aec_cycle"]

CONVERSION_CLASS = "aec_to_parallel_wrapper"
"""Class name of PettingZoo's AEC-to-parallel conversion (duck-typed: PettingZoo
is not imported here)."""


def aec_cycle_of(env: Any) -> Any:
    """The wrapped ``AECEnv`` if ``env`` is PettingZoo's ``aec_to_parallel``
    conversion with an unwrapped innermost env, else None."""
    if type(env).__name__ != CONVERSION_CLASS:
        return None
    aec_env = getattr(env, "aec_env", None)
    if aec_env is None or getattr(aec_env, "unwrapped", None) is None:
        return None
    return aec_env


def step_aec_cycle(
    env: Any, aec_env: Any, actions: dict[str, Any]
) -> tuple[dict, dict, dict, dict, dict]:
    """One parallel step of the conversion ``env`` over ``aec_env``, as its ``step``.

    Args:
        env: the ``aec_to_parallel`` conversion (its ``agents`` is updated).
        aec_env: ``aec_cycle_of(env)``.
        actions: one action per agent of ``env.agents``.

    Returns:
        ``(observations, rewards, terminations, truncations, infos)``.

    Raises:
        AssertionError: the AEC env does not step its agents in a cycle (as
            PettingZoo's conversion raises).
    """
    state = aec_env.unwrapped
    rewards: dict[str, Any] = {}
    for agent in state.agents:
        if agent != state.agent_selection:
            raise AssertionError(
                f"expected agent {agent} got agent {state.agent_selection}: the "
                f"parallel conversion of an AEC env expects agents to step in a "
                f"cycle and to leave only at its end"
            )
        aec_env.step(actions[agent])
        step_rewards = state.rewards
        for alive in state.agents:
            rewards[alive] = rewards.get(alive, 0) + step_rewards[alive]
    terminations = dict(state.terminations)
    truncations = dict(state.truncations)
    infos = dict(state.infos)
    observations = {agent: aec_env.observe(agent) for agent in state.agents}
    while state.agents and (
        state.terminations[state.agent_selection]
        or state.truncations[state.agent_selection]
    ):
        aec_env.step(None)
    env.agents = state.agents
    return observations, rewards, terminations, truncations, infos
