"""JAX SAC gives the torch SAC's parameters: same weights (converted), same
batches, same reparameterization noise, several updates."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from parllel.jax.agents.sac_agent import (
    build_sac_agent,
    twin_q_from_torch,
    twin_q_to_torch,
)
from parllel.jax.algos.replay_updates import ReplayArrays
from parllel.jax.algos.sac import SAC, EntropyCoefficient
from parllel.jax.algos.sac_setup import build_sac_optimizers
from parllel.jax.models.params import params_from_torch, params_to_torch
from parllel.replays.transitions import ReplayBatch

torch = pytest.importorskip("torch")
torch_agents = pytest.importorskip("parllel.torch.agents")
torch_algos = pytest.importorskip("parllel.torch.algos")

OBS = gym.spaces.Box(-1.0, 1.0, (5,), np.float32)
ACT = gym.spaces.Box(
    np.array([-2.0, 0.0, -1.0], np.float32), np.array([2.0, 1.0, 1.0], np.float32)
)
BATCH = 32
HIDDEN = (16, 16)


def _batches(count: int, seed: int = 0) -> list[ReplayBatch]:
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(count):
        n = BATCH
        batches.append(
            ReplayBatch(
                observation=rng.normal(size=(n, 5)).astype(np.float32),
                action=rng.uniform(-1, 1, size=(n, 3)).astype(np.float32),
                reward=rng.normal(size=n).astype(np.float32),
                next_observation=rng.normal(size=(n, 5)).astype(np.float32),
                terminated=rng.random(n) < 0.2,
                truncated=rng.random(n) < 0.2,
                discount=np.where(rng.random(n) < 0.5, 0.99, 0.99**2).astype(
                    np.float32
                ),
                n_steps=np.ones(n, np.int64),
                indices=np.arange(n),
                weights=rng.uniform(0.5, 1.5, n).astype(np.float32),
            )
        )
    return batches


def _numpy_state(module) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


def _pair(policy_delay: int, learn_alpha: bool, max_grad_norm: float | None):
    torch.manual_seed(0)
    torch_agent = torch_agents.build_sac_agent(OBS, ACT, hidden_sizes=HIDDEN)
    alpha = torch_algos.EntropyCoefficient(0.5, learn=learn_alpha)
    optimizer = torch.optim.Adam(
        [
            {"params": torch_agent.actor.parameters(), "lr": 3e-3},
            {"params": torch_agent.critic.parameters(), "lr": 1e-2},
            *([{"params": [alpha.log_alpha], "lr": 1e-2}] if learn_alpha else []),
        ]
    )
    torch_sac = torch_algos.SAC(
        torch_agent,
        optimizer,
        alpha,
        tau=0.1,
        policy_delay=policy_delay,
        max_grad_norm=max_grad_norm,
    )
    agent = build_sac_agent(OBS, ACT, seed=1, hidden_sizes=HIDDEN)
    agent.actor_params = params_from_torch(_numpy_state(torch_agent.actor))
    agent.critic_params = twin_q_from_torch(_numpy_state(torch_agent.critic))
    optimizers = build_sac_optimizers(
        1e-2, actor_learning_rate=3e-3, alpha_learning_rate=1e-2
    )
    sac = SAC(
        agent,
        optimizers,
        EntropyCoefficient(0.5, learn=learn_alpha),
        seed=0,
        tau=0.1,
        policy_delay=policy_delay,
        max_grad_norm=max_grad_norm,
    )
    return torch_sac, sac


def _torch_noise(seed: int, draws: int) -> np.ndarray:
    """The noise the torch update draws from the global RNG after
    ``torch.manual_seed(seed)``: the target's, then each actor step's."""
    torch.manual_seed(seed)
    return np.stack([torch.randn(BATCH, 3).numpy() for _ in range(draws)])


def _assert_close(jax_tree, torch_state, what):
    for name, value in torch_state.items():
        np.testing.assert_allclose(
            jax_tree[name], value, rtol=2e-4, atol=2e-5, err_msg=f"{what} {name}"
        )


@pytest.mark.parametrize(
    "policy_delay, learn_alpha, max_grad_norm",
    [
        (1, True, None),
        pytest.param(2, True, 0.5, marks=pytest.mark.slow),
        pytest.param(1, False, None, marks=pytest.mark.slow),
    ],
)
def test_jax_updates_give_torch_parameters(policy_delay, learn_alpha, max_grad_norm):
    torch_sac, sac = _pair(policy_delay, learn_alpha, max_grad_norm)
    batches = _batches(6)
    noises = []
    torch_metrics = []
    for update, batch in enumerate(batches):
        actor_steps = policy_delay if update % policy_delay == 0 else 0
        noise = np.zeros((1 + policy_delay, BATCH, 3), np.float32)
        noise[: 1 + actor_steps] = _torch_noise(100 + update, 1 + actor_steps)
        noises.append(noise)
        torch.manual_seed(100 + update)
        torch_batch = ReplayBatch(*(torch.as_tensor(np.asarray(x)) for x in batch))
        torch_metrics.append(torch_sac.update(torch_batch))
    # the six JAX updates in two compiled calls of three
    metrics = [
        sac.update_batches(
            ReplayArrays.stack(batches[i : i + 3], np.float32),
            np.stack(noises[i : i + 3]),
        )
        for i in (0, 3)
    ]
    _assert_close(
        params_to_torch(sac.agent.actor_params),
        _numpy_state(torch_sac.agent.actor),
        "actor",
    )
    _assert_close(
        twin_q_to_torch(sac.agent.critic_params),
        _numpy_state(torch_sac.agent.critic),
        "critic",
    )
    _assert_close(
        twin_q_to_torch(sac.target_critic),
        _numpy_state(torch_sac.target_critic),
        "target critic",
    )
    assert sac.alpha == pytest.approx(torch_sac.alpha, rel=1e-5)
    assert sac.updates_done == torch_sac.updates_done == 6
    # per-update metrics agree too
    for key in ("q1_loss", "q2_loss", "q1", "target_q", "alpha"):
        jax_values = np.concatenate([m[key] for m in metrics])
        torch_values = [m[key] for m in torch_metrics]
        np.testing.assert_allclose(jax_values, torch_values, rtol=1e-4, atol=1e-5)
    stepped = np.concatenate([m["actor_stepped"] for m in metrics])
    assert stepped.tolist() == ["pi_loss" in m for m in torch_metrics]
    np.testing.assert_allclose(
        np.concatenate([m["pi_loss"] for m in metrics])[stepped],
        [m["pi_loss"] for m in torch_metrics if "pi_loss" in m],
        rtol=1e-4,
        atol=1e-5,
    )
