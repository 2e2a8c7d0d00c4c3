"""Image observations in the model builders: the Atari (Nature CNN) defaults."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from parllel.errors import ConfigError, ShapeError
from parllel.torch.agents import build_dqn_agent
from parllel.torch.models import build_actor_critic
from parllel.torch.models.cnn import CnnEncoder
from parllel.torch.models.encoders import FlattenEncoder, build_encoder, is_image_shape

ACTIONS = gym.spaces.Discrete(6)


def _box(shape, dtype=np.uint8):
    return gym.spaces.Box(0, 255, shape, dtype)


def _cleanrl_agent(num_actions: int) -> nn.Module:
    """CleanRL's ppo_atari.py ``Agent`` (network, actor and critic)."""
    network = nn.Sequential(
        nn.Conv2d(4, 32, 8, stride=4),
        nn.ReLU(),
        nn.Conv2d(32, 64, 4, stride=2),
        nn.ReLU(),
        nn.Conv2d(64, 64, 3, stride=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(64 * 7 * 7, 512),
        nn.ReLU(),
    )
    return nn.ModuleList([network, nn.Linear(512, num_actions), nn.Linear(512, 1)])


def _count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("num_actions", [4, 6, 18])
def test_atari_default_matches_cleanrl_parameter_count(num_actions):
    model, _ = build_actor_critic(_box((4, 84, 84)), gym.spaces.Discrete(num_actions))
    assert _count(model) == _count(_cleanrl_agent(num_actions))
    if num_actions == 6:
        assert _count(model) == 1_687_719
    assert model.architecture.kwargs["hidden_sizes"] == ()
    assert model.architecture.kwargs["orthogonal_init"] is True


def test_atari_default_init_gains():
    torch.manual_seed(0)
    model, _ = build_actor_critic(_box((4, 84, 84)), ACTIONS)
    layers = [
        m for m in model.encoder.modules() if isinstance(m, (nn.Conv2d, nn.Linear))
    ]
    assert len(layers) == 4  # three convs and the 512 layer
    for layer in layers:
        weight = layer.weight.detach().flatten(1)  # [out, in]
        gram = weight @ weight.T  # rows orthogonal with norm gain
        torch.testing.assert_close(
            gram, 2.0 * torch.eye(weight.shape[0]), atol=1e-4, rtol=0
        )
        assert not layer.bias.detach().any()
    policy = model.policy_head.linear.weight.detach()
    value = model.value_head.linear.weight.detach()
    torch.testing.assert_close(
        policy @ policy.T, 1e-4 * torch.eye(6), atol=1e-7, rtol=0
    )
    assert math.isclose(value.norm().item(), 1.0, rel_tol=1e-5)


def test_orthogonal_init_false_keeps_torch_default():
    torch.manual_seed(0)
    model, _ = build_actor_critic(_box((4, 84, 84)), ACTIONS, orthogonal_init=False)
    conv = next(m for m in model.encoder.modules() if isinstance(m, nn.Conv2d))
    assert conv.bias.detach().any()  # torch's default init has nonzero biases


@pytest.mark.parametrize(
    "shape",
    [(4, 84, 84), (84, 84, 4), (4, 84, 84, 1), (4, 1, 84, 84), (84, 84)],
)
def test_layouts_accepted_and_forward(shape):
    model, distribution = build_actor_critic(_box(shape), ACTIONS)
    encoder = model.encoder
    assert isinstance(encoder, CnnEncoder) and encoder.output_size == 512
    observation = torch.randint(0, 256, (3, 2, *shape), dtype=torch.uint8)
    out = model(observation)  # [T, B, ...]
    assert out.dist_params.logits.shape == (3, 2, 6)
    assert out.value.shape == (3, 2)


def test_stacked_channel_last_frames_equal_channel_first_stack():
    """(k, H, W, 1) and (k, H, W) give the same features with the same weights."""
    torch.manual_seed(1)
    stacked = CnnEncoder((4, 84, 84, 1), channels_last=True, output_size=512)
    plain = CnnEncoder((4, 84, 84), output_size=512)
    plain.load_state_dict(stacked.state_dict())
    frames = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    torch.testing.assert_close(stacked(frames.unsqueeze(-1)), plain(frames))
    # (k, H, W, C) with C=3: frame-major channels, as (k * C, H, W)
    rgb = CnnEncoder(
        (2, 36, 36, 3),
        channels_last=True,
        channels=(8,),
        kernel_sizes=(3,),
        strides=(1,),
    )
    joined = CnnEncoder((6, 36, 36), channels=(8,), kernel_sizes=(3,), strides=(1,))
    joined.load_state_dict(rgb.state_dict())
    images = torch.randint(0, 256, (3, 2, 36, 36, 3), dtype=torch.uint8)
    expected = images.permute(0, 1, 4, 2, 3).reshape(3, 6, 36, 36)
    torch.testing.assert_close(rgb(images), joined(expected))


def test_uint8_scaled_by_1_over_255():
    encoder = CnnEncoder((4, 84, 84), output_size=512, init_scale=math.sqrt(2))
    frames = torch.randint(0, 256, (2, 4, 84, 84), dtype=torch.uint8)
    torch.testing.assert_close(encoder(frames), encoder(frames.float() / 255.0))


def test_cnn_settings_passable():
    model, _ = build_actor_critic(
        _box((4, 84, 84)),
        ACTIONS,
        cnn=dict(
            channels=(16, 32), kernel_sizes=(8, 4), strides=(4, 2), output_size=256
        ),
        hidden_sizes=(64,),
        orthogonal_init=False,  # (QR of the 2592x256 layer: slow on a busy CPU)
    )
    convs = [m for m in model.encoder.modules() if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in convs] == [16, 32]
    assert model.encoder.output_size == 256
    assert model.policy_head.linear.in_features == 64
    convs_only, _ = build_actor_critic(
        _box((4, 84, 84)), ACTIONS, cnn=dict(output_size=None)
    )
    assert convs_only.encoder.output_size == 3136


def test_vector_defaults_unchanged():
    model, _ = build_actor_critic(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2))
    assert model.architecture.kwargs["hidden_sizes"] == (64, 64)
    assert model.architecture.kwargs["orthogonal_init"] is False
    assert isinstance(model.encoder, FlattenEncoder)


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [
        ((4, 84, 84), np.float32),  # float frames: would be a 28,224-input flatten
        ((84, 84, 4), np.float64),
        ((2, 4, 84, 84, 1), np.uint8),  # five dims: no layout places it
    ],
)
def test_image_like_observation_refused(shape, dtype):
    with pytest.raises(ShapeError, match=r"\(.*84.*\)") as info:
        build_actor_critic(_box(shape, dtype), ACTIONS)
    assert "uint8" in str(info.value)
    with pytest.raises(ShapeError):
        build_encoder(np.zeros(shape, dtype))


def test_small_arrays_still_flattened():
    assert not is_image_shape((3, 3), np.uint8)
    assert isinstance(
        build_encoder(gym.spaces.Box(0, 1, (3, 3, 2), np.int8)), FlattenEncoder
    )
    assert isinstance(build_encoder(_box((8, 8), np.uint8)), FlattenEncoder)
    assert isinstance(build_encoder(_box((64, 64), np.float32)), FlattenEncoder)


def test_too_small_image_names_the_fix():
    with pytest.raises(ConfigError, match="kernel_sizes"):
        build_actor_critic(_box((4, 20, 20)), ACTIONS)
    model, _ = build_actor_critic(
        _box((4, 20, 20)),
        ACTIONS,
        cnn=dict(channels=(16,), kernel_sizes=(3,), strides=(1,)),
    )
    assert model(torch.zeros(2, 4, 20, 20, dtype=torch.uint8)).value.shape == (2,)


def test_dqn_builder_uses_nature_network():
    agent = build_dqn_agent(_box((4, 84, 84, 1)), ACTIONS)
    q_network = agent.q_network
    assert isinstance(q_network.encoder, CnnEncoder)
    # Nature DQN: convs, 512, linear to the Q values
    expected = _count(_cleanrl_agent(6)) - 513  # no critic
    assert _count(q_network) == expected
    q = q_network(torch.zeros(3, 2, 4, 84, 84, 1, dtype=torch.uint8))
    assert q.shape == (3, 2, 6)
    with pytest.raises(ShapeError):
        build_dqn_agent(_box((4, 84, 84), np.float32), ACTIONS)
