"""The JAX PPO update is the torch PPO update: same weights, batch and
minibatch order give the same parameters (float32 tolerance); the same seed
gives the same JAX run bit for bit."""

from __future__ import annotations

import gymnasium as gym
import jax
import numpy as np
import optax
import pytest

from parllel import fields
from parllel.errors import ConfigError, NonFiniteError
from parllel.jax.agents import ActorCriticAgent
from parllel.jax.algos import PPO, adam
from parllel.jax.algos.ppo_batch import minibatch_permutations
from parllel.jax.models import build_actor_critic
from parllel.jax.models.params import params_from_torch, params_to_torch
from parllel.schedules import linear_schedule

torch = pytest.importorskip("torch")
torch_models = pytest.importorskip("parllel.torch.models")
torch_algos = pytest.importorskip("parllel.torch.algos")

pytestmark = pytest.mark.usefixtures("shared_compilations")

T, B = 8, 4
OBS = gym.spaces.Box(-1.0, 1.0, (3,))


def _batch(action_space: gym.Space, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    if isinstance(action_space, gym.spaces.Discrete):
        action = rng.integers(0, action_space.n, (T, B))
    else:
        action = rng.normal(size=(T, B, *action_space.shape)).astype(np.float32)
    valid = np.ones((T, B), bool)
    valid[-2:, 0] = False  # an env whose episode ended: its last steps are padding
    return {
        fields.OBSERVATION: rng.normal(size=(T, B, 3)).astype(np.float32),
        fields.ACTION: action,
        fields.ADVANTAGE: rng.normal(size=(T, B)).astype(np.float32),
        fields.RETURN: rng.normal(size=(T, B)).astype(np.float32),
        fields.AGENT_INFO: {
            fields.LOG_PROB: (rng.normal(size=(T, B)) * 0.1 - 1.0).astype(np.float32),
            fields.VALUE: rng.normal(size=(T, B)).astype(np.float32),
        },
        fields.VALID: valid,
    }


SETTINGS = dict(
    clip_range=0.2,
    value_clip_range=0.3,
    entropy_coef=0.01,
    max_grad_norm=0.5,
    epochs=2,
    minibatches=4,
    normalize_advantage=True,
    total_updates=3,
)


@pytest.mark.parametrize(
    "action_space", [gym.spaces.Discrete(3), gym.spaces.Box(-1.0, 1.0, (2,))]
)
def test_jax_updates_give_torch_parameters(action_space, monkeypatch):
    torch.manual_seed(0)
    model, distribution = torch_models.build_actor_critic(
        OBS, action_space, hidden_sizes=(16, 16)
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    torch_ppo = torch_algos.PPO(
        torch_algos.ActorCriticEvaluator(model, distribution),
        optimizer,
        learning_rate=linear_schedule(1e-3, 1e-4),
        **SETTINGS,
    )
    network, jax_distribution = build_actor_critic(
        OBS, action_space, hidden_sizes=(16, 16)
    )
    state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    agent = ActorCriticAgent(network, jax_distribution, params_from_torch(state))
    jax_ppo = PPO(
        agent,
        adam(1e-3),
        learning_rate=linear_schedule(1e-3, 1e-4),
        **SETTINGS,
    )
    key = jax.random.key(7)
    for update in range(3):
        batch = _batch(action_space, update)
        key, draw = jax.random.split(key)
        orders = np.asarray(minibatch_permutations(draw, SETTINGS["epochs"], T * B))
        epochs = iter(orders.astype(np.int64))

        def randperm(n, device=None, epochs=epochs):  # the JAX order, epoch by epoch
            return torch.from_numpy(next(epochs))

        monkeypatch.setattr(torch, "randperm", randperm)
        expected = torch_ppo.optimize(batch)
        got = jax_ppo.optimize(batch, permutations=orders)
        for name in ("policy_loss", "value_loss", "entropy", "approx_kl", "grad_norm"):
            assert got[name] == pytest.approx(expected[name], rel=1e-3, abs=1e-5), name
        for name in ("clip_fraction", "learning_rate", "minibatch_updates"):
            assert got[name] == pytest.approx(expected[name], rel=1e-5), name
    torch_params = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    jax_params = params_to_torch(agent.params)
    assert jax_params.keys() == torch_params.keys()
    moved = False
    for name, value in torch_params.items():
        np.testing.assert_allclose(jax_params[name], value, rtol=1e-4, atol=2e-6)
        moved |= not np.allclose(value, state[name])
    assert moved  # the updates changed the weights


def _agent() -> ActorCriticAgent:
    network, distribution = build_actor_critic(
        OBS, gym.spaces.Discrete(3), hidden_sizes=(16,)
    )
    example = np.zeros((1, 3), np.float32)
    return ActorCriticAgent(
        network, distribution, example_observation=example, key=jax.random.key(0)
    )


def _jax_run(seed: int, target_kl: float | None = None) -> tuple[list, dict]:
    agent = _agent()
    ppo = PPO(agent, adam(3e-4), seed=seed, target_kl=target_kl, epochs=2)
    metrics = {}
    for update in range(2):
        metrics = ppo.optimize(_batch(gym.spaces.Discrete(3), update))
    return jax.tree.leaves(jax.device_get(agent.params)), metrics


def test_same_seed_same_run_bitwise():
    first, first_metrics = _jax_run(seed=3)
    second, second_metrics = _jax_run(seed=3)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    assert first_metrics == second_metrics
    orders = [minibatch_permutations(jax.random.key(s), 2, T * B) for s in (3, 4)]
    assert not np.array_equal(*orders)  # another seed, another minibatch order


def test_target_kl_stops_early_and_counts_steps():
    _, metrics = _jax_run(seed=0, target_kl=1e-12)
    assert metrics["early_stopped"] == 1.0
    assert metrics["minibatch_updates"] < 12


def test_state_dict_round_trip_and_refusals():
    agent = _agent()
    ppo = PPO(agent, adam(3e-4), seed=1, epochs=2)
    ppo.optimize(_batch(gym.spaces.Discrete(3), 0))
    state = ppo.state_dict()
    assert all(isinstance(x, np.ndarray) for x in jax.tree.leaves(state["optimizer"]))
    fresh = PPO(agent, adam(3e-4), seed=9, epochs=2)
    fresh.load_state_dict(state)
    assert fresh.updates_done == 1
    np.testing.assert_array_equal(
        jax.random.key_data(fresh.key), jax.random.key_data(ppo.key)
    )
    with pytest.raises(ConfigError, match="inject_hyperparams"):
        PPO(agent, optax.adam(1e-3), learning_rate=1e-3)
    bad = _batch(gym.spaces.Discrete(3), 0)
    bad[fields.ADVANTAGE][0, 0] = np.inf
    bad[fields.VALID][:] = True
    with pytest.raises(NonFiniteError):
        ppo.optimize(bad)
