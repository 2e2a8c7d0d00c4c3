"""``python -m parllel.enjoy``: evaluate an exported policy in a subprocess."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from parllel.enjoy import main as enjoy_main
from parllel.runners import RunDirectory
from parllel.torch import export_policy, load_policy
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.models import build_actor_critic

ROOT = Path(__file__).resolve().parents[2]
EPISODE = re.compile(r"^episode (\d+): return (-?[\d.]+), length (\d+)$", re.MULTILINE)
CAN_RECORD = all(importlib.util.find_spec(m) for m in ("moviepy", "pygame"))


def enjoy(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "parllel.enjoy", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), "SDL_AUDIODRIVER": "dummy"},
    )


@pytest.fixture
def cartpole_run(tmp_path) -> Path:
    """A run directory with an exported (untrained) CartPole policy."""
    env = gym.make("CartPole-v1")
    torch.manual_seed(0)
    agent = ActorCriticAgent(
        *build_actor_critic(env.observation_space, env.action_space)
    )
    run = RunDirectory.create(tmp_path / "runs", "cartpole")
    export_policy(run.path, agent, algorithm="PPO", env_id="CartPole-v1")
    return run.path


def reference_episodes(run_dir: Path, episodes: int, seed: int) -> list[tuple]:
    """The same evaluation as a plain gymnasium loop in this process."""
    policy, env = load_policy(run_dir), gym.make("CartPole-v1")
    results = []
    for episode in range(episodes):
        observation, _ = env.reset(seed=seed if episode == 0 else None)
        total, length, done = 0.0, 0, False
        while not done:
            observation, reward, terminated, truncated, _ = env.step(
                policy.act(observation)
            )
            total, length, done = total + reward, length + 1, terminated or truncated
        results.append((total, length))
    return results


def test_two_episodes_of_an_exported_policy(cartpole_run, tmp_path):
    done = enjoy(str(cartpole_run), "--episodes", "2", "--seed", "3", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    episodes = [(float(r), int(n)) for _, r, n in EPISODE.findall(done.stdout)]
    assert episodes == reference_episodes(cartpole_run, 2, seed=3)
    mean = np.mean([r for r, _ in episodes])
    assert f"mean return {mean:.2f}" in done.stdout and "over 2 episodes" in done.stdout


def test_without_seed_a_rerun_plays_the_same_episodes(cartpole_run, capsys):
    # seed 0 by default: the resets and --stochastic's actions repeat
    args = [str(cartpole_run), "--episodes", "3", "--stochastic"]
    first, second = enjoy_main(args), enjoy_main(args)
    assert first == second == enjoy_main([*args, "--seed", "0"])
    assert first != enjoy_main([*args, "--seed", "1"])


def test_env_from_the_command_line_and_missing_env(tmp_path, capsys):
    # in this process (the command line itself runs in the test above): an
    # error is a SystemExit with the message, which Python prints without a
    # traceback and exits 1 with
    env = gym.make("CartPole-v1")
    agent = ActorCriticAgent(
        *build_actor_critic(env.observation_space, env.action_space)
    )
    path = export_policy(tmp_path / "policy.pt", agent)  # no env recorded
    with pytest.raises(SystemExit, match="records no env: pass --env"):
        enjoy_main([str(path), "--episodes", "1"])
    episodes = enjoy_main([str(path), "--episodes", "1", "--env", "CartPole-v1"])
    assert len(episodes) == 1
    assert len(EPISODE.findall(capsys.readouterr().out)) == 1


@pytest.mark.slow
def test_env_factory_from_a_file(tmp_path):
    env = gym.make("CartPole-v1")
    agent = ActorCriticAgent(
        *build_actor_critic(env.observation_space, env.action_space)
    )
    factory = tmp_path / "my_envs.py"
    factory.write_text(
        "import gymnasium as gym\n\n"
        "def make_env():\n"
        "    return gym.make('CartPole-v1', max_episode_steps=7)\n"
    )
    path = export_policy(tmp_path, agent, env_factory=f"{factory}:make_env")
    done = enjoy(str(path), "--episodes", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert all(int(n) <= 7 for _, _, n in EPISODE.findall(done.stdout))
    # a video needs a factory taking render_mode
    done = enjoy(str(path), "--episodes", "1", "--video", "v", cwd=tmp_path)
    assert done.returncode != 0
    expected = "takes no render_mode" if CAN_RECORD else r'pip install -e "\.\[video\]"'
    assert re.search(expected, done.stderr), done.stderr[-2000:]


def test_missing_policy_is_named(tmp_path):
    with pytest.raises(SystemExit, match="does not exist"):
        enjoy_main([str(tmp_path / "nowhere")])
    run = RunDirectory.create(tmp_path / "runs", "empty")
    with pytest.raises(SystemExit, match="no policy.pt"):
        enjoy_main([str(run.path)])


@pytest.mark.slow
@pytest.mark.skipif(not CAN_RECORD, reason="needs the video extra (moviepy, pygame)")
def test_video_of_each_episode(cartpole_run, tmp_path):
    video_dir = tmp_path / "videos"
    done = enjoy(
        str(cartpole_run), "--episodes", "2", "--video", str(video_dir), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    videos = sorted(p.name for p in video_dir.glob("*.mp4"))
    assert videos == ["enjoy-episode-0.mp4", "enjoy-episode-1.mp4"]
    assert all((video_dir / name).stat().st_size > 0 for name in videos)


@pytest.mark.skipif(CAN_RECORD, reason="the video extra is installed")
def test_video_without_the_extra_names_it(cartpole_run, tmp_path):
    done = enjoy(str(cartpole_run), "--video", str(tmp_path / "v"), cwd=tmp_path)
    assert done.returncode != 0
    assert 'pip install -e ".[video]"' in done.stderr


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_enjoy_a_quickly_trained_example(tmp_path):
    """The recurrent example records its own env factory (velocities hidden)."""
    script = ROOT / "examples" / "cartpole" / "train_ppo_recurrent.py"
    trained = subprocess.run(
        [sys.executable, str(script), "--quick"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=200,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert f"policy exported: {Path('runs') / run_dir.name / 'policy.pt'}" in (
        trained.stdout
    )
    done = enjoy(str(run_dir), "--episodes", "2", "--seed", "0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "train_ppo_recurrent.py:make_env" in done.stdout
    assert len(EPISODE.findall(done.stdout)) == 2


@pytest.mark.parametrize(
    "env_id", ["NoSuchNamespace/Pong-v5", "NoSuchEnv-v0", "CartPole-v99"]
)
def test_an_env_id_gymnasium_cannot_make_is_named_with_the_fix(tmp_path, env_id):
    # an export recording only an id gymnasium does not know here (the Atari
    # DQN example's did: ALE's ids need ale_py's registration and its
    # preprocessing): a plain message, no gymnasium traceback
    env = gym.make("CartPole-v1")
    agent = ActorCriticAgent(
        *build_actor_critic(env.observation_space, env.action_space)
    )
    path = export_policy(tmp_path, agent, env_id=env_id)
    with pytest.raises(SystemExit) as info:
        enjoy_main([str(path), "--episodes", "1"])
    message = str(info.value)
    assert f"gymnasium cannot make {env_id!r}" in message
    assert "pass --env" in message and "module:function" in message


def test_factory_with_env_id_gets_the_exported_env_id(tmp_path, capsys):
    # one factory for many envs (make_atari_env's shape): the export's env_id
    # picks the env, here against a default that does not exist
    env = gym.make("CartPole-v1")
    agent = ActorCriticAgent(
        *build_actor_critic(env.observation_space, env.action_space)
    )
    factory = tmp_path / "many_envs.py"
    factory.write_text(
        "import gymnasium as gym\n\n"
        "def make_env(env_id='NoSuchEnv-v0', render_mode=None):\n"
        "    return gym.make(env_id, max_episode_steps=6, render_mode=render_mode)\n"
    )
    path = export_policy(
        tmp_path, agent, env_id="CartPole-v1", env_factory=f"{factory}:make_env"
    )
    episodes = enjoy_main([str(path), "--episodes", "2", "--seed", "0"])
    assert len(episodes) == 2 and all(episode.length <= 6 for episode in episodes)
    assert "over 2 episodes" in capsys.readouterr().out


@pytest.mark.skipif(not CAN_RECORD, reason="needs the video extra (moviepy, pygame)")
def test_video_without_opengl_says_how_to_render_headless(tmp_path):
    # MuJoCo on a machine without a display fails in render() like this
    env = gym.make("CartPole-v1")
    agent = ActorCriticAgent(
        *build_actor_critic(env.observation_space, env.action_space)
    )
    factory = tmp_path / "no_gl.py"
    factory.write_text(
        "import gymnasium as gym\n\n"
        "class NoDisplay(gym.Wrapper):\n"
        "    def render(self):\n"
        "        raise RuntimeError('an OpenGL platform library has not been loaded')\n\n"
        "def make_env(render_mode=None):\n"
        "    return NoDisplay(gym.make('CartPole-v1', render_mode=render_mode))\n"
    )
    path = export_policy(tmp_path, agent, env_factory=f"{factory}:make_env")
    with pytest.raises(SystemExit, match="MUJOCO_GL=egl"):
        enjoy_main([str(path), "--episodes", "1", "--video", str(tmp_path / "v")])


def make_cartpole() -> gym.Env:
    """An env factory of an importable module (this one)."""
    return gym.make("CartPole-v1", max_episode_steps=5)


def cartpole_agent() -> ActorCriticAgent:
    env = gym.make("CartPole-v1")
    return ActorCriticAgent(
        *build_actor_critic(env.observation_space, env.action_space)
    )


def test_a_copied_run_directory_finds_its_env_factory_or_names_env(tmp_path):
    """The factory file is recorded relative to the run directory: a copy of
    the project (script and runs) still finds it; a run directory copied
    alone says to pass --env."""
    project = tmp_path / "project"
    (project / "envs").mkdir(parents=True)
    (project / "envs" / "my_envs.py").write_text(
        "import gymnasium as gym\n\n"
        "def make_env():\n"
        "    return gym.make('CartPole-v1', max_episode_steps=7)\n"
    )
    run = RunDirectory.create(project / "runs", "cartpole")
    export_policy(
        run.path, cartpole_agent(), env_factory=f"{project}/envs/my_envs.py:make_env"
    )
    recorded = load_policy(run.path).trained_with["env_factory"]
    assert recorded == "../../envs/my_envs.py:make_env"

    moved = tmp_path / "elsewhere" / "project"
    shutil.copytree(project, moved)
    shutil.rmtree(project)
    moved_run = moved / "runs" / run.path.name
    episodes = enjoy_main([str(moved_run), "--episodes", "2"])
    assert [episode.length <= 7 for episode in episodes] == [True, True]

    alone = tmp_path / "alone" / run.path.name
    shutil.copytree(moved_run, alone)
    with pytest.raises(SystemExit) as info:
        enjoy_main([str(alone), "--episodes", "1"])
    message = str(info.value)
    assert "records the env factory '../../envs/my_envs.py:make_env'" in message
    assert "pass --env" in message
    factory = f"{moved}/envs/my_envs.py:make_env"
    assert len(enjoy_main([str(alone), "--episodes", "1", "--env", factory])) == 1


def test_a_factory_of_an_importable_module_is_recorded_by_name(tmp_path):
    path = export_policy(tmp_path, cartpole_agent(), env_factory=make_cartpole)
    assert load_policy(path).trained_with["env_factory"] == (
        f"{make_cartpole.__module__}:make_cartpole"
    )
    assert len(enjoy_main([str(path), "--episodes", "1"])) == 1


def test_an_episode_cut_by_max_steps_says_so(tmp_path, capsys):
    path = export_policy(tmp_path, cartpole_agent(), env_id="CartPole-v1")
    episodes = enjoy_main([str(path), "--episodes", "2", "--max-steps", "3"])
    assert [(episode.length, episode.cut) for episode in episodes] == [
        (3, True),
        (3, True),
    ]
    out = capsys.readouterr().out
    assert "episode 1: return 3.00, length 3 (cut at max_steps=3: not ended)" in out
    assert "over 2 episodes (2 cut at --max-steps 3)" in out
