"""PPO: updates move the policy, early stopping, minibatching, validation, learning."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from parllel import fields
from parllel.errors import ConfigError, ShapeError, TreeStructureError
from parllel.schedules import linear_schedule
from parllel.torch.algos import PPO, ActorCriticEvaluator
from parllel.torch.algos.evaluator import PolicyEvaluation, PolicyEvaluator
from parllel.torch.models import build_actor_critic
from parllel.torch.models.recurrent import RecurrentCore

OBS_SPACE = gym.spaces.Box(-1, 1, (3,), np.float32)


def _make(num_actions=3, recurrent_cell=None, seed=0, **ppo_kwargs):
    torch.manual_seed(seed)
    model, dist = build_actor_critic(
        OBS_SPACE,
        gym.spaces.Discrete(num_actions),
        hidden_sizes=(16,),
        recurrent_cell=recurrent_cell,
        recurrent_size=8,
    )
    lr = ppo_kwargs.pop("lr", 1e-2)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    ppo = PPO(ActorCriticEvaluator(model, dist), optimizer, **ppo_kwargs)
    return model, dist, ppo


def _rollout(model, dist, T=8, B=4, advantaged_action=1, seed=0):
    """A synthetic batch: advantage +1 for one action, -1 for the others."""
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(T, B, 3, generator=g)  # [T, B, obs_dim]
    with torch.no_grad():
        initial = model.initial_state(B)
        out = model(obs, initial)
        action = dist.sample(out.dist_params)  # [T, B]
        log_prob = dist.log_likelihood(action, out.dist_params)
    advantage = torch.where(action == advantaged_action, 1.0, -1.0)  # [T, B]
    batch = {
        fields.OBSERVATION: obs,
        fields.ACTION: action,
        fields.ADVANTAGE: advantage,
        fields.RETURN: out.value + advantage,
        fields.AGENT_INFO: {fields.LOG_PROB: log_prob, fields.VALUE: out.value},
        fields.DONE: torch.zeros(T, B, dtype=torch.bool),
    }
    if initial is not None:
        batch[fields.INITIAL_STATE] = model.core.state_to_batch_first(initial)
    return batch


def _prob_of(model, obs, action, state=None):
    with torch.no_grad():
        logits = model(obs, state).dist_params.logits
    return torch.softmax(logits, -1)[..., action].mean().item()


@pytest.mark.parametrize("recurrent_cell", [None, "gru"])
def test_ppo_moves_policy_toward_advantaged_actions(recurrent_cell):
    recurrent = recurrent_cell is not None
    model, dist, ppo = _make(
        recurrent_cell=recurrent_cell, recurrent=recurrent, epochs=3, minibatches=2
    )
    batch = _rollout(model, dist)
    obs = batch[fields.OBSERVATION]
    before_prob = _prob_of(model, obs, 1)
    first = ppo.optimize(batch)
    second = ppo.optimize(batch)
    assert _prob_of(model, obs, 1) > before_prob + 0.05
    assert second["policy_loss"] < first["policy_loss"]
    assert second["value_loss"] < first["value_loss"]
    expected_keys = {
        "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction",
        "explained_variance", "grad_norm", "learning_rate", "clip_range",
        "epochs_run", "minibatch_updates", "early_stopped",
    }  # fmt: skip
    assert expected_keys <= set(first)
    assert first["epochs_run"] == 3 and first["minibatch_updates"] == 6
    assert first["early_stopped"] == 0.0 and first["grad_norm"] > 0


def test_ppo_kl_early_stopping():
    model, dist, ppo = _make(lr=0.5, target_kl=1e-4, epochs=10, minibatches=4)
    batch = _rollout(model, dist, T=16, B=4)
    metrics = ppo.optimize(batch)
    assert metrics["early_stopped"] == 1.0
    assert 1 <= metrics["minibatch_updates"] < 40
    assert metrics["epochs_run"] < 10


class RecordingEvaluator:
    """Evaluator that records what PPO hands it; the policy is one logit table."""

    def __init__(self):
        self.logits = torch.nn.Parameter(torch.zeros(2))
        self.calls = []

    def evaluate(self, observation, action, initial_state, resets, **extra):
        self.calls.append((observation, action, initial_state, resets, extra))
        log_probs = torch.log_softmax(self.logits, -1)
        log_prob = log_probs[action.long()]
        entropy = -(log_probs.exp() * log_probs).sum().expand(action.shape)
        return log_prob, entropy, torch.zeros(action.shape) + self.logits.sum()


def _column_batch(T=5, B=6):
    t = torch.arange(T).view(T, 1).expand(T, B)
    b = torch.arange(B).view(1, B).expand(T, B)
    code = (100 * b + t).float()  # [T, B]: identifies (t, b)
    done = torch.zeros(T, B, dtype=torch.bool)
    done[2, 1] = done[0, 4] = True
    return {
        fields.OBSERVATION: {"code": code.unsqueeze(-1)},  # [T, B, 1], nested
        fields.ACTION: (b % 2).long(),
        fields.ADVANTAGE: torch.ones(T, B),
        fields.RETURN: torch.zeros(T, B),
        fields.LOG_PROB: torch.full((T, B), math.log(0.5)),
        fields.VALUE: torch.zeros(T, B),
        fields.PREV_REWARD: code,
        fields.INITIAL_STATE: (torch.arange(B).float(), torch.arange(B) * 10),
        fields.TERMINATED: done,
        fields.TRUNCATED: torch.zeros(T, B, dtype=torch.bool),
    }


def test_recurrent_minibatches_keep_sequences_intact():
    evaluator = RecordingEvaluator()
    assert isinstance(evaluator, PolicyEvaluator)
    optimizer = torch.optim.SGD([evaluator.logits], lr=0.1)
    ppo = PPO(
        evaluator, optimizer, recurrent=True, epochs=2, minibatches=3,
        extra_input_fields=(fields.PREV_REWARD,),
    )  # fmt: skip
    T, B = 5, 6
    ppo.optimize(_column_batch(T, B))
    assert len(evaluator.calls) == 6
    for epoch in range(2):
        seen = []
        for observation, action, state, resets, extra in evaluator.calls[
            3 * epoch : 3 * epoch + 3
        ]:
            code = observation["code"][..., 0]  # [T, B_mb]
            assert code.shape == (T, 2)
            columns = (code[0] // 100).long()
            seen += columns.tolist()
            # whole columns, in time order
            expected = 100 * columns.view(1, -1) + torch.arange(T).view(T, 1)
            torch.testing.assert_close(code, expected.float())
            torch.testing.assert_close(extra[fields.PREV_REWARD], code)
            torch.testing.assert_close(action, columns.view(1, -1).expand(T, -1) % 2)
            # initial state rows follow their columns (a tuple tree here)
            torch.testing.assert_close(state[0], columns.float())
            torch.testing.assert_close(state[1], columns * 10)
            # resets: True at t where done[t - 1]
            for j, column in enumerate(columns.tolist()):
                expected_resets = torch.zeros(T, dtype=torch.bool)
                if column == 1:
                    expected_resets[3] = True
                if column == 4:
                    expected_resets[1] = True
                assert torch.equal(resets[:, j], expected_resets)
        assert sorted(seen) == list(range(B))


def test_feed_forward_minibatches_cover_every_sample_once():
    evaluator = RecordingEvaluator()
    ppo = PPO(evaluator, torch.optim.SGD([evaluator.logits], lr=0.1), minibatches=5)
    batch = _column_batch(T=5, B=6)
    ppo.optimize(batch)
    first_epoch = evaluator.calls[:5]
    codes = torch.cat([obs["code"][:, 0] for obs, *_ in first_epoch])
    assert all(obs["code"].shape == (6, 1) for obs, *_ in first_epoch)
    assert sorted(codes.tolist()) == sorted(
        batch[fields.OBSERVATION]["code"].flatten().tolist()
    )
    assert all(
        state is None and resets is None for _, _, state, resets, _ in first_epoch
    )


def test_valid_mask_ignores_invalid_steps():
    model, dist, ppo = _make(epochs=1, minibatches=1)
    batch = _rollout(model, dist)
    valid = torch.ones(8, 4, dtype=torch.bool)
    valid[5:, 2] = False
    batch[fields.VALID] = valid
    batch[fields.ADVANTAGE][~valid] = math.nan  # garbage after an env finished
    batch[fields.RETURN][~valid] = math.inf
    metrics = ppo.optimize(batch)
    assert all(math.isfinite(v) for v in metrics.values())
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_recurrent_ppo_with_packed_lstm_state():
    model, dist, ppo = _make(
        recurrent_cell="lstm", recurrent=True, minibatches=2, batch_shape=(8, 4)
    )
    batch = _rollout(model, dist)
    batch[fields.DONE][3, 0] = True
    assert isinstance(model.core, RecurrentCore)
    metrics = ppo.optimize(batch)
    assert math.isfinite(metrics["policy_loss"])


def test_schedules_follow_progress():
    model, dist, ppo = _make(
        learning_rate=linear_schedule(1e-2, 0.0),
        clip_range=linear_schedule(0.2, 0.1),
        value_clip_range=0.5,
        total_updates=4,
        epochs=1,
        minibatches=1,
    )
    batch = _rollout(model, dist)
    first = ppo.optimize(batch)
    assert first["learning_rate"] == pytest.approx(1e-2)
    assert first["clip_range"] == pytest.approx(0.2)
    second = ppo.optimize(batch)
    assert second["learning_rate"] == pytest.approx(7.5e-3)
    assert ppo.optimize(batch, progress=1.0)["clip_range"] == pytest.approx(0.1)
    ppo2 = PPO(ppo.evaluator, ppo.optimizer, learning_rate=linear_schedule(1, 0))
    with pytest.raises(ConfigError, match="progress"):
        ppo2.optimize(batch)
    state = ppo.state_dict()
    ppo.load_state_dict(state)
    assert ppo.updates_done == 3


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"learning_rate": -1e-3}, "learning_rate"),
        ({"learning_rate": lambda p: -1.0}, "learning_rate"),
        ({"clip_range": 0.0}, "clip_range"),
        ({"clip_range": -0.2}, "clip_range"),
        ({"value_clip_range": 0.0}, "value_clip_range"),
        ({"value_loss_coef": -1.0}, "value_loss_coef"),
        ({"entropy_coef": -0.1}, "entropy_coef"),
        ({"max_grad_norm": 0.0}, "max_grad_norm"),
        ({"target_kl": -0.01}, "target_kl"),
        ({"epochs": 0}, "epochs"),
        ({"minibatches": 2.5}, "minibatches"),
        ({"total_updates": 0}, "total_updates"),
        ({"batch_shape": (5, 3), "minibatches": 4}, "divisible"),
        ({"batch_shape": (8, 3), "minibatches": 2, "recurrent": True}, "env columns"),
    ],
)
def test_config_errors(kwargs, message):
    evaluator = RecordingEvaluator()
    optimizer = torch.optim.SGD([evaluator.logits], lr=0.1)
    with pytest.raises(ConfigError, match=message):
        PPO(evaluator, optimizer, **kwargs)


def test_bad_collaborators_and_batches():
    evaluator = RecordingEvaluator()
    optimizer = torch.optim.SGD([evaluator.logits], lr=0.1)
    with pytest.raises(ConfigError, match="evaluate"):
        PPO(object(), optimizer)
    with pytest.raises(ConfigError, match="optimizer"):
        PPO(evaluator, [evaluator.logits])
    ppo = PPO(evaluator, optimizer, minibatches=7)
    with pytest.raises(ConfigError, match="minibatches"):
        ppo.optimize(_column_batch(T=5, B=6))
    batch = _column_batch()
    batch[fields.OBSERVATION] = {"code": torch.zeros(6, 6, 1)}  # T + 1 rows
    with pytest.raises(ShapeError, match="bootstrap"):
        PPO(evaluator, optimizer, minibatches=1).optimize(batch)
    batch = _column_batch()
    del batch[fields.RETURN]
    with pytest.raises(TreeStructureError, match=fields.RETURN):
        PPO(evaluator, optimizer, minibatches=1).optimize(batch)
    batch = _column_batch()
    del batch[fields.TERMINATED]
    with pytest.raises(TreeStructureError, match=fields.DONE):
        PPO(evaluator, optimizer, minibatches=1, recurrent=True).optimize(batch)


def test_ppo_learns_a_bandit():
    """A Categorical MLP policy on a one-step 4-armed bandit finds the best arm."""
    rng = np.random.default_rng(0)
    arm_means = np.array([0.2, 0.5, 1.0, 0.1])
    model, dist, ppo = _make(num_actions=4, lr=2e-2, epochs=4, minibatches=4)
    T, B = 4, 16
    obs = torch.zeros(T, B, 3)  # [T, B, obs_dim]: a constant context
    for _ in range(25):
        with torch.no_grad():
            out = model(obs)
            action = dist.sample(out.dist_params)  # [T, B]
            log_prob = dist.log_likelihood(action, out.dist_params)
        reward = rng.normal(arm_means[action.numpy()], 0.3).astype(np.float32)
        reward = torch.from_numpy(reward)  # [T, B]; one-step episodes: return = reward
        ppo.optimize(
            {
                fields.OBSERVATION: obs,
                fields.ACTION: action,
                fields.ADVANTAGE: reward - out.value,
                fields.RETURN: reward,
                fields.AGENT_INFO: {fields.LOG_PROB: log_prob, fields.VALUE: out.value},
            }
        )
    with torch.no_grad():
        probs = torch.softmax(model(torch.zeros(3)).dist_params.logits, -1)
    assert probs.argmax().item() == 2
    assert probs[2] > 0.9
    assert isinstance(PolicyEvaluation(*(torch.zeros(1),) * 3), tuple)


@pytest.mark.parametrize("squash", [False, True])
def test_continuous_ppo_moves_mean_toward_advantaged_actions(squash):
    torch.manual_seed(0)
    model, dist = build_actor_critic(
        OBS_SPACE, gym.spaces.Box(-2, 2, (2,), np.float32), squash=squash
    )
    ppo = PPO(
        ActorCriticEvaluator(model, dist),
        torch.optim.Adam(model.parameters(), lr=1e-2),
        epochs=4,
        minibatches=2,
    )
    obs = torch.zeros(8, 4, 3)  # [T, B, obs_dim]
    with torch.no_grad():
        out = model(obs)
        action = dist.sample(out.dist_params)  # [T, B, 2]
        log_prob = dist.log_likelihood(action, out.dist_params)
    advantage = action[..., 0] - action[..., 0].mean()  # prefer larger action[0]
    before = dist.deterministic(model(obs[0, 0]).dist_params)[0].item()
    ppo.optimize(
        {
            fields.OBSERVATION: obs,
            fields.ACTION: action,
            fields.ADVANTAGE: advantage,
            fields.RETURN: out.value + advantage,
            fields.AGENT_INFO: {fields.LOG_PROB: log_prob, fields.VALUE: out.value},
        }
    )
    after = dist.deterministic(model(obs[0, 0]).dist_params)[0].item()
    assert after > before
