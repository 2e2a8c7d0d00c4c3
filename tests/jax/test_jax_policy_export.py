"""A JAX agent's export (policy.npz) plays in numpy as the agent acts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel.checkpoints.checkpoint import save_checkpoint
from parllel.errors import ConfigError, PolicyFileError
from parllel.export.network import ACTIVATIONS, apply_module
from parllel.export.numpy_policy import load_numpy_policy, plays_in_numpy
from parllel.export.spec import SPEC_FILE
from parllel.transforms.running_stats import RunningMeanStd

ROOT = Path(__file__).resolve().parents[2]


def _agent(kind: str, observation_space: gym.Space, action_space: gym.Space):
    from parllel.jax.agents import (
        build_actor_critic_agent,
        build_dqn_agent,
        build_sac_agent,
    )

    if kind == "dqn":
        return build_dqn_agent(observation_space, action_space, seed=1, epsilon=0.5)
    if kind == "sac":
        return build_sac_agent(
            observation_space, action_space, seed=1, hidden_sizes=(32, 32)
        )
    options = {"squash": True} if kind == "ppo-squashed" else {}
    return build_actor_critic_agent(
        observation_space, action_space, seed=1, init_log_std=-0.5, **options
    )


def _normalizer(observation_space: gym.Space, rng: np.random.Generator):
    """A NormalizeObservations' plain parts, with statistics far from 0 and 1."""
    stats = RunningMeanStd(observation_space.shape)
    stats.update(rng.normal(3.0, 4.0, (64, *observation_space.shape)))
    return types.SimpleNamespace(stats={"": stats}, clip=5.0, epsilon=1e-8)


def _agent_actions(agent, observations: np.ndarray) -> np.ndarray:
    import jax

    actions, _ = agent.policy_step(
        agent.params, observations, jax.random.key(0), deterministic=True
    )
    return np.asarray(actions)


CASES = [
    ("ppo", "CartPole-v1"),
    ("dqn", "CartPole-v1"),
    ("ppo", "Pendulum-v1"),
    ("ppo-squashed", "Pendulum-v1"),
    ("sac", "Pendulum-v1"),
]


@pytest.mark.parametrize(("kind", "env_id"), CASES)
def test_exported_policy_acts_as_the_agent(tmp_path, kind, env_id):
    """Deterministic actions equal the agent's on the normalized observations."""
    from parllel.jax.export import export_policy

    env = gym.make(env_id)
    agent = _agent(kind, env.observation_space, env.action_space)
    rng = np.random.default_rng(0)
    normalizer = _normalizer(env.observation_space, rng)
    file = export_policy(
        tmp_path,
        agent,
        observation_space=env.observation_space,
        action_space=env.action_space,
        observation_normalizer=normalizer,
        algorithm=kind.upper(),
        env_id=env_id,
        env_steps=123,
    )
    assert file == tmp_path / "policy.npz" and plays_in_numpy(tmp_path)
    policy = load_numpy_policy(tmp_path)
    assert policy.trained_with["env_steps"] == 123
    assert policy.trained_with["env_id"] == env_id
    raw = rng.normal(3.0, 4.0, (32, *env.observation_space.shape)).astype(np.float32)
    stats = normalizer.stats[""]
    normalized = np.clip(
        (raw - stats.mean) / np.sqrt(stats.var + normalizer.epsilon), -5.0, 5.0
    ).astype(np.float32)
    expected = _agent_actions(agent, normalized)
    actions = policy.act(raw)
    if isinstance(env.action_space, gym.spaces.Discrete):
        np.testing.assert_array_equal(actions, expected)
        assert isinstance(policy.act(raw[0]), int)
    else:
        np.testing.assert_allclose(actions, expected, rtol=1e-5, atol=1e-6)
        assert actions.dtype == np.float32
        assert env.action_space.contains(policy.act(raw[0], deterministic=False))
    # a stochastic policy samples: not always its mode
    sampled = np.stack([policy.act(raw, deterministic=False) for _ in range(4)])
    assert not all(np.array_equal(s, actions) for s in sampled)


def test_images_dicts_and_action_masks_act_as_the_agent(tmp_path):
    """The CNN (torch's flatten order), a dict encoder and the legal-action
    mask give the agent's actions."""
    from parllel.jax.agents import build_actor_critic_agent
    from parllel.jax.export import export_policy

    observation_space = gym.spaces.Dict(
        {
            "pixels": gym.spaces.Box(0, 255, (2, 36, 36), np.uint8),
            "action_mask": gym.spaces.MultiBinary(4),
        }
    )
    action_space = gym.spaces.Discrete(4)
    agent = build_actor_critic_agent(
        observation_space,
        action_space,
        seed=3,
        cnn=dict(channels=(4, 8), kernel_sizes=(8, 4), strides=(4, 2), output_size=16),
    )
    export_policy(
        tmp_path,
        agent,
        observation_space=observation_space,
        action_space=action_space,
    )
    policy = load_numpy_policy(tmp_path)
    rng = np.random.default_rng(4)
    batch = {
        "pixels": rng.integers(0, 256, (32, 2, 36, 36), dtype=np.uint8),
        "action_mask": rng.integers(0, 2, (32, 4), dtype=np.int8),
    }
    actions = policy.act(batch)
    np.testing.assert_array_equal(actions, _agent_actions(agent, batch))
    legal = batch["action_mask"][np.arange(32), actions] == 1
    assert legal[batch["action_mask"].any(axis=1)].all()


@settings(max_examples=12, deadline=None)
@given(
    activation=st.sampled_from(sorted(ACTIVATIONS)),
    hidden=st.lists(st.integers(1, 9), max_size=3),
    output=st.one_of(st.none(), st.integers(1, 5)),
    features=st.integers(1, 6),
    seed=st.integers(0, 2**16),
)
def test_the_numpy_mlp_is_flax_mlp(activation, hidden, output, features, seed):
    """apply_module of a described MLP equals the flax MLP on the same weights."""
    import jax
    from flax import linen as nn

    from parllel.jax.export import describe_module
    from parllel.jax.models.mlp import MLP

    mlp = MLP(tuple(hidden), output, activation=getattr(nn, activation))
    x = np.random.default_rng(seed).normal(size=(7, features)).astype(np.float32)
    params = mlp.init(jax.random.key(seed), x).get("params", {})
    params = jax.tree.map(lambda p: np.asarray(p) * 3, params)  # past the kinks
    expected = np.asarray(mlp.apply({"params": params}, x))
    got = apply_module(describe_module(mlp), params, x)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_the_export_plays_without_jax(tmp_path):
    """A subprocess where jax, flax and torch cannot be imported loads and acts."""
    from parllel.jax.export import export_policy

    env = gym.make("Pendulum-v1")
    agent = _agent("sac", env.observation_space, env.action_space)
    export_policy(
        tmp_path,
        agent,
        observation_space=env.observation_space,
        action_space=env.action_space,
        env_id="Pendulum-v1",
    )
    observations = np.random.default_rng(1).uniform(-1, 1, (16, 3)).astype(np.float32)
    np.save(tmp_path / "obs.npy", observations)
    code = f"""
import sys
for name in ("jax", "flax", "optax", "torch"):
    sys.modules[name] = None
import numpy as np
from parllel.enjoy import main
from parllel.export.numpy_policy import load_numpy_policy
policy = load_numpy_policy({str(tmp_path)!r})
np.save({str(tmp_path / "actions.npy")!r}, policy.act(np.load({str(tmp_path / "obs.npy")!r})))
main([{str(tmp_path)!r}, "--episodes", "1", "--max-steps", "5", "--seed", "0"])
assert not any(sys.modules.get(name) for name in ("jax", "flax", "torch"))
"""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "episode 1: return" in done.stdout
    np.testing.assert_allclose(
        np.load(tmp_path / "actions.npy"),
        _agent_actions(agent, observations),
        rtol=1e-5,
        atol=1e-6,
    )


def test_the_policy_loads_from_the_newest_checkpoint(tmp_path):
    """A run stopped before its export loads from its spec and checkpoint."""
    from parllel.jax.export import PolicyExport

    env = gym.make("CartPole-v1")
    agent = _agent("ppo", env.observation_space, env.action_space)
    normalizer = _normalizer(env.observation_space, np.random.default_rng(2))
    normalizer.state_dict = lambda: {"": normalizer.stats[""].state_dict()}
    objects = {"model": agent, "observation_normalizer": normalizer}
    export = PolicyExport(
        agent,
        normalizer,
        env_id="CartPole-v1",
        observation_space=env.observation_space,
        action_space=env.action_space,
    )
    export.write_spec(tmp_path, objects, algorithm="PPO")
    assert json.loads((tmp_path / SPEC_FILE).read_text())["backend"] == "jax"
    with pytest.raises(PolicyFileError, match="no checkpoint"):
        load_numpy_policy(tmp_path)
    state = {"objects": {k: v.state_dict() for k, v in objects.items()}}
    save_checkpoint(tmp_path / "checkpoints", state, step=64)
    assert plays_in_numpy(tmp_path)
    from_checkpoint = load_numpy_policy(tmp_path)
    assert from_checkpoint.source.parent.name == "checkpoints"
    assert from_checkpoint.trained_with["env_steps"] == 64
    from parllel.torch import load_policy

    with pytest.raises(PolicyFileError, match="'jax' run.*load_numpy_policy"):
        load_policy(tmp_path)  # names the loader of a JAX run
    export.export(tmp_path, env_steps=64, algorithm="PPO")
    exported = load_numpy_policy(tmp_path)  # the export wins a tie
    assert exported.source == tmp_path / "policy.npz"
    observations = np.random.default_rng(3).normal(size=(16, 4)).astype(np.float32)
    np.testing.assert_array_equal(
        from_checkpoint.act(observations), exported.act(observations)
    )


def test_bad_files_get_clear_errors(tmp_path):
    from parllel.jax.export import export_policy

    with pytest.raises(PolicyFileError, match="does not exist"):
        load_numpy_policy(tmp_path / "nothing.npz")
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a policy")
    with pytest.raises(PolicyFileError, match="cannot read policy file"):
        load_numpy_policy(garbage)
    other = tmp_path / "other.npz"
    np.savez(other, header=np.array(json.dumps({"format": "something"})))
    with pytest.raises(PolicyFileError, match="is not a parllel policy file"):
        load_numpy_policy(other)
    env = gym.make("CartPole-v1")
    agent = _agent("ppo", env.observation_space, env.action_space)
    with pytest.raises(ConfigError, match="observation_space"):
        export_policy(tmp_path, agent)
    good = export_policy(
        tmp_path / "good.npz",
        agent,
        observation_space=env.observation_space,
        action_space=env.action_space,
    )
    with np.load(good) as archive:
        arrays = {key: archive[key] for key in archive.files}
    header = json.loads(str(arrays["header"]))
    newer = tmp_path / "newer.npz"
    np.savez(
        newer,
        **{**arrays, "header": np.array(json.dumps({**header, "format_version": 99}))},
    )
    with pytest.raises(PolicyFileError, match="format 99"):
        load_numpy_policy(newer)
    header["observation_space"]["shape"] = [5]  # weights for 4 inputs
    header["observation_space"]["low"] = header["observation_space"]["high"] = 0.0
    misfit = tmp_path / "misfit.npz"
    np.savez(misfit, **{**arrays, "header": np.array(json.dumps(header))})
    with pytest.raises(PolicyFileError, match="do not fit"):
        load_numpy_policy(misfit)
    assert zipfile.is_zipfile(good) and not plays_in_numpy(garbage)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "script", ["examples/cartpole/train_ppo.py", "examples/pendulum/train_sac.py"]
)
def test_enjoy_plays_a_quick_jax_example_run(tmp_path, script):
    """``--backend jax --quick`` writes policy.npz; ``python -m parllel.enjoy``
    plays it, with the same actions from the run's newest checkpoint."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    trained = subprocess.run(
        [sys.executable, str(ROOT / script), "--quick", "--backend", "jax"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=400,
        env=env,
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert (run_dir / "policy.npz").is_file()
    done = subprocess.run(
        [sys.executable, "-m", "parllel.enjoy", str(run_dir), "--episodes", "2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("episode ") == 2 and "NumpyPolicy" in done.stdout
    policy = load_numpy_policy(run_dir)
    space = policy.observation_space
    space.seed(0)
    batch = np.stack([space.sample() for _ in range(8)])
    (run_dir / "policy.npz").rename(tmp_path / "aside.npz")
    from_checkpoint = load_numpy_policy(run_dir)
    assert from_checkpoint.source.parent.name == "checkpoints"
    np.testing.assert_array_equal(from_checkpoint.act(batch), policy.act(batch))
