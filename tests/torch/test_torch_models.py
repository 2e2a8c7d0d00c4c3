"""Models: leading dims, recurrent resets, encoders, actor-critic composition."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel.errors import ConfigError, ShapeError
from parllel.torch.distributions import Categorical, Gaussian, SquashedGaussian
from parllel.torch.models import MLP, build_actor_critic
from parllel.torch.models.actor_critic import ActorCriticModel
from parllel.torch.models.cnn import CnnEncoder
from parllel.torch.models.encoders import (
    DictEncoder,
    FlattenEncoder,
    OneHotEncoder,
    build_encoder,
)
from parllel.torch.models.heads import CategoricalHead, GaussianHead, ValueHead
from parllel.torch.models.leading_dims import (
    flatten_leading_dims,
    infer_leading_dims,
    restore_leading_dims,
)
from parllel.torch.models.recurrent import RecurrentCore


def test_leading_dims_roundtrip():
    for shape, expected in [
        ((4,), (0, 1, 1)),
        ((3, 4), (1, 1, 3)),
        ((2, 3, 4), (2, 2, 3)),
    ]:
        x = torch.randn(shape)
        leading = infer_leading_dims(x, feature_ndim=1)
        assert tuple(leading) == expected
        flat = flatten_leading_dims(x, leading)  # [T * B, 4]
        assert flat.shape == (leading.T * leading.B, 4)
        restored = restore_leading_dims((flat, {"y": flat[:, 0]}), leading)
        assert restored[0].shape == shape
        assert restored[1]["y"].shape == shape[:-1]
    with pytest.raises(ShapeError):
        infer_leading_dims(torch.zeros(1, 2, 3, 4), feature_ndim=1)
    with pytest.raises(ShapeError):
        restore_leading_dims(
            torch.zeros(5, 2), infer_leading_dims(torch.zeros(3, 4), 1)
        )


def test_mlp_keeps_leading_dims_and_inits_output():
    mlp = MLP(4, (8, 8), output_size=3, output_init_scale=0.0)
    for shape in [(4,), (5, 4), (2, 5, 4)]:
        assert mlp(torch.randn(shape)).shape == (*shape[:-1], 3)
    assert torch.count_nonzero(mlp(torch.randn(7, 4))) == 0  # zero-gain output layer
    assert MLP(4, (8, 6)).output_size == 6
    with pytest.raises(ConfigError):
        MLP(4, (0,))
    with pytest.raises(ConfigError):
        MLP(4, (8,), output_init_scale=0.1)


def _separate_sequences(core, inputs, state, resets):
    """Reference: run each column's episodes as separate sequences from zeros."""
    T, B = resets.shape
    outputs = torch.zeros(T, B, core.hidden_size)
    for b in range(B):
        column_state = tuple(s[:, b : b + 1] for s in state)
        starts = [0] + [t for t in range(1, T) if resets[t, b]] + [T]
        for start, stop in zip(starts[:-1], starts[1:]):
            if resets[start, b]:
                column_state = core.initial_state(1)
            out, column_state = core(inputs[start:stop, b : b + 1], column_state)
            outputs[start:stop, b] = out[:, 0]
    return outputs


@settings(max_examples=15, deadline=None)
@given(
    cell=st.sampled_from(["lstm", "gru"]),
    num_layers=st.integers(1, 2),
    resets=st.lists(
        st.lists(st.booleans(), min_size=3, max_size=3), min_size=1, max_size=7
    ),
    seed=st.integers(0, 1000),
)
def test_recurrent_core_resets_equal_separate_sequences(cell, num_layers, resets, seed):
    torch.manual_seed(seed)
    core = RecurrentCore(4, 5, num_layers=num_layers, cell=cell)
    resets = torch.tensor(resets)  # [T, B]
    T, B = resets.shape
    inputs = torch.randn(T, B, 4)  # [T, B, F]
    state = tuple(torch.randn(num_layers, B, 5) for _ in range(core.num_states))
    with torch.no_grad():
        outputs, final = core(inputs, state, resets)
        expected = _separate_sequences(core, inputs, state, resets)
        torch.testing.assert_close(outputs, expected)
        # stepping one step at a time with the same resets gives the same state
        step_state = state
        for t in range(T):
            _, step_state = core(inputs[t : t + 1], step_state, resets[t : t + 1])
    for a, b in zip(final, step_state):
        torch.testing.assert_close(a, b)


def test_recurrent_core_fast_path_and_packing():
    core = RecurrentCore(3, 4, num_layers=2, cell="lstm")
    inputs = torch.randn(6, 2, 3)
    no_resets = torch.zeros(6, 2, dtype=torch.bool)
    out_a, state_a = core(inputs)
    out_b, state_b = core(inputs, resets=no_resets)
    torch.testing.assert_close(out_a, out_b)
    packed = core.state_to_batch_first(state_a)
    assert packed.shape == (2, 2, 2, 4)  # [B, num_states, num_layers, H]
    for a, b in zip(core.state_from_batch_first(packed), state_a):
        torch.testing.assert_close(a, b)
    with pytest.raises(ShapeError):
        core(inputs, resets=torch.zeros(6, 3, dtype=torch.bool))
    with pytest.raises(ConfigError):
        RecurrentCore(3, 4, cell="rnn")


@pytest.mark.parametrize("channels_last", [False, True])
def test_cnn_encoder_layouts_and_scaling(channels_last):
    shape = (36, 36, 3) if channels_last else (3, 36, 36)
    encoder = CnnEncoder(shape, channels_last=channels_last, output_size=16)
    assert encoder.output_size == 16
    images = torch.randint(0, 256, (2, 5, *shape), dtype=torch.uint8)  # [T, B, ...]
    features = encoder(images)
    assert features.shape == (2, 5, 16)
    torch.testing.assert_close(features, encoder(images.float() / 255.0))
    assert encoder(images[0, 0]).shape == (16,)
    with pytest.raises(ConfigError):
        CnnEncoder((3, 8, 8))  # too small for the Nature stack
    with pytest.raises(ShapeError):
        encoder(torch.zeros(2, 4, 36, 36))


def test_nature_cnn_flat_size_is_inferred():
    assert CnnEncoder((4, 84, 84)).output_size == 64 * 7 * 7


def test_build_encoder_from_space_and_example():
    space = gym.spaces.Dict(
        {
            "pixels": gym.spaces.Box(0, 255, (40, 40, 3), np.uint8),
            "state": gym.spaces.Dict({"joints": gym.spaces.Box(-1, 1, (2, 3))}),
            "mode": gym.spaces.Discrete(4),
        }
    )
    encoder = build_encoder(space)
    assert isinstance(encoder, DictEncoder)
    pixels = encoder.encoders["pixels"]
    assert isinstance(pixels, CnnEncoder) and pixels.channels_last
    assert isinstance(encoder.encoders["mode"], OneHotEncoder)
    expected_size = pixels.output_size + 6 + 4
    assert encoder.output_size == expected_size
    obs = {
        "pixels": torch.zeros(3, 2, 40, 40, 3, dtype=torch.uint8),
        "state": {"joints": torch.zeros(3, 2, 2, 3)},
        "mode": torch.zeros(3, 2, dtype=torch.long),
    }
    assert encoder(obs).shape == (3, 2, expected_size)
    # the same from an example observation
    example = {"a": np.zeros(5, np.float32), "b": np.zeros((3, 40, 40), np.uint8)}
    from_example = build_encoder(example)
    assert isinstance(from_example.encoders["a"], FlattenEncoder)
    assert not from_example.encoders["b"].channels_last
    tuple_encoder = build_encoder(gym.spaces.Tuple([gym.spaces.Box(-1, 1, (2,))] * 2))
    assert tuple_encoder((torch.zeros(2), torch.ones(2))).shape == (4,)


def _actor_critic(recurrent: bool, continuous: bool) -> tuple[ActorCriticModel, object]:
    encoder = MLP(4, (16,))
    core = RecurrentCore(16, 8, cell="gru") if recurrent else None
    size = 8 if recurrent else 16
    head = GaussianHead(size, 2) if continuous else CategoricalHead(size, 3)
    dist = Gaussian(2) if continuous else Categorical(3)
    model = ActorCriticModel(encoder, head, ValueHead(size), core=core)
    return model, dist


@pytest.mark.parametrize("recurrent", [False, True])
@pytest.mark.parametrize("continuous", [False, True])
def test_actor_critic_accepts_one_two_three_leading_dims(recurrent, continuous):
    torch.manual_seed(0)
    model, dist = _actor_critic(recurrent, continuous)
    obs = torch.randn(3, 2, 4)  # [T, B, obs_dim]
    out = model(obs)
    assert out.value.shape == (3, 2)
    params_leaf = out.dist_params[0]
    assert params_leaf.shape[:2] == (3, 2)
    assert dist.sample(out.dist_params).shape[:2] == (3, 2)
    # [B, F]: one step for each env; [F]: one env, one step
    step = model(obs[0])
    assert step.value.shape == (2,)
    single = model(obs[0, 1])
    assert single.value.shape == ()
    torch.testing.assert_close(step.value[1], single.value)
    torch.testing.assert_close(step.value, out.value[0])
    if recurrent:
        assert out.state[0].shape == (1, 2, 8)
        # stepping through time with the returned state matches the sequence
        state = None
        for t in range(3):
            step = model(obs[t], state)
            state = step.state
            torch.testing.assert_close(step.value, out.value[t])
    else:
        assert out.state is None


def test_actor_critic_recurrent_resets_and_separate_value_encoder():
    torch.manual_seed(0)
    model, _ = _actor_critic(recurrent=True, continuous=False)
    obs = torch.randn(4, 2, 4)
    resets = torch.tensor([[0, 0], [0, 1], [0, 0], [1, 0]], dtype=torch.bool)
    out = model(obs, resets=resets)
    # column 1 restarts at t=1: equals a fresh run from there
    fresh = model(obs[1:, 1:])
    torch.testing.assert_close(out.value[1:, 1:], fresh.value)
    with pytest.raises(ShapeError):
        model(obs, resets=torch.zeros(4, 3, dtype=torch.bool))
    separate = ActorCriticModel(
        MLP(4, (8,)),
        CategoricalHead(8, 3),
        ValueHead(6),
        value_encoder=MLP(4, (6,)),
    )
    assert separate(obs).value.shape == (4, 2)


@pytest.mark.parametrize("shared", [True, False])
def test_build_actor_critic(shared):
    obs_space = gym.spaces.Box(-1, 1, (4,), np.float32)
    model, dist = build_actor_critic(
        obs_space, gym.spaces.Box(-2, 2, (2,)), squash=True, shared_trunk=shared
    )
    assert isinstance(dist, SquashedGaussian)
    action = dist.sample(model(torch.zeros(5, 4)).dist_params)
    assert action.shape == (5, 2) and action.abs().max() <= 2
    model, dist = build_actor_critic(
        obs_space, gym.spaces.Discrete(3), recurrent_cell="lstm", shared_trunk=shared
    )
    out = model(torch.zeros(6, 2, 4))
    assert out.dist_params.logits.shape == (6, 2, 3) and len(out.state) == 2
    with pytest.raises(ConfigError):
        build_actor_critic(obs_space, gym.spaces.MultiBinary(3))


def test_stacked_multiagent_actions_point_to_unstack_space():
    obs_space = gym.spaces.Box(-1, 1, (4,), np.float32)
    for stacked in (
        gym.spaces.MultiDiscrete([9, 9]),  # Discrete(9) stacked over 2 agents
        gym.spaces.Box(-1, 1, (3, 2), np.float32),  # Box(2,) over 3 agents
    ):
        with pytest.raises(ConfigError, match=r"multiagent\.unstack_space\(space\)"):
            build_actor_critic(obs_space, stacked)
    with pytest.raises(ConfigError) as error:
        build_actor_critic(obs_space, gym.spaces.MultiBinary(3))
    assert "unstack_space" not in str(error.value)


def test_orthogonal_init_of_hidden_layers_like_sb3():
    """``orthogonal_init=True``: trunk weights orthogonal with gain sqrt(2),
    zero biases; the heads keep 0.01 and 1 (SB3's and CleanRL's scheme)."""
    torch.manual_seed(0)
    model, _ = build_actor_critic(
        gym.spaces.Box(-1, 1, (5,), np.float32),
        gym.spaces.Discrete(3),
        hidden_sizes=(64, 32),
        shared_trunk=False,
        orthogonal_init=True,
    )
    for trunk in (model.policy_trunk, model.value_trunk):
        linears = [m for m in trunk.modules() if isinstance(m, torch.nn.Linear)]
        assert len(linears) == 2
        for layer in linears:
            w = layer.weight.detach().double()
            small = min(w.shape)
            gram = w @ w.T if w.shape[0] == small else w.T @ w
            torch.testing.assert_close(
                gram, 2.0 * torch.eye(small, dtype=torch.float64), atol=1e-5, rtol=0
            )
            assert not layer.bias.any()
    assert model.architecture.kwargs["orthogonal_init"] is True
    torch.manual_seed(0)
    default, _ = build_actor_critic(
        gym.spaces.Box(-1, 1, (5,), np.float32), gym.spaces.Discrete(3)
    )
    first = next(m for m in default.modules() if isinstance(m, torch.nn.Linear))
    assert first.bias.any()  # torch's default init unless asked
