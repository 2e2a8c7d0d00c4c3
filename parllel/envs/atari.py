"""The standard Atari preprocessing, built on gymnasium's wrappers.

:func:`make_atari_env` builds the stack of the DQN and PPO papers (SB3's
``AtariWrapper``, CleanRL's ``ppo_atari.py``): ``AtariPreprocessing``,
:class:`EpisodicLife`, :class:`FireReset` and ``FrameStackObservation``.
Reward clipping is a transform (:func:`parllel.builders.add_reward_clipping`),
so returns stay true. Needs the ``atari`` extra; see docs/atari.md ("The
env stack").
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

from parllel.cages.traj_info import TrajInfo
from parllel.errors import ConfigError, MissingDependencyError
from parllel.errors.base import install_hint
from parllel.validation import check_at_least

__all__ = [
    "GAME_LENGTH",
    "GAME_OVER",
    "GAME_RETURN",
    "EpisodicLife",
    "FireReset",
    "GameTrajInfo",
    "make_atari_env",
    "needs_fire_reset",
]

GAME_RETURN = "game_return"
"""info key of :class:`EpisodicLife`: the game's undiscounted return so far"""
GAME_LENGTH = "game_length"
"""info key of :class:`EpisodicLife`: the game's env steps so far"""
GAME_OVER = "game_over"
"""info key of :class:`EpisodicLife`: whether the game itself has ended"""


def _ale(env: gym.Env) -> Any:
    ale = getattr(env.unwrapped, "ale", None)
    if ale is None:
        raise ConfigError(
            f"{type(env.unwrapped).__name__} is not an ALE env (no .ale); the "
            "Atari wrappers need one made by ale-py (gym.make('ALE/...'))"
        )
    return ale


class FireReset(gym.Wrapper):
    """Press FIRE (then UP) after every reset, for games that wait for it.

    As SB3's ``FireResetEnv``: after the inner reset, step FIRE (action 1)
    and action 2; if either ends the episode, reset again. Apply it only to
    games whose action meanings have FIRE at index 1 (:func:`needs_fire_reset`).

    Raises:
        ConfigError: the game's action 1 is not FIRE.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        if not needs_fire_reset(env):
            raise ConfigError(
                "FireReset needs a game whose action 1 is FIRE (and with at "
                f"least 3 actions); got {env.unwrapped.get_action_meanings()}"  # type: ignore[attr-defined]
            )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset, then step FIRE and action 2 (resetting again if they end it)."""
        observation, info = self.env.reset(seed=seed, options=options)
        for action in (1, 2):
            observation, _, terminated, truncated, _ = self.env.step(action)
            if terminated or truncated:
                observation, info = self.env.reset(options=options)
        return observation, info


def needs_fire_reset(env: gym.Env) -> bool:
    """Whether the game's action 1 is FIRE (and it has at least 3 actions)."""
    meanings = env.unwrapped.get_action_meanings()  # type: ignore[attr-defined]
    return len(meanings) >= 3 and meanings[1] == "FIRE"


class EpisodicLife(gym.Wrapper):
    """A lost life ends the episode; only a real game over resets the game.

    As SB3's ``EpisodicLifeEnv`` (unlike gymnasium's
    ``terminal_on_life_loss``, which resets the whole game at every lost
    life): a step that loses a life returns ``terminated=True``; the next
    :meth:`reset` then only steps a no-op, unless the game really ended.
    Every step's info also carries the game's running totals,
    :data:`GAME_RETURN` (rewards as the env gives them), :data:`GAME_LENGTH`
    (env steps, the resets' no-op and FIRE steps included) and
    :data:`GAME_OVER`; :class:`GameTrajInfo` turns them into the game's
    episode statistics.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._ale = _ale(env)
        self.lives = 0
        self.game_over = True
        self.game_return = 0.0
        self.game_length = 0

    def step(
        self, action: Any
    ) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step; ``terminated`` also when a life is lost."""
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._account(reward, 1)
        self.game_over = bool(terminated or truncated)
        lives = int(self._ale.lives())
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        info = {**info, **self._totals()}
        return observation, reward, terminated, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the game if it is over (or a seed is given); else step a no-op."""
        if self.game_over or seed is not None:
            observation, info = self._reset_game(seed, options)
        else:
            observation, reward, terminated, truncated, info = self.env.step(0)
            self._account(reward, 0)
            if terminated or truncated:
                observation, info = self._reset_game(None, options)
        self.lives = int(self._ale.lives())
        return observation, {**info, **self._totals()}

    def _reset_game(
        self, seed: int | None, options: dict[str, Any] | None
    ) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        self.game_over = False
        self.game_return = 0.0
        self.game_length = 0
        return observation, info

    def _account(self, reward: SupportsFloat, steps: int) -> None:
        self.game_return += float(reward)
        self.game_length += steps

    def _totals(self) -> dict[str, Any]:
        return {
            GAME_RETURN: self.game_return,
            GAME_LENGTH: self.game_length,
            GAME_OVER: self.game_over,
        }


class GameTrajInfo(TrajInfo):
    """Episode statistics of whole games under :class:`EpisodicLife`.

    Give it to the training cages (``traj_info_type=GameTrajInfo``). An
    episode that ends with a lost life while the game goes on is marked
    ``partial`` (the logged episode statistics skip it); the episode that
    ends the game reports the game's ``return_`` and ``length`` (as the env
    gives them, before any reward clipping), with the last life's in
    ``extra["life_return"]`` and ``extra["life_length"]``.
    ``discounted_return`` stays the last life's (the return the learner
    discounts under episodic life). Without :class:`EpisodicLife` (no game
    totals in the info) it is a plain :class:`TrajInfo`.
    """

    def step(
        self,
        observation: Any,
        action: Any,
        reward: float,
        terminated: bool,
        truncated: bool,
        env_info: dict[str, Any],
    ) -> None:
        """Account for one env step and keep the game's running totals."""
        super().step(observation, action, reward, terminated, truncated, env_info)
        if GAME_RETURN in env_info:
            self.extra[GAME_RETURN] = float(env_info[GAME_RETURN])
            self.extra[GAME_LENGTH] = int(env_info[GAME_LENGTH])
            self.extra[GAME_OVER] = bool(env_info[GAME_OVER])

    def finish(
        self, terminated: bool, truncated: bool, env_info: dict[str, Any]
    ) -> None:
        """Close the episode: partial, or the whole game's statistics."""
        super().finish(terminated, truncated, env_info)
        if GAME_RETURN not in self.extra:
            return
        if not self.extra.pop(GAME_OVER):
            self.partial = True
            return
        self.extra["life_return"] = self.return_
        self.extra["life_length"] = self.length
        self.return_ = self.extra.pop(GAME_RETURN)
        self.length = self.extra.pop(GAME_LENGTH)


def make_atari_env(
    env_id: str = "ALE/Pong-v5",
    *,
    frame_stack: int = 4,
    noop_max: int = 30,
    frame_skip: int = 4,
    screen_size: int = 84,
    repeat_action_probability: float = 0.0,
    episodic_life: bool = False,
    fire_reset: bool | None = None,
    full_action_space: bool = False,
    render_mode: str | None = None,
    **ale_kwargs: Any,
) -> gym.Env:
    """An ALE env with the standard Atari preprocessing.

    ``gym.make(env_id, frameskip=1)``, ``AtariPreprocessing`` (no-ops, frame
    skip with max-pooling, grayscale, resize), then optionally
    :class:`EpisodicLife`, :class:`FireReset` and ``FrameStackObservation``.
    Observations are ``uint8`` ``(frame_stack, screen_size, screen_size)``
    (see docs/atari.md).

    Example:
        >>> env = make_atari_env("ALE/Breakout-v5", episodic_life=True)
        >>> env.observation_space.shape
        (4, 84, 84)

    Args:
        env_id: an ALE v5 id (``"ALE/Pong-v5"``, ``"ALE/Breakout-v5"``).
        frame_stack: frames per observation (1: one ``(84, 84)`` frame).
        noop_max: at most this many no-ops after a game reset (0: none).
        repeat_action_probability: ALE's sticky actions (0.25 per Machado et al.).
        episodic_life: a lost life ends the episode; log games with
            :class:`GameTrajInfo`.
        fire_reset: press FIRE after resets; None: where the game needs it.
        full_action_space: all 18 ALE actions instead of the game's minimal set.
        **ale_kwargs: more keyword arguments for ``gym.make``.
    """
    _require_atari()
    check_at_least("frame_stack", frame_stack)
    env = gym.make(
        env_id,
        frameskip=1,
        repeat_action_probability=repeat_action_probability,
        full_action_space=full_action_space,
        render_mode=render_mode,
        **ale_kwargs,
    )
    env = AtariPreprocessing(
        env, noop_max=noop_max, frame_skip=frame_skip, screen_size=screen_size
    )
    if episodic_life:
        env = EpisodicLife(env)
    if fire_reset is None:
        fire_reset = needs_fire_reset(env)
    if fire_reset:
        env = FireReset(env)
    if frame_stack > 1:
        env = FrameStackObservation(env, frame_stack)
    return env


def _require_atari() -> None:
    """Import ale-py (registering its envs) and OpenCV, or say what to install."""
    try:
        import ale_py
        import cv2  # noqa: F401  (AtariPreprocessing resizes with it)
    except ModuleNotFoundError as exc:
        raise MissingDependencyError(
            f"make_atari_env needs ale-py and OpenCV ({exc.name} is missing): "
            f"{install_hint('atari')}"
        ) from exc
    gym.register_envs(ale_py)
