"""SAC's policy delay (CleanRL's policy_frequency) and its warm-up actions."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from parllel.errors import ConfigError
from parllel.replays.transitions import ReplayBatch
from parllel.torch.agents.sac_agent import build_sac_agent
from parllel.torch.algos.sac import SAC, EntropyCoefficient, build_sac_optimizer

OBS = gym.spaces.Box(-1, 1, (3,), np.float32)
ACTION = gym.spaces.Box(
    np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32)
)


def _agent():
    torch.manual_seed(0)
    return build_sac_agent(OBS, ACTION, hidden_sizes=(8,))


def _sac(agent, **kwargs) -> SAC:
    alpha = EntropyCoefficient(1.0)
    return SAC(agent, build_sac_optimizer(agent, alpha, 1e-2), alpha, **kwargs)


def _batch(n: int = 16) -> ReplayBatch:
    rng = torch.Generator().manual_seed(1)
    return ReplayBatch(
        observation=torch.rand(n, 3, generator=rng),
        action=torch.rand(n, 2, generator=rng),
        reward=torch.rand(n, generator=rng),
        next_observation=torch.rand(n, 3, generator=rng),
        terminated=torch.zeros(n, dtype=torch.bool),
        truncated=torch.zeros(n, dtype=torch.bool),
        discount=torch.full((n,), 0.99),
        n_steps=torch.ones(n, dtype=torch.int64),
        indices=torch.arange(n),
        weights=torch.ones(n),
    )


def _params(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def _moved(before: list[torch.Tensor], module: torch.nn.Module) -> bool:
    return any(not torch.equal(b, p) for b, p in zip(before, module.parameters()))


def test_delayed_actor_steps_every_dth_update_d_times():
    agent = _agent()
    sac = _sac(agent, policy_delay=2)
    actor_moved, critic_moved, actor_steps = [], [], []
    for _ in range(4):
        actor, critic = _params(agent.actor), _params(agent.critic)
        exp_avg = sac.optimizer.state.get(next(agent.actor.parameters()), {})
        before_steps = float(exp_avg["step"]) if "step" in exp_avg else 0.0
        metrics = sac.update(_batch())
        actor_moved.append(_moved(actor, agent.actor))
        critic_moved.append(_moved(critic, agent.critic))
        state = sac.optimizer.state[next(agent.actor.parameters())]
        actor_steps.append(float(state["step"]) - before_steps)
        assert ("pi_loss" in metrics) == actor_moved[-1]
    assert critic_moved == [True] * 4
    assert actor_moved == [True, False, True, False]
    assert actor_steps == [2.0, 0.0, 2.0, 0.0]  # as many actor steps, delayed


def test_delayed_metrics_average_over_the_updates_that_report_them():
    agent = _agent()
    sac = _sac(agent, policy_delay=3, updates_per_optimize=3)

    class Replay:
        def sample(self):
            return _batch()

    metrics = sac.optimize(Replay())
    assert metrics["updates"] == 3.0
    assert {"pi_loss", "alpha_loss", "entropy", "q1_loss"} <= set(metrics)


def test_no_delay_is_one_backward_pass_on_the_parameters_before_the_step():
    """policy_delay=1 equals the joint loss stepped once (the fused update)."""
    agent = _agent()
    reference = copy.deepcopy(agent)
    sac = _sac(agent)
    torch.manual_seed(5)
    sac.update(_batch())
    ref_sac = _sac(reference)
    torch.manual_seed(5)
    batch = _batch()
    target = ref_sac.target_q(batch)
    q1, q2 = reference.critic(batch.observation, batch.action)
    action, log_prob = reference.sample_with_log_prob(batch.observation)
    for p in reference.critic.parameters():
        p.requires_grad_(False)
    q_new = torch.minimum(*reference.critic(batch.observation, action))
    for p in reference.critic.parameters():
        p.requires_grad_(True)
    loss = (
        0.5 * (q1 - target).square().mean()
        + 0.5 * (q2 - target).square().mean()
        + (ref_sac.log_alpha.detach().exp() * log_prob - q_new).mean()
        - (ref_sac.log_alpha * (log_prob.detach() + ref_sac.target_entropy)).mean()
    )
    ref_sac.optimizer.zero_grad()
    loss.backward()
    ref_sac.optimizer.step()
    for mine, theirs in zip(agent.actor.parameters(), reference.actor.parameters()):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-7)
    for mine, theirs in zip(agent.critic.parameters(), reference.critic.parameters()):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-7)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_policy_delay_is_a_config_error(bad):
    with pytest.raises(ConfigError, match="policy_delay"):
        _sac(_agent(), policy_delay=bad)


def test_warmup_actions_are_uniform_in_bounds_without_running_the_actor():
    agent = _agent()
    agent.random_actions = True

    def refuse(*args, **kwargs):
        raise AssertionError("the actor ran during warm-up")

    agent.actor.forward = refuse
    agent.generator = torch.Generator().manual_seed(7)
    step = agent.step(torch.zeros(1000, 3), None, None, None)
    action = step.action
    assert action.shape == (1000, 2) and action.dtype == torch.float32
    low, high = torch.tensor(ACTION.low), torch.tensor(ACTION.high)
    assert bool(((action >= low) & (action <= high)).all())
    uniform = torch.rand((1000, 2), generator=torch.Generator().manual_seed(7))
    expected = (high + low) / 2 + (high - low) / 2 * (uniform * 2 - 1)
    torch.testing.assert_close(action, expected, rtol=0, atol=0)
