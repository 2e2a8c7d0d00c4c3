"""Resume: a run stopped after a checkpoint and resumed ends bit-identical to an
uninterrupted one (counters, schedules, normalizer statistics, model weights,
optimizer, RNG); mismatching checkpoints fail with CheckpointMismatchError.

The fake sampler draws observations from numpy's global RNG and feeds a real
:class:`~parllel.transforms.NormalizeObservations`; the fake learner takes SGD
steps on a real torch model with noise from torch's RNG, so any state the
checkpoint forgot would change the final weights.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from parllel import fields
from parllel.cages import CageOptions, TrajInfo
from parllel.errors import CheckpointError, CheckpointMismatchError
from parllel.runners import OnPolicyRunner, RunDirectory
from tests.helpers.resume_fakes import NormalizedSampler, OptimizerState, StopAt

pytestmark = pytest.mark.timeout(60)

T, B, OBS = 8, 4, 3  # 32 env steps per batch
TOTAL, STOP = 320, 160
CONFIG = {"n_envs": B, "batch_T": T, "hidden": 5, "total_steps": TOTAL}


class NoiseSampler(NormalizedSampler):
    """Fills ``observation`` with random numbers and normalizes them."""

    def __init__(self) -> None:
        super().__init__(T, B, OBS)
        self.resets = 0

    def collect_batch(self) -> tuple[dict, list[TrajInfo]]:
        observation = self.normalized(np.random.normal(3.0, 2.0, self.shape))
        episode = TrajInfo(length=T, return_=float(observation.sum()))
        return self.sample_tree, [episode]

    def reset(self) -> None:
        self.resets += 1


class GeneratorSampler(NoiseSampler):
    """Draws its observations from its handler's torch generator, as an
    agent given ``TorchHandler(..., seed=...)`` draws its actions."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.handler = SimpleNamespace(generator=torch.Generator().manual_seed(seed))
        self.action_generator = self.handler.generator

    def collect_batch(self) -> tuple[dict, list[TrajInfo]]:
        noise = torch.randn(self.shape, generator=self.handler.generator).numpy()
        observation = self.normalized(noise)
        return self.sample_tree, [TrajInfo(length=T, return_=float(observation.sum()))]


class NoisyLearner(OptimizerState):
    """Adam steps on a small model; the loss includes torch RNG noise."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    def optimize(self, batch: dict, progress: float) -> dict[str, float]:
        for group in self.optimizer.param_groups:
            group["lr"] = 1e-2 * (1.0 - progress)  # a schedule
        observation = torch.from_numpy(batch[fields.OBSERVATION])
        target = torch.randn(T, B, 1)
        loss = (self.model(observation) - target).pow(2).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return {"loss": float(loss.detach())}


def build(
    checkpoint_dir,
    seed: int,
    hidden: int = 5,
    config=CONFIG,
    callbacks=(),
    with_generator: bool = False,
):
    """A fresh run: RNGs seeded with ``seed``, fresh model and statistics."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    model = nn.Sequential(nn.Linear(OBS, hidden), nn.Tanh(), nn.Linear(hidden, 1))
    sampler = GeneratorSampler(seed) if with_generator else NoiseSampler()
    learner = NoisyLearner(model)
    runner = OnPolicyRunner(
        sampler,
        learner,
        TOTAL,
        log_interval_steps=64,
        checkpoint_dir=checkpoint_dir,
        checkpoint_interval_steps=96,
        checkpoint_objects={
            "model": model,
            "learner": learner,
            "observation_normalizer": sampler.normalizer,
        },
        config=config,
        config_keys=["n_envs", "batch_T", "hidden"],
        callbacks=list(callbacks),
    )
    return runner, model, sampler


def _normalizer_state(sampler: NoiseSampler) -> dict:
    return sampler.normalizer.state_dict()[""]


def test_resumed_run_equals_uninterrupted_run(tmp_path):
    full, full_model, full_sampler = build(tmp_path / "full", seed=0)
    full_summary = full.run()

    # the same run, stopped after STOP steps (its last act: a checkpoint) ...
    first, _, _ = build(tmp_path / "split", seed=0, callbacks=[StopAt(STOP)])
    first.run()
    assert first.env_steps == STOP
    # ... and resumed in fresh objects with other weights and RNG states
    resumed, model, sampler = build(tmp_path / "split", seed=123)
    resumed.load(tmp_path / "split")
    assert sampler.resets == 1  # envs are reset on resume
    assert (resumed.env_steps, resumed.updates) == (STOP, STOP // (T * B))
    assert resumed.train_stats.episodes == STOP // (T * B)
    summary = resumed.run()

    assert resumed.env_steps == full.env_steps == TOTAL
    assert resumed.updates == full.updates
    for name, value in full_model.state_dict().items():
        assert torch.equal(model.state_dict()[name], value), name
    saved, restored = _normalizer_state(full_sampler), _normalizer_state(sampler)
    assert saved.keys() == restored.keys()
    for key in saved:
        np.testing.assert_array_equal(np.asarray(restored[key]), saved[key])
    assert resumed.train_stats.state_dict() == full.train_stats.state_dict()
    assert summary["algo/loss"] == full_summary["algo/loss"]


def test_the_handlers_generator_resumes_where_it_stopped(tmp_path):
    """The sampler's handler's generator (the actions' stream) is in the RNG
    snapshot: the resumed run draws what the uninterrupted one drew."""
    full, full_model, _ = build(tmp_path / "full", seed=0, with_generator=True)
    full.run()
    first, _, _ = build(
        tmp_path / "split", seed=0, callbacks=[StopAt(STOP)], with_generator=True
    )
    first.run()
    resumed, model, sampler = build(tmp_path / "split", seed=123, with_generator=True)
    resumed.load(tmp_path / "split")
    resumed.run()
    for name, value in full_model.state_dict().items():
        assert torch.equal(model.state_dict()[name], value), name
    # a checkpoint of a run without one cannot restore it
    plain, _, _ = build(tmp_path / "plain", seed=0)
    plain.run()
    other, _, _ = build(tmp_path / "plain", seed=0, with_generator=True)
    with pytest.raises(CheckpointMismatchError, match="actions"):
        other.load(tmp_path / "plain")


def test_load_restores_weights_and_statistics_exactly(tmp_path):
    runner, model, sampler = build(tmp_path, seed=0)
    runner.run()
    restored, model2, sampler2 = build(tmp_path, seed=7)
    assert not torch.equal(model2[0].weight, model[0].weight)
    restored.load(tmp_path)
    for name, value in model.state_dict().items():
        assert torch.equal(model2.state_dict()[name], value), name
    state, state2 = _normalizer_state(sampler), _normalizer_state(sampler2)
    for key in state:
        np.testing.assert_array_equal(np.asarray(state2[key]), state[key])
    assert restored.env_steps == TOTAL
    # nothing left to do: run() returns at once, no new steps
    restored.run()
    assert restored.env_steps == TOTAL


def test_resume_cadence_continues_on_the_same_grid(tmp_path):
    first, _, _ = build(tmp_path, seed=0, callbacks=[StopAt(STOP)])
    first.run()  # checkpoints at 96 and at the stop, 160
    resumed, _, _ = build(tmp_path, seed=0)
    resumed.load(tmp_path)
    saved = []
    resumed.save = lambda: saved.append(resumed.env_steps)  # type: ignore[method-assign]
    resumed.run()
    # the uninterrupted run checkpoints at 192 and 288 (multiples of 96), not
    # at 160 + 96 = 256; plus the final one
    assert saved == [192, 288, TOTAL]


def test_config_mismatch_names_the_key(tmp_path):
    first, _, _ = build(tmp_path, seed=0, callbacks=[StopAt(64)])
    first.run()
    other = {**CONFIG, "batch_T": 16, "total_steps": 10_000}
    resumed, _, _ = build(tmp_path, seed=0, config=other)
    with pytest.raises(CheckpointMismatchError, match="batch_T") as error:
        resumed.load(tmp_path)
    assert "total_steps" not in str(error.value)  # not in config_keys
    assert "8" in str(error.value) and "16" in str(error.value)


def test_model_shape_mismatch_names_the_parameter(tmp_path):
    first, _, _ = build(tmp_path, seed=0, callbacks=[StopAt(64)])
    first.run()
    # same config keys, but a model of another width
    resumed, _, _ = build(tmp_path, seed=0, hidden=7, config={**CONFIG})
    resumed.config_keys = ["n_envs", "batch_T"]
    with pytest.raises(CheckpointMismatchError) as error:
        resumed.load(tmp_path)
    message = str(error.value)
    assert "'0.weight'" in message and "(5, 3)" in message and "(7, 3)" in message


def test_missing_object_in_checkpoint(tmp_path):
    first, _, _ = build(tmp_path, seed=0, callbacks=[StopAt(64)])
    first.run()
    resumed, _, _ = build(tmp_path, seed=0)
    resumed.checkpoint_objects["replay"] = resumed.algorithm
    with pytest.raises(CheckpointError, match="replay"):
        resumed.load(tmp_path)


def test_resume_from_a_run_directory(tmp_path):
    run = RunDirectory.create(tmp_path, "fake", config=CONFIG)
    first, _, _ = build(run.checkpoints_dir, seed=0, callbacks=[StopAt(64)])
    first.run()
    reopened = RunDirectory.open(run.path)
    resumed, _, _ = build(reopened.checkpoints_dir, seed=0)
    resumed.load(reopened.path)  # a run directory finds checkpoints/
    reopened.record_resume(resumed.env_steps, reopened.latest_checkpoint())
    assert resumed.env_steps == 64
    assert reopened.read_metadata()["resumes"][0]["step"] == 64


def _train_cartpole_serial(seed: int, tmp_path) -> dict[str, torch.Tensor]:
    """Two PPO updates on CartPole with serial cages, everything from ``seed``."""
    import gymnasium as gym

    from parllel.builders import add_advantage_estimation
    from parllel.builders import build_sample_tree as allocate
    from parllel.cages import build_cage
    from parllel.samplers import FeedForwardSampler
    from parllel.seeding import Seeds, seed_everything
    from parllel.torch import TorchHandler
    from parllel.torch.agents import ActorCriticAgent
    from parllel.torch.algos import PPO, ActorCriticEvaluator
    from parllel.torch.models import build_actor_critic
    from parllel.transforms import Compose

    seeds = Seeds.from_master(seed, n_envs=4)
    seed_everything(seeds)
    cage = build_cage(
        lambda: gym.make("CartPole-v1"),
        4,
        parallel="serial",
        options=CageOptions(seed=seeds.master),
    )
    model, distribution = build_actor_critic(
        cage.spaces.observation, cage.spaces.action, hidden_sizes=(16,)
    )
    handler = TorchHandler(ActorCriticAgent(model, distribution), n_envs=4)
    tree = allocate(cage, handler, 16)
    sampler = FeedForwardSampler(
        cage,
        handler,
        tree,
        transform=Compose(add_advantage_estimation(tree, 0.99, 0.95)),
    )
    ppo = PPO(
        ActorCriticEvaluator(model, distribution),
        torch.optim.Adam(model.parameters(), lr=1e-3),
        epochs=2,
        minibatches=2,
    )
    runner = OnPolicyRunner(sampler, ppo, 128, checkpoint_dir=tmp_path)
    try:
        runner.run()
    finally:
        cage.close()
        tree.close()
    return {name: value.clone() for name, value in model.state_dict().items()}


def test_same_seed_same_training_with_serial_cages(tmp_path):
    first = _train_cartpole_serial(3, tmp_path / "a")
    second = _train_cartpole_serial(3, tmp_path / "b")
    other = _train_cartpole_serial(4, tmp_path / "c")
    assert all(torch.equal(first[name], second[name]) for name in first)
    assert not all(torch.equal(first[name], other[name]) for name in first)
