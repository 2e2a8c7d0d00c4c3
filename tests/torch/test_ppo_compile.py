"""PPO(compile=...): the compiled minibatch step computes what the eager one does."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from parllel import fields
from parllel.schedules import linear_schedule
from parllel.torch.algos import PPO, ActorCriticEvaluator
from parllel.torch.models import build_actor_critic


def _ppo(compile: bool | str) -> tuple[torch.nn.Module, PPO]:
    torch.manual_seed(0)
    model, distribution = build_actor_critic(
        gym.spaces.Box(-1, 1, (3,), np.float32),
        gym.spaces.Box(-1, 1, (2,), np.float32),
        hidden_sizes=(16,),
    )
    ppo = PPO(
        ActorCriticEvaluator(model, distribution),
        torch.optim.Adam(model.parameters(), lr=1e-2),
        learning_rate=linear_schedule(1e-2, 0.0),
        clip_range=linear_schedule(0.2, 0.1),
        value_clip_range=0.2,
        total_updates=4,
        epochs=2,
        minibatches=2,
        normalize_advantage=True,
        compile=compile,
    )
    return model, ppo


def _batch(T: int = 8, B: int = 4) -> dict:
    rng = np.random.default_rng(0)

    def normal(*shape: int) -> np.ndarray:
        return rng.normal(size=(T, B, *shape)).astype(np.float32)

    return {
        fields.OBSERVATION: normal(3),
        fields.ACTION: np.tanh(normal(2)),
        fields.ADVANTAGE: normal(),
        fields.RETURN: normal(),
        fields.AGENT_INFO: {fields.LOG_PROB: normal() - 2, fields.VALUE: normal()},
    }


def test_compiled_updates_match_eager_ones_under_schedules() -> None:
    batch = _batch()
    eager_model, eager = _ppo(compile=False)
    compiled_model, compiled = _ppo(compile="eager")  # dynamo traces, no codegen
    for _ in range(3):
        torch.manual_seed(1)  # the same minibatch order on both sides
        expected = eager.optimize(batch)
        torch.manual_seed(1)
        metrics = compiled.optimize(batch)
        for name in ("policy_loss", "value_loss", "grad_norm", "learning_rate"):
            # float32 tolerance: the compiled step's learning rate is a float32 tensor
            np.testing.assert_allclose(metrics[name], expected[name], rtol=1e-5)
    for got, want in zip(compiled_model.parameters(), eager_model.parameters()):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    # the schedule sets the compiled optimizer's tensor learning rate in place
    (group,) = compiled.optimizer.param_groups
    assert isinstance(group["lr"], torch.Tensor)
    assert float(group["lr"]) == np.float32(expected["learning_rate"])
    assert expected["learning_rate"] == 1e-2 * (1 - 2 / 4)


def test_a_compiled_ppo_resumed_from_an_eager_state_keeps_tensor_rates() -> None:
    _, eager = _ppo(compile=False)
    eager.optimize(_batch())
    _, compiled = _ppo(compile="eager")
    compiled.load_state_dict(eager.state_dict())
    (group,) = compiled.optimizer.param_groups
    assert isinstance(group["lr"], torch.Tensor)
    assert float(group["lr"]) == np.float32(eager.optimizer.param_groups[0]["lr"])
    compiled.optimize(_batch())
    assert compiled.updates_done == 2
