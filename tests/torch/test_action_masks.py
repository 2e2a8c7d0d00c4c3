"""Action masks: Categorical.masked, ActorCriticAgent and PPO's evaluator."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parllel import fields
from parllel.errors import ConfigError, ShapeError
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.algos import ActorCriticEvaluator
from parllel.torch.distributions import Categorical, Gaussian
from parllel.torch.distributions.base import DistParams
from parllel.torch.models import build_actor_critic

SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@st.composite
def logits_and_masks(draw):
    n_rows = draw(st.integers(1, 6))
    n_actions = draw(st.integers(1, 6))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = draw(st.sampled_from([0.1, 3.0, 30.0]))
    logits = torch.from_numpy(rng.normal(size=(n_rows, n_actions)) * scale).float()
    mask = rng.random((n_rows, n_actions)) < draw(st.sampled_from([0.2, 0.5, 0.8]))
    mask_dtype = draw(st.sampled_from([np.int8, np.bool_]))
    return logits, torch.from_numpy(mask.astype(mask_dtype))


@SETTINGS
@given(logits_and_masks(), st.integers(0, 1000))
def test_masked_categorical_never_picks_an_illegal_action(data, seed):
    logits, mask = data
    dist = Categorical(logits.shape[-1])
    legal = mask != 0
    has_legal = legal.any(-1)
    allowed = legal | ~has_legal[:, None]  # rows without a legal action: anything
    params = dist.masked(DistParams(logits), mask)
    torch.manual_seed(seed)
    samples = torch.stack([dist.sample(params) for _ in range(200)])  # [200, N]
    assert allowed.gather(-1, samples.T).all()
    greedy = dist.deterministic(params)
    assert allowed.gather(-1, greedy[:, None]).all()
    # the greedy choice is the best legal logit
    best = torch.where(allowed, logits, torch.tensor(-torch.inf)).max(-1).values
    assert torch.equal(logits.gather(-1, greedy[:, None])[:, 0], best)


@SETTINGS
@given(logits_and_masks())
def test_masked_categorical_is_the_distribution_over_legal_actions(data):
    logits, mask = data
    logits = logits.double().requires_grad_(True)
    dist = Categorical(logits.shape[-1])
    legal = mask != 0
    allowed = legal | ~legal.any(-1, keepdim=True)
    params = dist.masked(DistParams(logits), mask)
    # reference: softmax over the allowed actions only
    ref_log_probs = torch.log_softmax(
        torch.where(allowed, logits, torch.tensor(-torch.inf, dtype=logits.dtype)), -1
    )
    ref_probs = ref_log_probs.exp()
    for action in range(logits.shape[-1]):
        x = torch.full((logits.shape[0],), action)
        log_prob = dist.log_likelihood(x, params)
        rows = allowed[:, action]
        torch.testing.assert_close(log_prob[rows], ref_log_probs[rows, action])
        # an illegal action's log-prob is hugely negative but finite
        assert torch.isfinite(log_prob).all()
        assert (log_prob[~rows] < -1e30).all()
    ref_entropy = -(ref_probs * torch.where(allowed, ref_log_probs, 0.0)).sum(-1)
    entropy = dist.entropy(params)
    torch.testing.assert_close(entropy, ref_entropy)
    other = dist.masked(DistParams(logits.detach() * 0.5), mask)
    kl = dist.kl(params, other)
    other_log_probs = torch.log_softmax(
        torch.where(
            allowed, logits * 0.5, torch.tensor(-torch.inf, dtype=logits.dtype)
        ),
        -1,
    )
    ref_kl = (
        ref_probs * torch.where(allowed, ref_log_probs - other_log_probs, 0.0)
    ).sum(-1)
    torch.testing.assert_close(kl, ref_kl)
    # gradients are finite and illegal logits get none
    legal_action = torch.where(allowed, logits, -torch.inf).argmax(-1)
    loss = entropy.sum() + kl.sum() + dist.log_likelihood(legal_action, params).sum()
    loss.backward()
    assert torch.isfinite(logits.grad).all()
    assert not logits.grad[~allowed].any()


def test_mask_none_and_shape_errors():
    dist = Categorical(3)
    params = DistParams(torch.zeros(2, 3))
    assert dist.masked(params, None) is params
    with pytest.raises(ShapeError, match="action_mask"):
        dist.masked(params, torch.ones(2, 4))


# -- agent and evaluator -------------------------------------------------------
N_ACTIONS = 5
OBS_SPACE = gym.spaces.Dict(
    {
        "observation": gym.spaces.Box(-1, 1, (4,), np.float32),
        "action_mask": gym.spaces.Box(0, 1, (N_ACTIONS,), np.int8),
    }
)


def _agent(seed=0):
    torch.manual_seed(seed)
    model, dist = build_actor_critic(
        OBS_SPACE, gym.spaces.Discrete(N_ACTIONS), hidden_sizes=(16,)
    )
    with torch.no_grad():  # sharp logits: an unmasked policy would pick anything
        model.policy_head.linear.weight.mul_(300.0)
    return model, dist, ActorCriticAgent(model, dist)


def _observation(lead, seed):
    rng = np.random.default_rng(seed)
    mask = (rng.random((*lead, N_ACTIONS)) < 0.4).astype(np.int8)
    mask[..., 0][mask.sum(-1) == 0] = 0  # keep some all-illegal rows
    return {
        "observation": torch.from_numpy(rng.normal(size=(*lead, 4)).astype(np.float32)),
        "action_mask": torch.from_numpy(mask),
    }


@SETTINGS
@given(st.integers(0, 10_000))
def test_agent_never_acts_illegally_with_agents_as_a_second_leading_dim(seed):
    model, dist, agent = _agent(seed % 7)
    obs = _observation((3, 4), seed)  # [B, A, ...]: a parameter-sharing model
    legal = obs["action_mask"] != 0
    allowed = legal | ~legal.any(-1, keepdim=True)
    for mode in ("sample", "eval"):
        agent.set_mode(mode)
        with torch.no_grad():
            step = agent.step(obs, None, None, None)
        assert step.action.shape == (3, 4)
        assert step.agent_info[fields.VALUE].shape == (3, 4)
        assert step.agent_info[fields.LOG_PROB].shape == (3, 4)
        assert allowed.gather(-1, step.action[..., None]).all()
        assert torch.isfinite(step.agent_info[fields.LOG_PROB]).all()


def test_unmasked_agent_does_act_illegally_so_the_test_above_can_fail():
    model, dist, _ = _agent(1)
    agent = ActorCriticAgent(model, dist, action_mask_key=None)
    obs = _observation((64, 2), 3)
    legal = obs["action_mask"] != 0
    allowed = legal | ~legal.any(-1, keepdim=True)
    with torch.no_grad():
        action = agent.step(obs, None, None, None).action
    assert not allowed.gather(-1, action[..., None]).all()


def test_evaluator_recomputes_the_sampling_log_prob_under_the_mask():
    model, dist, agent = _agent(2)
    obs = _observation((6, 3), 5)  # [T, B, ...]
    with torch.no_grad():
        step = agent.step(obs, None, None, None)
    evaluator = ActorCriticEvaluator(model, dist)
    flat_obs = {k: v.reshape(18, *v.shape[2:]) for k, v in obs.items()}  # PPO's [N]
    evaluation = evaluator.evaluate(flat_obs, step.action.reshape(18), None, None)
    torch.testing.assert_close(
        evaluation.log_prob, step.agent_info[fields.LOG_PROB].reshape(18)
    )
    unmasked = ActorCriticEvaluator(model, dist, action_mask_key=None)
    plain = unmasked.evaluate(flat_obs, step.action.reshape(18), None, None)
    assert not torch.allclose(plain.log_prob, evaluation.log_prob)
    # entropy is the masked policy's: zero where one action is legal
    legal = flat_obs["action_mask"] != 0
    single = legal.sum(-1) == 1
    assert single.any()
    torch.testing.assert_close(
        evaluation.entropy[single], torch.zeros(int(single.sum())), atol=1e-6, rtol=0
    )


def test_a_mask_with_a_continuous_distribution_is_a_config_error():
    space = gym.spaces.Dict(
        {
            "observation": gym.spaces.Box(-1, 1, (4,), np.float32),
            "action_mask": gym.spaces.Box(0, 1, (2,), np.int8),
        }
    )
    model, dist = build_actor_critic(space, gym.spaces.Box(-1, 1, (2,), np.float32))
    assert isinstance(dist, Gaussian)
    agent = ActorCriticAgent(model, dist)
    obs = {"observation": torch.zeros(3, 4), "action_mask": torch.ones(3, 2)}
    with pytest.raises(ConfigError, match="cannot mask"):
        agent.step(obs, None, None, None)
