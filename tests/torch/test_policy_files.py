"""Policy files: plain data, spaces round trip, run directories, clear errors."""

from __future__ import annotations

import json
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from parllel.checkpoints import save_checkpoint
from parllel.checkpoints.checkpoint import latest_checkpoint
from parllel.errors import (
    ConfigError,
    ParllelWarning,
    PolicyFileError,
)
from parllel.export.checkpoints import newest_checkpoint_step
from parllel.export.spaces import space_from_data, space_to_data
from parllel.export.spec import SPEC_FILE
from parllel.runners import RunDirectory
from parllel.torch import PolicyExport, export_policy, load_policy
from parllel.torch.agents import ActorCriticAgent, build_dqn_agent
from parllel.torch.architecture import Architecture
from parllel.torch.export.artifact import POLICY_FILE
from parllel.torch.export.spec import write_policy_spec
from parllel.torch.models import build_actor_critic
from parllel.transforms import NormalizeObservations

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACTIONS = gym.spaces.Discrete(2)


def agent_and_normalizer():
    agent = ActorCriticAgent(*build_actor_critic(OBS, ACTIONS, hidden_sizes=(8,)))
    normalizer = NormalizeObservations(
        {"observation": np.zeros((1, 1, 4), np.float32)}, clip=5.0
    )
    normalizer.stats[""].update(np.random.default_rng(0).normal(3, 2, (20, 4)))
    return agent, normalizer


# -- the file ------------------------------------------------------------------


def test_file_is_plain_data_loadable_with_weights_only(tmp_path):
    agent, normalizer = agent_and_normalizer()
    path = export_policy(
        tmp_path,
        agent,
        observation_normalizer=normalizer,
        algorithm="PPO",
        env_id="CartPole-v1",
        env_steps=4096,
        metadata={"note": "test"},
    )
    assert path == tmp_path / POLICY_FILE
    data = torch.load(path, weights_only=True)
    assert data["format"] == "parllel-policy" and data["format_version"] == 1
    assert data["architecture"]["builder"] == "actor_critic"
    assert data["architecture"]["kwargs"]["hidden_sizes"] == [8]
    assert data["architecture"]["kwargs"]["activation"] == {"torch.nn": "Tanh"}
    assert data["observation_space"] == space_to_data(OBS)
    assert data["trained_with"] == {
        "algorithm": "PPO",
        "env_id": "CartPole-v1",
        "env_factory": None,
        "env_steps": 4096,
    }
    assert data["metadata"] == {"note": "test"}
    stats = data["observation_normalizer"]["leaves"][""]
    np.testing.assert_array_equal(stats["mean"].numpy(), normalizer.stats[""].mean)
    assert data["observation_normalizer"]["clip"] == 5.0
    for key, tensor in agent.model.state_dict().items():
        torch.testing.assert_close(data["weights"]["model"][key], tensor)
    policy = load_policy(path)
    assert policy.source == path and policy.trained_with["env_steps"] == 4096


SPACES = [
    gym.spaces.Box(-1.0, 2.0, (3,), np.float32),
    gym.spaces.Box(np.array([-np.inf, 0.0]), np.array([np.inf, 1.0]), (2,), np.float64),
    gym.spaces.Box(0, 255, (4, 4, 3), np.uint8),
    gym.spaces.Discrete(5, start=-2),
    gym.spaces.MultiDiscrete([3, 4]),
    gym.spaces.MultiBinary(6),
    gym.spaces.Dict(
        {"a": gym.spaces.Discrete(3), "b": gym.spaces.Tuple([OBS, ACTIONS])}
    ),
]


@pytest.mark.parametrize("space", SPACES, ids=lambda s: type(s).__name__)
def test_spaces_round_trip_through_json(space):
    data = json.loads(json.dumps(space_to_data(space)))
    assert space_from_data(data) == space


@settings(max_examples=50, deadline=None)
@given(
    low=st.lists(
        st.floats(-1e6, 1e6, allow_nan=False, width=32), min_size=1, max_size=5
    ),
    width=st.floats(0.0, 1e6, allow_nan=False, width=32),
    dtype=st.sampled_from([np.float32, np.float64]),
)
def test_box_bounds_round_trip_exactly(low, width, dtype):
    low_array = np.asarray(low, dtype=dtype)
    box = gym.spaces.Box(low_array, low_array + dtype(width), dtype=dtype)
    rebuilt = space_from_data(space_to_data(box))
    assert rebuilt.dtype == box.dtype and rebuilt.shape == box.shape
    np.testing.assert_array_equal(rebuilt.low, box.low)
    np.testing.assert_array_equal(rebuilt.high, box.high)


# -- errors --------------------------------------------------------------------


def test_missing_and_corrupt_files_are_named(tmp_path):
    with pytest.raises(PolicyFileError, match="does not exist"):
        load_policy(tmp_path / "nothing.pt")
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"this is no torch file")
    with pytest.raises(PolicyFileError, match="cannot read policy file"):
        load_policy(garbage)
    agent, _ = agent_and_normalizer()
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(export_policy(tmp_path, agent).read_bytes()[:500])
    with pytest.raises(PolicyFileError, match="cannot read policy file"):
        load_policy(truncated)
    checkpoint = save_checkpoint(tmp_path / "ckpt", {"objects": {}}, step=1)
    with pytest.raises(PolicyFileError, match="not a parllel policy file.*checkpoint"):
        load_policy(checkpoint)


def rewrite(path, change):
    data = torch.load(path, weights_only=True)
    change(data)
    torch.save(data, path)


def test_newer_format_foreign_builder_and_unfitting_weights(tmp_path):
    agent, _ = agent_and_normalizer()
    path = export_policy(tmp_path, agent)
    rewrite(path, lambda data: data.update(format_version=99))
    with pytest.raises(PolicyFileError, match="format 99"):
        load_policy(path)
    path = export_policy(tmp_path, agent)
    rewrite(path, lambda data: data["architecture"].update(builder="someone_else"))
    with pytest.raises(PolicyFileError, match="'someone_else'.*not registered"):
        load_policy(path)
    path = export_policy(tmp_path, agent)
    rewrite(path, lambda data: data["architecture"]["kwargs"].update(hidden_sizes=[9]))
    with pytest.raises(PolicyFileError, match="'model' weights.*do not fit"):
        load_policy(path)


def test_agents_that_cannot_be_described(tmp_path):
    class Homemade:
        model = nn.Linear(4, 2)

    with pytest.raises(ConfigError, match="no recorded architecture"):
        export_policy(tmp_path, Homemade())
    custom = ActorCriticAgent(
        *build_actor_critic(OBS, ACTIONS, activation=lambda: nn.Tanh())
    )
    with pytest.raises(ConfigError, match="activation=.*cannot be stored"):
        export_policy(tmp_path, custom)
    from_example = build_dqn_agent(np.zeros(4, np.float32), ACTIONS)
    with pytest.raises(ConfigError, match="pass observation_space="):
        export_policy(tmp_path, from_example)
    policy = load_policy(export_policy(tmp_path, from_example, observation_space=OBS))
    assert policy.observation_space == OBS


def test_a_registered_builder_makes_an_agent_of_ones_own_exportable(tmp_path):
    from parllel.torch.export import register_agent_builder

    def build(observation_space, action_space, kwargs):
        agent = ActorCriticAgent(
            *build_actor_critic(observation_space, action_space, **kwargs)
        )
        agent.model.architecture = Architecture(
            "tests.tiny", observation_space, action_space, kwargs
        )
        return agent

    register_agent_builder("tests.tiny", build, lambda agent: {"net": agent.model})
    agent = build(OBS, ACTIONS, {"hidden_sizes": [3]})
    policy = load_policy(export_policy(tmp_path, agent))
    assert policy.agent.model.policy_trunk is not None
    observation = OBS.sample()
    assert policy.act(observation) in (0, 1)


# -- run directories -----------------------------------------------------------


def checkpoint(run, agent, normalizer, step):
    """A checkpoint laid out as Runner.save writes it."""
    objects = {
        "model": agent.model.state_dict(),
        "observation_normalizer": normalizer.state_dict(),
        "ppo": {"unrelated": 1},
    }
    return save_checkpoint(
        run.checkpoints_dir, {"objects": objects, "runner": {}}, step=step
    )


def test_run_directory_export_or_newer_checkpoint(tmp_path):
    agent, normalizer = agent_and_normalizer()
    run = RunDirectory.create(tmp_path / "runs", "policy")
    with pytest.raises(PolicyFileError, match="no policy.pt and no checkpoint"):
        load_policy(run.path)

    objects = {"model": agent.model, "observation_normalizer": normalizer}
    spec = write_policy_spec(
        run.path,
        agent,
        checkpoint_objects=objects,
        observation_normalizer=normalizer,
        algorithm="PPO",
    )
    assert json.loads(spec.read_text())["checkpoint_objects"] == {"model": "model"}
    checkpoint(run, agent, normalizer, step=100)
    assert newest_checkpoint_step(run.path) == 100
    assert latest_checkpoint(run.path).name == "checkpoint_000000000100.pt"
    from_checkpoint = load_policy(run.path)
    assert from_checkpoint.source.name == "checkpoint_000000000100.pt"
    assert from_checkpoint.trained_with == {
        "algorithm": "PPO",
        "env_id": None,
        "env_factory": None,
        "env_steps": 100,
    }

    export_policy(run.path, agent, observation_normalizer=normalizer, env_steps=100)
    assert load_policy(run.path).source == run.path / POLICY_FILE  # a tie: the export
    with torch.no_grad():
        agent.model.policy_head.linear.bias.add_(1.0)  # train on
    normalizer.stats[""].update(np.full((5, 4), 100.0))
    checkpoint(run, agent, normalizer, step=200)
    newer = load_policy(run.path)
    assert newer.source.name == "checkpoint_000000000200.pt"
    observations = np.random.default_rng(0).normal(0, 3, (16, 4)).astype(np.float32)
    exported = load_policy(
        export_policy(tmp_path / "now.pt", agent, observation_normalizer=normalizer)
    )
    np.testing.assert_array_equal(newer.act(observations), exported.act(observations))


def test_unreadable_newest_checkpoint_falls_back(tmp_path):
    agent, normalizer = agent_and_normalizer()
    run = RunDirectory.create(tmp_path / "runs", "policy")
    write_policy_spec(
        run.path,
        agent,
        checkpoint_objects={"model": agent.model, "observation_normalizer": normalizer},
        observation_normalizer=normalizer,
    )
    checkpoint(run, agent, normalizer, step=100)
    broken = run.checkpoints_dir / "checkpoint_000000000200.pt"
    broken.write_bytes(b"cut short")
    with pytest.warns(ParllelWarning, match="checkpoint_000000000200"):
        policy = load_policy(run.path)
    assert policy.source.name == "checkpoint_000000000100.pt"


def test_spec_naming_objects_the_checkpoint_lacks(tmp_path):
    agent, normalizer = agent_and_normalizer()
    run = RunDirectory.create(tmp_path / "runs", "policy")
    write_policy_spec(run.path, agent, checkpoint_objects={})  # the model is not saved
    checkpoint(run, agent, normalizer, step=100)
    with pytest.raises(PolicyFileError, match="does not hold the policy's 'model'"):
        load_policy(run.path)
    (run.path / SPEC_FILE).write_text("{not json")
    with pytest.raises(PolicyFileError, match="cannot read"):
        load_policy(run.path)


def test_run_training_writes_spec_and_export(tmp_path, capsys):
    from parllel.runners import run_training
    from parllel.runners.outcome import report_outcome

    agent, normalizer = agent_and_normalizer()

    class PPO:
        pass

    class Runner:  # the little of a runner run_training uses
        finished = interrupted = False
        env_steps = total_steps = 10
        last_checkpoint = config = logger = None
        stop_signals: list[int] = []
        algorithm = PPO()
        checkpoint_objects = {"model": agent.model, "norm": normalizer}

        def run(self):
            return {"eval/return_mean": 2.0}

    run = RunDirectory.create(tmp_path / "runs", "training")
    export = PolicyExport(agent, normalizer, env_id="CartPole-v1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nothing logged: no learning curve
        report_outcome(run_training(Runner(), run, policy=export))
    assert f"policy exported: {run.path / POLICY_FILE}" in capsys.readouterr().out
    spec = json.loads((run.path / SPEC_FILE).read_text())
    assert spec["observation_normalizer"]["checkpoint_object"] == "norm"
    assert spec["trained_with"]["algorithm"] == "PPO"
    policy = load_policy(run.path)
    assert policy.trained_with == {
        "algorithm": "PPO",
        "env_id": "CartPole-v1",
        "env_factory": None,
        "env_steps": 10,
    }


def test_builder_arguments_round_trip_through_plain_data():
    from parllel.torch.export.builders import kwargs_from_data, kwargs_to_data

    kwargs = {"activation": nn.ReLU, "heads": {"pi": [nn.Tanh, 3]}, "sizes": (8, 8)}
    data = kwargs_to_data(kwargs)
    assert data["heads"]["pi"] == [{"torch.nn": "Tanh"}, 3]
    assert data["sizes"] == [8, 8]  # plain data: tuples become lists
    assert kwargs_from_data(data) == {**kwargs, "sizes": [8, 8]}
    with pytest.raises(ConfigError, match=r"argument heads.pi.1=.*cannot be"):
        kwargs_to_data({"heads": {"pi": [nn.Tanh, object()]}})
    with pytest.raises(PolicyFileError, match="no class 'Nope'"):
        kwargs_from_data({"act": {"torch.nn": "Nope"}})
