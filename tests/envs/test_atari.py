"""The Atari stack of parllel.envs.atari against SB3's and gymnasium's (bundled ROMs)."""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation  # noqa: E402

from parllel.cages import CageOptions, ProcessCage, SerialCage  # noqa: E402
from parllel.envs.atari import (  # noqa: E402
    GAME_OVER,
    EpisodicLife,
    FireReset,
    GameTrajInfo,
    make_atari_env,
)
from parllel.errors import ConfigError  # noqa: E402
from parllel.logging import EpisodeStats  # noqa: E402
from tests.helpers.cage_helpers import run  # noqa: E402


def _wrappers(env: gym.Env) -> list[type]:
    found = []
    while isinstance(env, gym.Wrapper):
        found.append(type(env))
        env = env.env
    return found


def _sb3_stack(env_id: str, episodic_life: bool) -> gym.Env:
    atari_wrappers = pytest.importorskip("stable_baselines3.common.atari_wrappers")
    env = gym.make(env_id, frameskip=1, repeat_action_probability=0.0)
    env = atari_wrappers.AtariWrapper(
        env, terminal_on_life_loss=episodic_life, clip_reward=False
    )
    return FrameStackObservation(env, 4)


@pytest.mark.parametrize(
    ("env_id", "episodic_life"),
    [("ALE/Breakout-v5", True), ("ALE/Breakout-v5", False), ("ALE/Pong-v5", False)],
)
def test_equals_sb3_atari_wrapper_bit_for_bit(env_id, episodic_life):
    """Same seed and actions: the same frames, rewards and episode ends as SB3's."""
    ours = make_atari_env(env_id, episodic_life=episodic_life)
    theirs = _sb3_stack(env_id, episodic_life)
    rng = np.random.default_rng(0)
    try:
        ours_obs, _ = ours.reset(seed=3)
        theirs_obs, _ = theirs.reset(seed=3)
        np.testing.assert_array_equal(ours_obs, theirs_obs[..., 0])
        ends = games = 0
        for _ in range(800):
            action = int(rng.integers(ours.action_space.n))
            o1, r1, term1, trunc1, _ = ours.step(action)
            o2, r2, term2, trunc2, _ = theirs.step(action)
            assert (r1, term1, trunc1) == (r2, term2, trunc2)
            game_over = ours.unwrapped.ale.game_over()
            # at game over AtariPreprocessing keeps the frame before the last
            # skip (it stops before grabbing it), SB3 the last one: the
            # stacks differ in their newest frame only
            newest = slice(None, -1) if game_over else slice(None)
            np.testing.assert_array_equal(o1[newest], o2[newest][..., 0])
            games += game_over
            if term1 or trunc1:
                ends += 1
                np.testing.assert_array_equal(
                    ours.reset()[0], theirs.reset()[0][..., 0]
                )
        if env_id == "ALE/Breakout-v5":
            assert ends > 0 and games > 0  # random play ends games
    finally:
        ours.close()
        theirs.close()


def test_equals_gymnasium_reference_composition():
    """Without FIRE and episodic life: exactly AtariPreprocessing + FrameStackObservation."""
    import ale_py

    gym.register_envs(ale_py)
    ours = make_atari_env("ALE/Pong-v5", fire_reset=False)
    reference = FrameStackObservation(
        AtariPreprocessing(
            gym.make("ALE/Pong-v5", frameskip=1, repeat_action_probability=0.0)
        ),
        4,
    )
    try:
        np.testing.assert_array_equal(ours.reset(seed=5)[0], reference.reset(seed=5)[0])
        for action in np.random.default_rng(1).integers(6, size=200):
            a, b = ours.step(action), reference.step(action)
            np.testing.assert_array_equal(a[0], b[0])
            assert a[1:4] == b[1:4]
    finally:
        ours.close()
        reference.close()


def test_observation_shape_and_wrappers():
    env = make_atari_env("ALE/Breakout-v5", episodic_life=True)
    try:
        assert env.observation_space.shape == (4, 84, 84)
        assert env.observation_space.dtype == np.uint8
        observation, _ = env.reset(seed=0)
        assert observation.shape == (4, 84, 84) and observation.dtype == np.uint8
        assert _wrappers(env)[:3] == [FrameStackObservation, FireReset, EpisodicLife]
    finally:
        env.close()
    single = make_atari_env("ALE/Breakout-v5", frame_stack=1, fire_reset=False)
    try:
        assert single.observation_space.shape == (84, 84)
        assert FireReset not in _wrappers(single)
    finally:
        single.close()
    with pytest.raises(ConfigError):
        make_atari_env("ALE/Pong-v5", frame_stack=0)


class _RecordActions(gym.Wrapper):
    def __init__(self, env):
        super().__init__(env)
        self.actions = []

    def step(self, action):
        self.actions.append(int(action))
        return self.env.step(action)


def test_fire_reset_presses_fire_after_reset():
    import ale_py

    gym.register_envs(ale_py)
    recorder = _RecordActions(
        AtariPreprocessing(gym.make("ALE/Breakout-v5", frameskip=1), noop_max=0)
    )
    env = FireReset(recorder)
    try:
        env.reset(seed=0)
        assert recorder.actions == [1, 2]
    finally:
        env.close()
    # a game without FIRE at index 1 is refused
    with pytest.raises(ConfigError, match="FIRE"):
        FireReset(gym.make("ALE/MsPacman-v5"))


def test_episodic_life_signals_life_loss_but_resets_only_at_game_over():
    env = make_atari_env("ALE/Breakout-v5", episodic_life=True, noop_max=0)
    ale = env.unwrapped.ale
    rng = np.random.default_rng(0)
    try:
        env.reset(seed=0)
        assert ale.lives() == 5
        life_losses = 0
        while True:
            _, _, terminated, truncated, info = env.step(int(rng.integers(4)))
            if not (terminated or truncated):
                continue
            if info[GAME_OVER]:
                break
            life_losses += 1
            lives, frame = ale.lives(), ale.getEpisodeFrameNumber()
            assert 0 < lives < 5
            env.reset()  # a no-op and FIRE, the same game
            assert ale.lives() == lives
            assert ale.getEpisodeFrameNumber() > frame
        assert life_losses == 4
        env.reset()  # the real game over: a new game
        assert ale.lives() == 5
        assert ale.getEpisodeFrameNumber() < 100
    finally:
        env.close()


@pytest.mark.parametrize("cage_type", ["serial", "process"])
def test_game_traj_info_logs_the_true_game_return(cage_type):
    """A cage with GameTrajInfo: per-life episodes are partial, the game's reports the game."""
    factory = partial(make_atari_env, "ALE/Breakout-v5", episodic_life=True)
    if cage_type == "serial":
        cage = SerialCage(
            factory, 2, options=CageOptions(seed=0, traj_info_type=GameTrajInfo)
        )
    else:
        cage = ProcessCage(
            factory,
            2,
            options=CageOptions(seed=0, traj_info_type=GameTrajInfo),
            start_method="fork",
        )
    with cage:
        _, trajs = run(cage, 500)
    games = [traj for traj in trajs if not traj.partial]
    assert games and len(trajs) > len(games)
    for game in games:
        lives = [t for t in trajs if t.env_index == game.env_index]
        lives = lives[: lives.index(game) + 1]
        lives = lives[len(lives) - 5 :]  # Breakout: five lives per game
        assert all(t.partial for t in lives[:-1])
        per_life = sum(t.return_ for t in lives[:-1]) + game.extra["life_return"]
        assert game.return_ == per_life  # no reward in the resets' no-op/FIRE steps
        assert (
            game.length > sum(t.length for t in lives[:-1]) + game.extra["life_length"]
        )
    stats = EpisodeStats()
    stats.extend(trajs)
    assert stats.episodes == len(games)
    assert stats.metrics()["train/return_mean"] == np.mean([g.return_ for g in games])


def test_game_traj_info_without_episodic_life_is_plain():
    factory = lambda: make_atari_env("ALE/Breakout-v5")  # noqa: E731
    with SerialCage(
        factory, 1, options=CageOptions(seed=0, traj_info_type=GameTrajInfo)
    ) as cage:
        _, trajs = run(cage, 400)
    assert trajs and not any(t.partial for t in trajs)
    assert all("life_return" not in t.extra for t in trajs)


def test_sticky_actions_option():
    env = make_atari_env("ALE/Pong-v5", repeat_action_probability=0.25)
    plain = make_atari_env("ALE/Pong-v5")
    try:
        assert env.unwrapped.ale.getFloat("repeat_action_probability") == 0.25
        assert plain.unwrapped.ale.getFloat("repeat_action_probability") == 0.0
    finally:
        env.close()
        plain.close()
    full = make_atari_env("ALE/Pong-v5", full_action_space=True)
    try:
        assert full.action_space.n == 18
    finally:
        full.close()
