"""PPO under policy lag: behaviour log-probs, and the V-trace correction.

Batches come from a real sampler (CartPole with a short time limit, so both
kinds of episode end occur) or are synthetic tensors; the lag is a
perturbation of the model's weights after sampling. References: the GAE
transform (on-policy limit) and the plain-Python V-trace of the kernel's tests.
"""

from __future__ import annotations

import contextlib
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parllel import fields
from parllel.builders import build_sample_tree
from parllel.cages import CageOptions, SerialCage
from parllel.errors import ConfigError, TreeStructureError
from parllel.samplers import FeedForwardSampler, RecurrentSampler
from parllel.torch import TorchHandler
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.algos import PPO, ActorCriticEvaluator, VTraceCorrection
from parllel.torch.models import build_actor_critic
from parllel.transforms import EstimateAdvantage
from tests.transforms.test_transforms_vtrace import ref_vtrace

GAMMA, LAMBDA = 0.9, 0.8
T, B = 32, 4


def make_env():
    return gym.make("CartPole-v1", max_episode_steps=14)


@contextlib.contextmanager
def sampled(recurrent=False, wait_reset=False, seed=0):
    """(model, distribution, sample tree) after two batches of a fresh sampler."""
    torch.manual_seed(seed)
    mode = "wait" if wait_reset else "auto"
    cage = SerialCage(make_env, B, options=CageOptions(seed=seed, reset_mode=mode))
    with cage:
        model, distribution = build_actor_critic(
            cage.spaces.observation,
            cage.spaces.action,
            hidden_sizes=(8,),
            recurrent_cell="gru" if recurrent else None,
            recurrent_size=8,
        )
        handler = TorchHandler(ActorCriticAgent(model, distribution), n_envs=B)
        tree = build_sample_tree(
            cage, handler, T, recurrent=recurrent, wait_reset=wait_reset
        )
        gae = EstimateAdvantage(tree, gamma=GAMMA, gae_lambda=LAMBDA)
        if recurrent:
            sampler = RecurrentSampler(
                cage, handler, tree, transform=gae, wait_reset=wait_reset
            )
        else:
            sampler = FeedForwardSampler(cage, handler, tree, transform=gae)
        for _ in range(2):  # the second batch starts mid-episode, with a state
            tree, _ = sampler.collect_batch()
        yield model, distribution, tree


def perturb(model, scale=0.3, seed=1):
    """The learner's policy moves on after the batch was sampled."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g))


def masked(array, valid):
    return array if valid is None else array[valid]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "recurrent, wait_reset", [(False, False), (True, False), (True, True)]
)
def test_on_policy_targets_are_the_gae_returns(recurrent, wait_reset):
    with sampled(recurrent, wait_reset) as (model, distribution, tree):
        terminated = tree.terminated.to_ndarray()
        truncated = tree.truncated.to_ndarray()
        if wait_reset:  # at most one episode end per column
            assert (terminated | truncated).any()
        else:
            assert terminated.any() and (truncated & ~terminated).any()
        correction = VTraceCorrection(gamma=GAMMA, trace_lambda=LAMBDA)
        data, metrics = correction.correct(
            ActorCriticEvaluator(model, distribution), tree, recurrent=recurrent
        )
        valid = tree.valid.to_ndarray() if wait_reset else None
        assert wait_reset == (valid is not None and not valid.all())
        np.testing.assert_allclose(
            masked(data.return_.numpy(), valid),
            masked(tree.return_.to_ndarray(), valid),  # GAE(lambda) in the sampler
            rtol=1e-5,
            atol=1e-5,
        )
        np.testing.assert_allclose(
            masked(data.old_value.numpy(), valid),
            masked(tree.agent_info.value.to_ndarray(), valid),
            rtol=1e-5,
            atol=1e-6,
        )
        assert metrics["vtrace_rho_mean"] == pytest.approx(1.0, abs=1e-6)
        assert metrics["vtrace_clipped_fraction"] == 0.0


def current_quantities(model, distribution, tree, recurrent):
    """Log-probs, values, bootstrap and final values under the current weights."""
    padded = tree.observation.padded_ndarray()  # padding 1: rows -1 .. T
    observation = torch.from_numpy(padded[1 : T + 2])  # rows 0 .. T
    action = torch.from_numpy(tree.action.to_ndarray())
    done = torch.from_numpy(tree.done.to_ndarray())
    with torch.no_grad():
        if recurrent:
            state = model.core.state_from_batch_first(
                torch.from_numpy(tree.initial_state.to_ndarray())
            )
            resets = torch.zeros(T + 1, B, dtype=torch.bool)
            resets[1:] = done
            out = model(observation, state, resets)
            params = type(out.dist_params)(*(p[:T] for p in out.dist_params))
            value, bootstrap = out.value[:T], out.value[T]
            final_value = tree.final_value.to_ndarray()  # recorded (recurrent)
        else:
            out = model(observation[:T])
            params, value = out.dist_params, out.value
            bootstrap = model(observation[T]).value
            final_obs = torch.from_numpy(tree.final_observation.to_ndarray())
            final_value = model(final_obs).value.numpy()
            ended_by_time = tree.truncated.to_ndarray() & ~tree.terminated.to_ndarray()
            final_value = np.where(ended_by_time, final_value, 0.0)
        log_prob = distribution.log_likelihood(action, params)
    return log_prob.numpy(), value.numpy(), bootstrap.numpy(), final_value


def reference(tree, value, bootstrap, final_value, ratio, rho_bar, c_bar):
    targets, advantages = np.zeros((T, B)), np.zeros((T, B))
    for b in range(B):
        targets[:, b], advantages[:, b] = ref_vtrace(
            tree.reward.to_ndarray()[:, b], value[:, b],
            tree.terminated.to_ndarray()[:, b], tree.truncated.to_ndarray()[:, b],
            bootstrap[b], final_value[:, b], ratio[:, b], GAMMA, LAMBDA,
            rho_bar, c_bar, rho_bar, True,
        )  # fmt: skip
    return targets, advantages


@pytest.mark.timeout(60)
@pytest.mark.parametrize("recurrent", [False, True])
@pytest.mark.parametrize("rho_bar, c_bar", [(1.0, 1.0), (1.5, 0.7), (math.inf, 1.0)])
def test_lagged_targets_match_the_reference(recurrent, rho_bar, c_bar):
    with sampled(recurrent) as (model, distribution, tree):
        perturb(model)
        correction = VTraceCorrection(
            gamma=GAMMA, trace_lambda=LAMBDA, rho_bar=rho_bar, c_bar=c_bar
        )
        data, metrics = correction.correct(
            ActorCriticEvaluator(model, distribution), tree, recurrent=recurrent
        )
        log_prob, value, bootstrap, final_value = current_quantities(
            model, distribution, tree, recurrent
        )
        # the bootstrap row was re-evaluated: the recorded value is stale
        assert np.abs(bootstrap - tree.bootstrap_value.to_ndarray()).max() > 1e-3
        behaviour = tree.agent_info.log_prob.to_ndarray()
        ratio = np.exp(log_prob.astype(np.float64) - behaviour)
        assert ratio.min() < 0.9 and ratio.max() > 1.1  # a real lag
        targets, advantages = reference(
            tree, value, bootstrap, final_value, ratio, rho_bar, c_bar
        )
        np.testing.assert_allclose(data.return_.numpy(), targets, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(
            data.advantage.numpy(), advantages, rtol=1e-4, atol=1e-4
        )
        np.testing.assert_allclose(data.old_value.numpy(), value, atol=1e-5)
        np.testing.assert_array_equal(data.old_log_prob.numpy(), behaviour)
        assert metrics["vtrace_rho_mean"] == pytest.approx(
            np.minimum(ratio, rho_bar).mean(), rel=1e-4
        )
        assert metrics["vtrace_clipped_fraction"] == pytest.approx(
            (ratio > rho_bar).mean()
        )


OBS_SPACE = gym.spaces.Box(-1, 1, (3,), np.float32)


@st.composite
def tensor_batches(draw):
    """A synthetic lagged batch of tensors (no bootstrap row: recorded value)."""
    n_steps, n_envs = draw(st.integers(1, 6)), draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shape = (n_steps, n_envs)
    terminated = rng.random(shape) < draw(st.sampled_from([0.0, 0.2]))
    truncated = rng.random(shape) < draw(st.sampled_from([0.0, 0.3]))
    valid = rng.random(shape) < 0.8 if draw(st.booleans()) else None
    log_ratio = rng.normal(0.0, draw(st.sampled_from([0.0, 0.3, 1.0])), shape)
    return {
        "shape": shape,
        "observation": rng.uniform(-1, 1, shape + (3,)).astype(np.float32),
        "final_observation": rng.uniform(-1, 1, shape + (3,)).astype(np.float32),
        "action": rng.integers(0, 3, shape),
        "reward": rng.uniform(-2, 2, shape).astype(np.float32),
        "terminated": terminated,
        "truncated": truncated,
        "valid": valid,
        "bootstrap_value": rng.normal(size=n_envs).astype(np.float32),
        "log_ratio": log_ratio,
        "recorded_value": rng.normal(size=shape).astype(np.float32),
    }


TENSOR_MODEL = None


def tensor_model():
    global TENSOR_MODEL
    if TENSOR_MODEL is None:
        torch.manual_seed(3)
        TENSOR_MODEL = build_actor_critic(
            OBS_SPACE, gym.spaces.Discrete(3), hidden_sizes=(8,)
        )
    return TENSOR_MODEL


@pytest.mark.timeout(120)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sample=tensor_batches(),
    gamma=st.sampled_from([0.0, 0.9, 1.0]),
    trace_lambda=st.sampled_from([0.0, 0.7, 1.0]),
    rho_bar=st.sampled_from([0.5, 1.0, 2.0, math.inf]),
    c_bar=st.sampled_from([0.5, 1.0, math.inf]),
)
def test_tensor_batches_match_the_reference(
    sample, gamma, trace_lambda, rho_bar, c_bar
):
    model, distribution = tensor_model()
    n_steps, n_envs = sample["shape"]
    observation = torch.from_numpy(sample["observation"])
    action = torch.from_numpy(sample["action"])
    with torch.no_grad():
        out = model(observation)
        current = distribution.log_likelihood(action, out.dist_params).numpy()
        value = out.value.numpy()
        final = model(torch.from_numpy(sample["final_observation"])).value.numpy()
    behaviour = (current - sample["log_ratio"]).astype(np.float32)
    valid = sample["valid"]
    if valid is not None:
        behaviour[~valid] = np.nan  # invalid steps may hold anything
    batch = {
        fields.OBSERVATION: observation,
        fields.FINAL_OBSERVATION: torch.from_numpy(sample["final_observation"]),
        fields.ACTION: action,
        fields.REWARD: torch.from_numpy(sample["reward"]),
        fields.TERMINATED: torch.from_numpy(sample["terminated"]),
        fields.TRUNCATED: torch.from_numpy(sample["truncated"]),
        fields.BOOTSTRAP_VALUE: torch.from_numpy(sample["bootstrap_value"]),
        fields.AGENT_INFO: {
            fields.LOG_PROB: torch.from_numpy(behaviour),
            fields.VALUE: torch.from_numpy(sample["recorded_value"]),
        },
    }
    if valid is not None:
        batch[fields.VALID] = torch.from_numpy(valid)
    correction = VTraceCorrection(
        gamma=gamma, trace_lambda=trace_lambda, rho_bar=rho_bar, c_bar=c_bar
    )
    data, metrics = correction.correct(ActorCriticEvaluator(model, distribution), batch)

    ratio = np.exp(current.astype(np.float64) - behaviour)
    if valid is not None:
        ratio[~valid] = 1.0
    ended_by_time = sample["truncated"] & ~sample["terminated"]
    for b in range(n_envs):
        targets, advantages = ref_vtrace(
            sample["reward"][:, b], value[:, b], sample["terminated"][:, b],
            sample["truncated"][:, b], sample["bootstrap_value"][b],
            np.where(ended_by_time[:, b], final[:, b], 0.0), ratio[:, b],
            gamma, trace_lambda, rho_bar, c_bar, rho_bar, True,
        )  # fmt: skip
        np.testing.assert_allclose(data.return_[:, b], targets, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(
            data.advantage[:, b], advantages, rtol=1e-4, atol=1e-4
        )
    counted = ratio if valid is None else ratio[valid]
    if counted.size:
        assert metrics["vtrace_rho_mean"] == pytest.approx(
            np.minimum(counted, rho_bar).mean(), rel=1e-5
        )
    else:
        assert math.isnan(metrics["vtrace_rho_mean"])


def ppo(model, distribution, correction=None, **kwargs):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    evaluator = ActorCriticEvaluator(model, distribution)
    return PPO(evaluator, optimizer, correction=correction, **kwargs)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("with_correction", [False, True])
def test_ppo_ratio_uses_the_recorded_behaviour_log_probs(with_correction):
    """The first minibatch's ratio is pi / mu, not 1: PPO must not recompute mu."""
    with sampled() as (model, distribution, tree):
        perturb(model)
        log_prob, _, _, _ = current_quantities(model, distribution, tree, False)
        log_ratio = log_prob.astype(np.float64) - tree.agent_info.log_prob.to_ndarray()
        ratio = np.exp(log_ratio)
        expected_kl = ((ratio - 1.0) - log_ratio).mean()
        assert expected_kl > 1e-3  # recomputed old log-probs would give 0
        correction = VTraceCorrection(gamma=GAMMA) if with_correction else None
        # one epoch, one minibatch: the statistics are those before the step
        metrics = ppo(
            model, distribution, correction, epochs=1, minibatches=1
        ).optimize(tree)
        assert metrics["approx_kl"] == pytest.approx(expected_kl, rel=1e-4)
        assert metrics["clip_fraction"] == pytest.approx(
            (np.abs(ratio - 1.0) > 0.2).mean()
        )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"gamma": 1.5}, "gamma must be in"),
        ({"gamma": "0.9"}, "gamma must be a number"),
        ({"gamma": True}, "gamma must be a number"),
        ({"gamma": 0.9, "trace_lambda": -0.1}, "trace_lambda must be in"),
        ({"gamma": 0.9, "rho_bar": 0.0}, "rho_bar must be a positive number"),
        ({"gamma": 0.9, "c_bar": -1.0}, "c_bar must be a positive number"),
        ({"gamma": 0.9, "c_bar": math.nan}, "c_bar must be a positive number"),
        ({"gamma": 0.9, "pg_rho_bar": 0}, "pg_rho_bar must be a positive number"),
        ({"gamma": 0.9, "truncation_as_termination": 1}, "must be a bool"),
    ],
)
def test_bad_correction_config(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        VTraceCorrection(**kwargs)


def test_ppo_rejects_a_correction_that_is_not_a_vtrace_correction():
    model, distribution = tensor_model()
    with pytest.raises(ConfigError, match="VTraceCorrection"):
        ppo(model, distribution, correction="vtrace")
    correction = VTraceCorrection(gamma=0.99, rho_bar=math.inf)
    assert ppo(model, distribution, correction).correction is correction


def test_missing_fields_are_named():
    model, distribution = tensor_model()
    evaluator = ActorCriticEvaluator(model, distribution)
    shape = (4, 2)
    batch = {
        fields.OBSERVATION: torch.zeros(shape + (3,)),
        fields.ACTION: torch.zeros(shape, dtype=torch.long),
        fields.REWARD: torch.ones(shape),
        fields.TERMINATED: torch.zeros(shape, dtype=torch.bool),
        fields.TRUNCATED: torch.zeros(shape, dtype=torch.bool),
        fields.AGENT_INFO: {
            fields.LOG_PROB: torch.zeros(shape),
            fields.VALUE: torch.zeros(shape),
        },
    }
    correction = VTraceCorrection(gamma=0.9)
    # a tensor batch has no observation[T] row: the recorded value is needed
    with pytest.raises(TreeStructureError, match="bootstrap_value"):
        correction.correct(evaluator, batch)
    batch[fields.BOOTSTRAP_VALUE] = torch.zeros(2)
    # neither final observations (to re-evaluate) nor recorded final values
    with pytest.raises(TreeStructureError, match="final_value"):
        correction.correct(evaluator, batch)
    data, _ = VTraceCorrection(gamma=0.9, truncation_as_termination=True).correct(
        evaluator, batch
    )
    assert torch.isfinite(data.return_).all()
    del batch[fields.REWARD]
    with pytest.raises(TreeStructureError, match="reward"):
        correction.correct(evaluator, batch)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("recurrent", [False, True])
def test_ppo_with_vtrace_optimizes_and_reports(recurrent):
    with sampled(recurrent) as (model, distribution, tree):
        algo = ppo(
            model,
            distribution,
            VTraceCorrection(gamma=GAMMA, trace_lambda=LAMBDA),
            recurrent=recurrent,
            minibatches=B if recurrent else 4,
        )
        before = [p.detach().clone() for p in model.parameters()]
        first = algo.optimize(tree)
        assert first["vtrace_rho_mean"] == pytest.approx(1.0, abs=1e-6)
        assert first["vtrace_clipped_fraction"] == 0.0
        assert first["minibatch_updates"] == 4 * algo.minibatches
        assert all(math.isfinite(v) for v in first.values())
        assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
        # the same batch again: the policy has moved on since it was sampled
        second = algo.optimize(tree)
        assert second["vtrace_rho_mean"] < 1.0
        assert 0.0 < second["vtrace_clipped_fraction"] < 1.0
