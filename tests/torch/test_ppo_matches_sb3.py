"""PPO's update equals SB3's on the same weights and the same batch.

SB3's PPO defines the update parllel's PPO reproduces: clipped surrogate,
value loss, advantages standardized per minibatch with the sample std
(``ddof=1``), gradient-norm clipping, Adam with ``eps=1e-5``. Both libraries
start from one set of weights and train on one batch (one minibatch per epoch,
so the shuffling order cannot matter); the parameters must end equal to float
rounding.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from parllel import fields
from parllel.torch.algos import PPO, ActorCriticEvaluator
from parllel.torch.models import build_actor_critic

sb3 = pytest.importorskip("stable_baselines3")

T, B = 16, 4
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT_SPACE = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

# parllel's parameter name -> SB3's MlpPolicy parameter name
NAMES = {
    "policy_trunk.layers.0": "mlp_extractor.policy_net.0",
    "policy_trunk.layers.2": "mlp_extractor.policy_net.2",
    "value_trunk.layers.0": "mlp_extractor.value_net.0",
    "value_trunk.layers.2": "mlp_extractor.value_net.2",
    "policy_head.mean": "action_net",
    "value_head.linear": "value_net",
    "policy_head.log_std": "log_std",
}


class BoxEnv(gym.Env):
    """Only the spaces matter: SB3 needs an env to build its PPO."""

    observation_space = OBS_SPACE
    action_space = ACT_SPACE

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}

    def step(self, action):
        return np.zeros(3, np.float32), 0.0, False, False, {}


def sb3_name(name: str) -> str:
    for ours, theirs in NAMES.items():
        if name == ours:
            return theirs
        if name.startswith(ours + "."):
            return theirs + name[len(ours) :]
    raise KeyError(name)


def build_pair(seed: int):
    torch.manual_seed(seed)
    model, distribution = build_actor_critic(OBS_SPACE, ACT_SPACE, shared_trunk=False)
    venv = sb3.common.vec_env.DummyVecEnv([BoxEnv] * B)
    theirs = sb3.PPO(
        "MlpPolicy",
        venv,
        n_steps=T,
        batch_size=T * B,  # one minibatch per epoch
        n_epochs=5,
        learning_rate=3e-4,
        clip_range=0.2,
        ent_coef=0.0,
        vf_coef=0.5,
        max_grad_norm=0.5,
        normalize_advantage=True,
        seed=seed,
        device="cpu",
    )
    theirs_params = dict(theirs.policy.named_parameters())
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            theirs_params[sb3_name(name)].copy_(parameter)
    assert len(theirs_params) == len(list(model.parameters()))
    theirs.set_logger(sb3.common.logger.configure(None, []))  # train() logs
    return model, distribution, theirs


def batch_for(model, distribution, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    observation = torch.rand(T, B, 3, generator=g) * 2 - 1
    with torch.no_grad():
        out = model(observation)
        action = distribution.sample(out.dist_params)
        log_prob = distribution.log_likelihood(action, out.dist_params)
    advantage = torch.randn(T, B, generator=g)
    return {
        fields.OBSERVATION: observation,
        fields.ACTION: action,
        fields.ADVANTAGE: advantage,
        fields.RETURN: out.value + advantage,
        fields.AGENT_INFO: {fields.LOG_PROB: log_prob, fields.VALUE: out.value},
        fields.DONE: torch.zeros(T, B, dtype=torch.bool),
    }


def fill_rollout_buffer(theirs, batch: dict) -> None:
    buffer = theirs.rollout_buffer
    buffer.reset()
    buffer.observations[:] = batch[fields.OBSERVATION].numpy()
    buffer.actions[:] = batch[fields.ACTION].numpy()
    buffer.advantages[:] = batch[fields.ADVANTAGE].numpy()
    buffer.returns[:] = batch[fields.RETURN].numpy()
    buffer.values[:] = batch[fields.AGENT_INFO][fields.VALUE].numpy()
    buffer.log_probs[:] = batch[fields.AGENT_INFO][fields.LOG_PROB].numpy()
    buffer.full = True


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_ppo_update_equals_sb3s(seed):
    model, distribution, theirs = build_pair(seed)
    ours = PPO(
        ActorCriticEvaluator(model, distribution),
        torch.optim.Adam(model.parameters(), lr=3e-4, eps=1e-5),  # SB3's Adam
        clip_range=0.2,
        value_loss_coef=1.0,  # parllel's value loss is 0.5 * MSE, SB3's the MSE
        entropy_coef=0.0,
        max_grad_norm=0.5,
        epochs=5,
        minibatches=1,
        normalize_advantage=True,
    )
    batch = batch_for(model, distribution, seed)
    fill_rollout_buffer(theirs, batch)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}

    ours.optimize(batch)
    theirs.train()

    theirs_params = dict(theirs.policy.named_parameters())
    for name, parameter in model.named_parameters():
        moved = (parameter - before[name]).abs().max().item()
        assert moved > 1e-5, f"{name} did not train"
        torch.testing.assert_close(
            parameter, theirs_params[sb3_name(name)], rtol=0, atol=2e-6, msg=name
        )
