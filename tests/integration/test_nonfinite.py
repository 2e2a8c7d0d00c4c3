"""Non-finite values: the samplers' batch check, the algorithms' loss check, and
the runner refusing to checkpoint NaN weights."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from parllel import fields
from parllel.agents import NumpyHandler, RandomAgent
from parllel.builders import build_alternating_cages, build_sample_tree
from parllel.cages import CageOptions, ProcessCage, ProcessLayout, SerialCage, TrajInfo
from parllel.checkpoints.checkpoint import (
    checkpoint_step,
    list_checkpoints,
    load_checkpoint,
)
from parllel.errors import (
    ConfigError,
    NonFiniteError,
)
from parllel.runners import OnPolicyRunner
from parllel.samplers import AlternatingSampler, FeedForwardSampler, RecurrentSampler
from parllel.seeding import Seeds
from parllel.timing import PhaseTimes
from parllel.torch.agents.sac_agent import SacAgent
from parllel.torch.algos import adam
from parllel.torch.algos.dqn import DQN
from parllel.torch.algos.sac import SAC, EntropyCoefficient, build_sac_optimizer
from parllel.transforms.functional import first_nonfinite
from tests.torch.test_torch_dqn import _batch as dqn_batch
from tests.torch.test_torch_dqn import _linear_agent
from tests.torch.test_torch_ppo import _make, _rollout
from tests.torch.test_torch_sac import FixedPolicy, LinearCritic, MeanActor
from tests.torch.test_torch_sac import _batch as sac_batch

T, N_ENVS = 6, 4
SEEDS = Seeds.from_master(0, n_envs=N_ENVS)


# -- the kernel ---------------------------------------------------------------
def reference_first_nonfinite(array: np.ndarray):
    flat = array.reshape(array.shape[:2] + (int(np.prod(array.shape[2:])),))
    bad = np.argwhere(~np.isfinite(flat))
    if not len(bad):
        return None
    t, b, n = (int(i) for i in bad[0])
    return t, b, tuple(int(i) for i in np.unravel_index(n, array.shape[2:]))


@settings(max_examples=200, deadline=None)
@given(
    array=hnp.arrays(
        st.sampled_from([np.float16, np.float32, np.float64]),
        hnp.array_shapes(min_dims=2, max_dims=4, min_side=0, max_side=5),
        elements=st.sampled_from([0.0, -1.5, 3e4, np.nan, np.inf, -np.inf]),
    ),
    transpose=st.booleans(),
)
def test_first_nonfinite_matches_numpy(array, transpose):
    if transpose and array.ndim == 4:  # non-contiguous feature dims
        array = array.transpose(0, 1, 3, 2)
    assert first_nonfinite(array) == reference_first_nonfinite(array)


def test_integer_data_is_never_non_finite():
    assert first_nonfinite(np.full((3, 2, 4), 255, np.uint8)) is None


# -- the sampler check ----------------------------------------------------------
class GlitchEnv(gym.Env):
    """Observation ``[steps since reset, 0, 1]``; the env seeded with
    ``bad_seed`` returns a NaN observation (or an infinite reward, or a NaN
    reset observation) at its step ``at``."""

    def __init__(
        self,
        bad_seed: int = -1,
        at: int = 3,
        what: str = "observation",
        dict_obs=False,
        width: int = 3,
    ) -> None:
        box = gym.spaces.Box(-np.inf, np.inf, (width,), np.float32)
        counter = gym.spaces.Box(0, 10**6, (1,), np.int64)
        self.observation_space = (
            gym.spaces.Dict({"position": box, "count": counter}) if dict_obs else box
        )
        self.action_space = gym.spaces.Discrete(2)
        self.bad_seed, self.at, self.what, self.dict_obs = bad_seed, at, what, dict_obs
        self.width = width
        self.bad = False
        self.t = 0

    def _observation(self, value: float) -> Any:
        position = np.ones(self.width, np.float32)
        position[:2] = value, 0.0
        if self.dict_obs:
            return {"position": position, "count": np.array([self.t], np.int64)}
        return position

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.bad = seed == self.bad_seed
        self.t = 0
        glitch = self.bad and self.what == "reset"
        return self._observation(np.nan if glitch else 0.0), {}

    def step(self, action):
        self.t += 1
        glitch = self.bad and self.t == self.at
        value = np.nan if glitch and self.what == "observation" else float(self.t)
        reward = np.inf if glitch and self.what == "reward" else 1.0
        return self._observation(value), reward, False, self.t >= 1000, {}


def make_sampler(cages, sampler_type=FeedForwardSampler, **kwargs):
    cages = cages if isinstance(cages, list) else [cages]
    n = sum(c.n_envs for c in cages)
    handler = NumpyHandler(RandomAgent(cages[0].spaces.action, seed=0), n)
    tree = build_sample_tree(cages, handler, T)
    return sampler_type(cages, handler, tree, **kwargs), tree


def glitch(bad_env: int = 2, **kwargs):
    return dict(bad_seed=SEEDS.envs[bad_env], **kwargs)


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize(
    "what, at, field, step",
    [
        ("observation", 3, "observation", 2),  # obs of the 3rd step: row 3
        ("reward", 3, "reward", 2),
        ("reset", 3, "observation", -1),
        ("observation", T + 2, "observation", 1),  # in the second batch
    ],
)
def test_sampler_names_env_and_step(parallel, what, at, field, step):
    kwargs = glitch(what=what, at=at)
    if parallel:
        cage = ProcessCage(
            GlitchEnv,
            N_ENVS,
            kwargs,
            options=CageOptions(seed=SEEDS.envs),
            layout=ProcessLayout(n_workers=2),
            start_method="fork",
        )
    else:
        cage = SerialCage(
            GlitchEnv, N_ENVS, kwargs, options=CageOptions(seed=SEEDS.envs)
        )
    with cage:
        sampler, tree = make_sampler(cage)
        with tree:
            if at > T:
                sampler.collect_batch()  # the first batch is clean
            with pytest.raises(NonFiniteError) as caught:
                sampler.collect_batch()
    message = str(caught.value)
    where = (
        "at the start of the batch" if step == -1 else f"in step {step} of the batch"
    )
    assert f"env 2 returned a non-finite {field}" in message and where in message
    assert "check_finite=False" in message


def test_env_index_across_cages_and_tree_observations():
    kwargs = glitch(bad_env=3, dict_obs=True)
    cages = [
        SerialCage(GlitchEnv, 2, kwargs, options=CageOptions(seed=SEEDS.envs[:2])),
        SerialCage(
            GlitchEnv, 2, kwargs, options=CageOptions(seed=SEEDS.envs[2:], env_offset=2)
        ),
    ]
    sampler, tree = make_sampler(cages)
    with tree:
        with pytest.raises(NonFiniteError, match=r"observation\.position\[3, 3, 0\]"):
            sampler.collect_batch()
    for cage in cages:
        cage.close()


def test_check_finite_false_lets_nan_through():
    with SerialCage(
        GlitchEnv, N_ENVS, glitch(), options=CageOptions(seed=SEEDS.envs)
    ) as cage:
        sampler, tree = make_sampler(cage, check_finite=False)
        with tree:
            batch, _ = sampler.collect_batch()
            assert np.isnan(batch[fields.OBSERVATION][3, 2, 0])
            assert sampler.finite_check is None


@pytest.mark.parametrize("check_finite, caught", [("auto", False), (True, True)])
def test_auto_skips_large_float_observations(check_finite, caught):
    """``"auto"`` (the default) checks float observations of at most 1024 values
    per step; a larger one (a float image) only with check_finite=True."""
    kwargs = glitch(width=1025)
    with SerialCage(
        GlitchEnv, N_ENVS, kwargs, options=CageOptions(seed=SEEDS.envs)
    ) as cage:
        sampler, tree = make_sampler(cage, check_finite=check_finite)
        with tree:
            if caught:
                with pytest.raises(NonFiniteError, match="env 2"):
                    sampler.collect_batch()
            else:
                batch, _ = sampler.collect_batch()
                assert np.isnan(batch[fields.OBSERVATION][3, 2, 0])


def test_a_bad_check_finite_value_is_a_config_error():
    with SerialCage(GlitchEnv, N_ENVS, options=CageOptions(seed=SEEDS.envs)) as cage:
        with pytest.raises(ConfigError, match="check_finite"):
            make_sampler(cage, check_finite="yes")


def test_recurrent_and_alternating_samplers_check_too():
    with SerialCage(
        GlitchEnv, N_ENVS, glitch(what="reward"), options=CageOptions(seed=SEEDS.envs)
    ) as cage:
        sampler, tree = make_sampler(cage, RecurrentSampler)
        with tree, pytest.raises(NonFiniteError, match="reward"):
            sampler.collect_batch()
    cages = build_alternating_cages(
        GlitchEnv, N_ENVS, glitch(), options=CageOptions(seed=SEEDS.envs), share_core=False,
        start_method="fork",
    )  # fmt: skip
    try:
        sampler, tree = make_sampler(cages, AlternatingSampler)
        with tree, pytest.raises(NonFiniteError) as caught:
            sampler.collect_batch()
        assert "env 2 returned" in str(caught.value)
    finally:
        for cage in cages:
            cage.close()


# -- the algorithms ---------------------------------------------------------------
def snapshot(*modules) -> list[torch.Tensor]:
    return [p.detach().clone() for m in modules for p in m.parameters()]


def assert_unchanged(before: list[torch.Tensor], *modules) -> None:
    after = snapshot(*modules)
    assert all(torch.equal(a, b) for a, b in zip(before, after))


def test_ppo_stops_before_a_non_finite_step():
    model, dist, ppo = _make(epochs=2, minibatches=1)
    ppo.optimize(_rollout(model, dist))  # a good update first
    batch = _rollout(model, dist, seed=1)
    batch[fields.ADVANTAGE][5, 1] = float("nan")
    before = snapshot(model)
    with pytest.raises(NonFiniteError, match="PPO update 1: non-finite loss"):
        ppo.optimize(batch)
    assert_unchanged(before, model)
    # with minibatches, those before the bad one were applied: finite weights
    model, dist, ppo = _make(minibatches=4)
    batch = _rollout(model, dist, T=8, B=4)
    batch[fields.ADVANTAGE][7, 3] = float("nan")  # in one of the minibatches
    with pytest.raises(NonFiniteError):
        ppo.optimize(batch)
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_dqn_stops_before_a_non_finite_step():
    agent = _linear_agent()
    dqn = DQN(agent, adam(agent.q_network.parameters(), 1e-3), target_update_interval=1)
    before = snapshot(agent.q_network)
    reward = torch.tensor([1.0, float("inf"), 3.0, 4.0])
    with pytest.raises(NonFiniteError, match="DQN update 0") as caught:
        dqn.update(dqn_batch(reward=reward))
    assert caught.value.terms == ("loss",)  # Huber: finite gradient, infinite loss
    assert_unchanged(before, agent.q_network)
    assert dqn.updates_done == 0


def test_sac_stops_before_a_non_finite_step():
    agent = SacAgent(MeanActor(), LinearCritic(), FixedPolicy())
    alpha = EntropyCoefficient(0.5)
    sac = SAC(agent, build_sac_optimizer(agent, alpha), alpha, max_grad_norm=10.0)
    before = snapshot(agent.actor, agent.critic, sac.target_critic)
    log_alpha = sac.log_alpha.detach().clone()
    reward = torch.tensor([1.0, float("nan"), 3.0, 4.0])
    with pytest.raises(NonFiniteError, match="SAC update 0") as caught:
        sac.update(sac_batch(reward=reward))
    assert {"q1_loss", "q2_loss"} <= set(caught.value.terms)
    assert_unchanged(before, agent.actor, agent.critic, sac.target_critic)
    assert torch.equal(sac.log_alpha.detach(), log_alpha)


# -- the runner -------------------------------------------------------------------
class PPOBatches:
    """A fake sampler serving PPO rollouts; batch ``nan_at`` (1-based) has a NaN advantage."""

    def __init__(self, model, dist, nan_at: int) -> None:
        self.model, self.dist, self.nan_at = model, dist, nan_at
        self.batches = 0
        self.sample_tree = {fields.REWARD: np.zeros((8, 4), np.float32)}
        self.phase_times = PhaseTimes()
        self.action_generator = None

    def reset(self) -> None:
        pass

    def collect_batch(self):
        self.batches += 1
        batch = _rollout(self.model, self.dist, seed=self.batches)
        if self.batches == self.nan_at:
            batch[fields.ADVANTAGE][0, 0] = float("nan")
        return batch, [TrajInfo(env_index=0, length=8, return_=1.0)]


class DivergingAlgorithm:
    """Its model's weights turn to NaN (finite loss or not) at call ``nan_at``."""

    def __init__(self, model: torch.nn.Module, nan_at: int) -> None:
        self.model, self.nan_at, self.calls = model, nan_at, 0

    def optimize(self, batch, progress: float) -> dict[str, float]:
        self.calls += 1
        with torch.no_grad():
            for p in self.model.parameters():
                p.add_(float("nan") if self.calls == self.nan_at else 0.01)
        return {}

    def state_dict(self) -> dict:
        return {"calls": self.calls}

    def load_state_dict(self, state: dict) -> None:
        self.calls = state["calls"]


def assert_newest_checkpoint_is(directory, step: int, model) -> None:
    newest = list_checkpoints(directory)[-1]
    assert checkpoint_step(newest) == step
    saved = load_checkpoint(newest)["objects"]["model"]
    assert all(torch.isfinite(v).all() for v in saved.values())
    return saved


def test_non_finite_loss_stops_training_and_keeps_the_last_good_checkpoint(tmp_path):
    model, dist, ppo = _make(epochs=2, minibatches=1)
    runner = OnPolicyRunner(
        PPOBatches(model, dist, nan_at=3), ppo, total_steps=10_000,
        checkpoint_dir=tmp_path, checkpoint_interval_steps=32,
        checkpoint_objects={"model": model, "ppo": ppo},
    )  # fmt: skip
    with pytest.raises(NonFiniteError):
        runner.run()
    saved = assert_newest_checkpoint_is(tmp_path, 64, model)
    for key, value in model.state_dict().items():  # no step was taken since
        assert torch.equal(saved[key], value)


def test_runner_never_checkpoints_nan_weights(tmp_path):
    model = torch.nn.Linear(2, 2)
    sampler = PPOBatches(*_make()[:2], nan_at=-1)
    runner = OnPolicyRunner(
        sampler, DivergingAlgorithm(model, nan_at=3), total_steps=10_000,
        checkpoint_dir=tmp_path, checkpoint_interval_steps=32,
        checkpoint_objects={"model": model},
    )  # fmt: skip
    with pytest.raises(NonFiniteError, match="model.weight, model.bias"):
        runner.run()
    assert_newest_checkpoint_is(tmp_path, 64, model)
    with pytest.raises(NonFiniteError, match="is the last good one"):
        runner.save()
    assert checkpoint_step(list_checkpoints(tmp_path)[-1]) == 64
