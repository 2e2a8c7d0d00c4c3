"""Whether an env can move between stepping processes (load balancing).

A moved env is pickled with its episode state and continues in another
process exactly where it was. Envs that pickle by re-construction
(gymnasium's ``EzPickle``, e.g. every MuJoCo and Atari env) would come back
reset, so they are refused; :func:`move_refusal` says why, for the cage that
moves envs and for tools that want to know before asking for balancing
(``python -m parllel.bench``).
"""

from __future__ import annotations

from typing import Any

from gymnasium.utils import EzPickle

__all__ = ["move_refusal"]


def move_refusal(env: Any, env_index: int | None = None) -> str | None:
    """Why ``env`` cannot be moved to another process, or None if it can.

    Example:
        >>> move_refusal(gym.make("HalfCheetah-v5"))
        'HalfCheetahEnv pickles by re-construction (EzPickle) and would lose its state if moved'
    """
    unwrapped = getattr(env, "unwrapped", env)
    if isinstance(unwrapped, EzPickle):
        which = f"env {env_index} ({type(unwrapped).__name__})"
        if env_index is None:
            which = type(unwrapped).__name__
        return f"{which} pickles by re-construction (EzPickle) and would lose its state if moved"
    return None
