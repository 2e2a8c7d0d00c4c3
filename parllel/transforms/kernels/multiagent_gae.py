"""Per-agent generalized advantage estimation over masked decisions, in numba.

Float arrays are ``[T, M]`` with ``M = B * A`` (column ``m = b * A + a``);
the env-level ``done`` is ``[T, B]`` (column ``m`` reads ``m // A``) and
``bootstrap_value`` ``[M]``. Walking backwards, each column carries the
reward pending since the agent's next decision, that decision's value and
its advantage (the lambda carry); the episode-end and waiting-agent rules
are in docs/multiagent.md ("Per-agent advantages"). Scalars are carried in
float64 whatever the storage dtype.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def multiagent_gae_kernel(
    agent_reward: np.ndarray,
    value: np.ndarray,
    agent_mask: np.ndarray,
    agent_terminated: np.ndarray,
    agent_truncated: np.ndarray,
    done: np.ndarray,
    bootstrap_value: np.ndarray,
    bootstrap_acting: np.ndarray,
    final_value: np.ndarray,
    gamma: float,
    gae_lambda: float,
    bootstrap_truncated: bool,
    n_agents: int,
    pending_reward: np.ndarray,
    next_value: np.ndarray,
    next_advantage: np.ndarray,
    advantage_out: np.ndarray,
    return_out: np.ndarray,
) -> None:
    """Write per-agent GAE advantages and returns in place (see docs/multiagent.md).

    Args:
        agent_reward: ``[T, M]`` rewards of each agent at each env step.
        value: ``[T, M]`` each agent's value of its observation at ``t``.
        agent_mask: ``[T, M]`` flags: the agent acted at ``t``.
        agent_terminated: ``[T, M]`` flags.
        agent_truncated: ``[T, M]`` flags.
        done: ``[T, M / A]`` env-level episode ends.
        bootstrap_value: ``[M]`` value of ``observation[T]``.
        bootstrap_acting: ``[M]`` flags: the agent is to act at
            ``observation[T]`` (else its last decision stays open).
        final_value: ``[T, M]`` value of the final observation where the env
            ended; read only if ``bootstrap_truncated``.
        gamma: discount per decision.
        gae_lambda: GAE lambda.
        bootstrap_truncated: truncations bootstrap (else they terminate).
        n_agents: ``A``.
        pending_reward: ``[M]`` float64 scratch.
        next_value: ``[M]`` float64 scratch.
        next_advantage: ``[M]`` float64 scratch.
        advantage_out: ``[T, M]`` output.
        return_out: ``[T, M]`` output.
    """
    n_steps, n_columns = agent_reward.shape
    gamma_lambda = gamma * gae_lambda
    left_open = np.empty(n_columns, np.bool_)
    for m in range(n_columns):
        pending_reward[m] = 0.0
        next_value[m] = bootstrap_value[m]
        next_advantage[m] = 0.0
        left_open[m] = not bootstrap_acting[m]
    for t in range(n_steps - 1, -1, -1):
        last = t == n_steps - 1
        for m in range(n_columns):
            env_done = done[t, m // n_agents]
            term = agent_terminated[t, m]
            trunc = agent_truncated[t, m] and not term
            if trunc and not bootstrap_truncated:
                term, trunc = True, False
            if term or trunc or env_done:
                left_open[m] = False
                pending_reward[m] = 0.0
                next_advantage[m] = 0.0
                if trunc:
                    if env_done:
                        next_value[m] = final_value[t, m]
                    elif last:
                        next_value[m] = bootstrap_value[m]
                    else:
                        next_value[m] = value[t + 1, m]
                else:
                    next_value[m] = 0.0
            pending_reward[m] += agent_reward[t, m]
            if agent_mask[t, m] and left_open[m]:
                v = value[t, m]
                advantage_out[t, m] = 0.0
                return_out[t, m] = v
                pending_reward[m] = 0.0
                next_value[m] = v
                next_advantage[m] = 0.0
                left_open[m] = False
            elif agent_mask[t, m]:
                v = value[t, m]
                advantage = (
                    pending_reward[m]
                    + gamma * next_value[m]
                    - v
                    + gamma_lambda * next_advantage[m]
                )
                advantage_out[t, m] = advantage
                return_out[t, m] = advantage + v
                pending_reward[m] = 0.0
                next_value[m] = v
                next_advantage[m] = advantage
            else:
                advantage_out[t, m] = 0.0
                return_out[t, m] = 0.0
