"""JAX DQN gives the torch DQN's parameters: same weights (converted), same
batches, several updates; the Q-network's conversion both ways, MLP and CNN."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from parllel.jax.agents.dqn_agent import build_dqn_agent
from parllel.jax.algos.dqn import DQN
from parllel.jax.algos.optimizers import adam
from parllel.jax.models.params import params_from_torch, params_to_torch
from parllel.replays.transitions import ReplayBatch

torch = pytest.importorskip("torch")
torch_agents = pytest.importorskip("parllel.torch.agents")
torch_algos = pytest.importorskip("parllel.torch.algos")

OBS = gym.spaces.Box(-1.0, 1.0, (5,), np.float32)
IMAGES = gym.spaces.Box(0, 255, (2, 36, 36), np.uint8)
ACT = gym.spaces.Discrete(3)
SMALL_CNN = dict(channels=(4, 8), kernel_sizes=(8, 4), strides=(4, 2), output_size=16)
BATCH = 32

pytestmark = pytest.mark.usefixtures("shared_compilations")


def _batches(count: int, space: gym.Space, seed: int = 0) -> list[ReplayBatch]:
    rng = np.random.default_rng(seed)
    n = BATCH

    def observations() -> np.ndarray:
        if space.dtype == np.uint8:
            return rng.integers(0, 256, size=(n, *space.shape), dtype=np.uint8)
        return rng.normal(size=(n, *space.shape)).astype(np.float32)

    return [
        ReplayBatch(
            observation=observations(),
            action=rng.integers(0, 3, size=n),
            reward=rng.normal(size=n).astype(np.float32),
            next_observation=observations(),
            terminated=rng.random(n) < 0.2,
            truncated=rng.random(n) < 0.2,
            discount=np.where(rng.random(n) < 0.5, 0.99, 0.99**3).astype(np.float32),
            n_steps=np.ones(n, np.int64),
            indices=np.arange(n),
            weights=rng.uniform(0.5, 1.5, n).astype(np.float32),
        )
        for _ in range(count)
    ]


def _numpy_state(module) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


def _pair(space: gym.Space, options: dict, hidden=(16, 16), cnn=None):
    torch.manual_seed(0)
    torch_agent = torch_agents.build_dqn_agent(space, ACT, hidden_sizes=hidden, cnn=cnn)
    torch_dqn = torch_algos.DQN(
        torch_agent,
        torch.optim.Adam(torch_agent.q_network.parameters(), lr=1e-2),
        **options,
    )
    agent = build_dqn_agent(space, ACT, seed=1, hidden_sizes=hidden, cnn=cnn)
    agent.q_params = params_from_torch(_numpy_state(torch_agent.q_network))
    return torch_dqn, DQN(agent, adam(1e-2), **options)


def _assert_close(jax_params, torch_module, what, rtol=2e-4, atol=2e-5):
    converted = params_to_torch(jax_params)
    expected = _numpy_state(torch_module)
    assert converted.keys() == expected.keys()
    for name, value in expected.items():
        np.testing.assert_allclose(
            converted[name], value, rtol=rtol, atol=atol, err_msg=f"{what} {name}"
        )


@pytest.mark.parametrize(
    "options",
    [
        # double DQN, hard copies mid-call, both Huber branches, clipping on
        dict(target_update_interval=2, huber_delta=0.5, max_grad_norm=0.5),
        # plain DQN, polyak targets, half the squared error, no clipping
        dict(double_dqn=False, tau=0.2, huber_delta=float("inf"), max_grad_norm=None),
    ],
    ids=["double-hard-huber-clip", "plain-polyak-mse"],
)
def test_jax_updates_give_torch_parameters(options):
    torch_dqn, dqn = _pair(OBS, options)
    batches = _batches(6, OBS)
    torch_metrics = []
    torch_priorities = []
    for batch in batches:
        torch_batch = ReplayBatch(*(torch.as_tensor(np.asarray(x)) for x in batch))
        metrics, priorities = torch_dqn.update(torch_batch)
        torch_metrics.append(metrics)
        torch_priorities.append(priorities.numpy())
    # the six JAX updates in two compiled calls of three
    metrics = [dqn.update_batches(batches[i : i + 3]) for i in (0, 3)]
    _assert_close(dqn.agent.q_params, torch_dqn.q_network, "q_network")
    _assert_close(dqn.target_params, torch_dqn.target_network, "target")
    assert dqn.updates_done == torch_dqn.updates_done == 6
    for key in ("loss", "q", "target", "td_abs", "grad_norm"):
        np.testing.assert_allclose(
            np.concatenate([m[key] for m in metrics]),
            [m[key] for m in torch_metrics],
            rtol=1e-4,
            atol=1e-5,
            err_msg=key,
        )
    np.testing.assert_allclose(
        np.concatenate([m["td_error"] for m in metrics]),
        np.stack(torch_priorities),
        rtol=1e-4,
        atol=1e-5,
    )


def test_nature_cnn_q_network_converts_both_ways_and_matches_updates():
    options = dict(target_update_interval=2, max_grad_norm=10.0)
    torch_dqn, dqn = _pair(IMAGES, options, hidden=None, cnn=SMALL_CNN)
    batches = _batches(3, IMAGES, seed=1)
    observation = batches[0].observation
    with torch.no_grad():
        expected = torch_dqn.q_network(torch.as_tensor(observation)).numpy()
    q = dqn.agent.q_values(dqn.agent.q_params, observation)
    np.testing.assert_allclose(np.asarray(q), expected, rtol=1e-5, atol=1e-5)
    # the converted parameters go back to the torch names, unchanged
    back = params_to_torch(dqn.agent.q_params)
    for name, value in _numpy_state(torch_dqn.q_network).items():
        np.testing.assert_array_equal(back[name], value)
    for batch in batches:
        torch_dqn.update(ReplayBatch(*(torch.as_tensor(np.asarray(x)) for x in batch)))
    dqn.update_batches(batches)
    _assert_close(dqn.agent.q_params, torch_dqn.q_network, "q_network", 1e-3, 1e-4)


def test_jax_builder_has_the_torch_networks_shapes():
    for space, hidden, cnn in ((OBS, None, None), (IMAGES, None, SMALL_CNN)):
        torch.manual_seed(0)
        torch_agent = torch_agents.build_dqn_agent(
            space, ACT, hidden_sizes=hidden, cnn=cnn
        )
        agent = build_dqn_agent(space, ACT, seed=0, hidden_sizes=hidden, cnn=cnn)
        shapes = {k: v.shape for k, v in params_to_torch(agent.q_params).items()}
        assert shapes == {
            k: tuple(v.shape) for k, v in torch_agent.q_network.state_dict().items()
        }
