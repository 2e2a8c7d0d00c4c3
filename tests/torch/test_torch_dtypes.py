"""The dtype policy: the tree keeps the env's dtype, models cast their input.

Gymnasium's MuJoCo envs return float64 observations; the models of
parllel.torch.models take any input dtype and compute in their own (float32
unless converted). ``observation_dtype`` stores another floating dtype in
the tree, the cages casting as they write.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel import fields
from parllel.agents.base import AgentStep
from parllel.builders import add_obs_normalization, build_replay_tree, build_sample_tree
from parllel.cages import CageOptions, SerialCage
from parllel.errors import ConfigError, DtypeError
from parllel.samplers import FeedForwardSampler
from parllel.torch import TorchHandler
from parllel.torch.agents import ActorCriticAgent, build_sac_agent
from parllel.torch.models import build_actor_critic
from parllel.torch.models.cnn import CnnEncoder
from parllel.torch.models.dtypes import to_model_dtype
from parllel.torch.models.encoders import FlattenEncoder, OneHotEncoder, build_encoder

DTYPES = [torch.float64, torch.float32, torch.float16, torch.int64, torch.uint8]


class Float64Env(gym.Env):
    """Box(3) float64 observations (as MuJoCo's), Box(2) actions; ends at step 5."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float64)
    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._observation(), {}

    def _observation(self) -> np.ndarray:
        # a value float32 cannot hold exactly: the cast is visible
        return np.full(3, self.t + 1 / 3, np.float64)

    def step(self, action):
        self.t += 1
        return self._observation(), 1.0, False, self.t >= 5, {}


class MixedEnv(Float64Env):
    """Dict observations: a float64 Box and a Discrete."""

    observation_space = gym.spaces.Dict(
        {"x": Float64Env.observation_space, "k": gym.spaces.Discrete(4)}
    )

    def _observation(self):
        return {"x": super()._observation(), "k": np.int64(self.t % 4)}


@settings(max_examples=30, deadline=None)
@given(
    shape=st.lists(st.integers(1, 3), min_size=0, max_size=3),
    lead=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    dtype=st.sampled_from(DTYPES),
    model_dtype=st.sampled_from([torch.float32, torch.float64]),
)
def test_flatten_encoder_gives_the_model_dtype_whatever_the_input(
    shape, lead, dtype, model_dtype
):
    encoder = FlattenEncoder(shape).to(model_dtype)
    observation = torch.arange(np.prod(lead + shape), dtype=torch.float64)
    observation = observation.reshape(tuple(lead + shape)).to(dtype)
    features = encoder(observation)
    assert features.dtype == model_dtype
    assert features.shape == (*lead, int(np.prod(shape)))
    np.testing.assert_array_equal(
        features.double().numpy(), observation.double().reshape(features.shape).numpy()
    )


def test_an_input_already_in_the_model_dtype_is_not_copied():
    observation = torch.zeros(4, 3)
    assert FlattenEncoder((3,))(observation).data_ptr() == observation.data_ptr()
    reference = torch.empty(0, dtype=torch.float64)
    cast = to_model_dtype(observation, reference)
    assert cast.dtype == torch.float64
    assert to_model_dtype(cast, reference) is cast


def test_every_encoder_follows_the_model_through_double():
    one_hot = OneHotEncoder(3)
    assert one_hot(torch.tensor([0, 2])).dtype == torch.float32
    assert one_hot.double()(torch.tensor([0, 2])).dtype == torch.float64
    cnn = CnnEncoder((1, 8, 8), channels=(2,), kernel_sizes=(3,), strides=(1,))
    images = torch.rand(2, 1, 8, 8, dtype=torch.float64)
    assert cnn(images).dtype == torch.float32
    assert cnn(torch.zeros(2, 1, 8, 8, dtype=torch.uint8)).dtype == torch.float32
    assert cnn.double()(images.float()).dtype == torch.float64
    encoder = build_encoder(MixedEnv.observation_space)
    features = encoder(
        {"x": torch.zeros(2, 3, dtype=torch.float64), "k": torch.tensor([1, 3])}
    )
    assert features.dtype == torch.float32 and features.shape == (2, 7)


def test_the_dtype_reference_is_not_in_state_dicts():
    model, _ = build_actor_critic(Float64Env.observation_space, Float64Env.action_space)
    assert not any("dtype_reference" in key for key in model.state_dict())
    fresh, _ = build_actor_critic(Float64Env.observation_space, Float64Env.action_space)
    fresh.load_state_dict(model.state_dict())  # strict: same keys as ever


def test_actor_critic_and_sac_models_take_float64_observations():
    observation = torch.rand(5, 3, dtype=torch.float64)
    model, _ = build_actor_critic(Float64Env.observation_space, Float64Env.action_space)
    out = model(observation)
    assert out.value.dtype == torch.float32
    assert model.double()(observation.float()).value.dtype == torch.float64
    agent = build_sac_agent(Float64Env.observation_space, Float64Env.action_space)
    action = torch.rand(5, 2, dtype=torch.float64)
    q1, q2 = agent.critic(observation, action)
    assert q1.dtype == q2.dtype == torch.float32


def test_a_float64_env_builds_its_sample_tree_and_samples():
    """Regression: build_sample_tree -> example_outputs raised torch's "mat1
    and mat2 must have the same dtype" for float64 observations."""
    with SerialCage(Float64Env, 2, options=CageOptions(seed=0)) as cage:
        model, distribution = build_actor_critic(
            cage.spaces.observation, cage.spaces.action
        )
        handler = TorchHandler(ActorCriticAgent(model, distribution), 2)
        tree = build_sample_tree(cage, handler, 4)
        try:
            assert tree[fields.OBSERVATION].dtype == np.float64  # the env's dtype
            normalizer = add_obs_normalization(tree)
            sampler = FeedForwardSampler(
                cage, handler, tree, observation_normalizer=normalizer
            )
            batch, _ = sampler.collect_batch()
            assert np.isfinite(np.asarray(batch[fields.AGENT_INFO]["value"])).all()
        finally:
            tree.close()


@pytest.mark.parametrize("env", [Float64Env, MixedEnv])
def test_observation_dtype_stores_float32_cast_by_the_cage(env):
    with SerialCage(env, 2, options=CageOptions(seed=0)) as cage:
        agent = build_sac_agent(
            gym.spaces.Box(-1, 1, (3,), np.float32)
            if env is Float64Env
            else cage.spaces.observation,
            cage.spaces.action,
            hidden_sizes=(8,),
        )
        handler = TorchHandler(agent, 2)
        tree = build_sample_tree(
            cage, handler, 6, final_observation=True, observation_dtype=np.float32
        )
        replay = build_replay_tree(cage, handler, 6, 12, observation_dtype=np.float32)
        try:
            observation = tree[fields.OBSERVATION]
            x = observation if env is Float64Env else observation["x"]
            final = tree[fields.FINAL_OBSERVATION]
            final_x = final if env is Float64Env else final["x"]
            assert x.dtype == final_x.dtype == np.float32
            replay_x = replay[fields.OBSERVATION]
            replay_x = replay_x if env is Float64Env else replay_x["x"]
            assert replay_x.dtype == np.float32
            if env is MixedEnv:
                assert observation["k"].dtype == np.int64  # integers keep theirs
            FeedForwardSampler(cage, handler, tree).collect_batch()
            # t + 1/3, rounded to float32 as the cage wrote it; step 5 ends
            # the episode: its last observation is the final one, row 5 a reset
            for t in range(1, 5):
                assert (np.asarray(x[t]) == np.float32(t + 1 / 3)).all()
            assert (np.asarray(final_x[4]) == np.float32(5 + 1 / 3)).all()
            assert (np.asarray(x[5]) == np.float32(1 / 3)).all()
        finally:
            tree.close()
            replay.close()


def test_observation_dtype_must_be_floating():
    with SerialCage(Float64Env, 1, options=CageOptions(seed=0)) as cage:
        handler = TorchHandler(
            build_sac_agent(cage.spaces.observation, cage.spaces.action), 1
        )
        with pytest.raises(ConfigError, match="observation_dtype must be a floating"):
            build_sample_tree(cage, handler, 2, observation_dtype=np.int32)


class _RawLinearAgent:
    """An agent whose model reads observations with a bare Linear (no encoder)."""

    def __init__(self) -> None:
        self.linear = torch.nn.Linear(3, 2)

    def step(self, observation, prev_action, prev_reward, state=None):
        return AgentStep(self.linear(observation), {}, None)

    def initial_state(self, n_envs):
        return None

    def set_mode(self, mode):
        pass


def test_a_model_without_encoders_gets_a_parllel_hint():
    handler = TorchHandler(_RawLinearAgent(), 1)
    with pytest.raises(DtypeError, match="float64.*cast them itself"):
        handler.example_outputs(np.zeros(3, np.float64))
