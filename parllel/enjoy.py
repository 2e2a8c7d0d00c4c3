"""Watch a trained policy: evaluate it for a few episodes, optionally on video.

    python -m parllel.enjoy runs/cartpole-ppo-20250101-120000
    python -m parllel.enjoy RUN_DIR --episodes 5 --seed 1
    python -m parllel.enjoy RUN_DIR --video videos/   # needs the video extra
    python -m parllel.enjoy policy.pt --env CartPole-v1
    python -m parllel.enjoy RUN_DIR --env my_envs:make_env --stochastic

The policy is loaded with :func:`load_any_policy` (torch or numpy-played
JAX); the env comes from ``--env``, else the export's ``env_factory`` or
``env_id``. Prints each episode's return and length, then the mean. Details:
docs/training.md ("Exporting a policy and watching it").
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import gymnasium as gym
import numpy as np

from parllel.errors import ConfigError, MissingDependencyError, ParllelError
from parllel.errors.base import install_hint
from parllel.export.numpy_policy import load_numpy_policy, plays_in_numpy

__all__ = [
    "Episode",
    "PlayingPolicy",
    "evaluate",
    "load_any_policy",
    "main",
    "make_env",
    "resolve_env_factory",
]


class PlayingPolicy(Protocol):
    """What :func:`evaluate` plays: :class:`parllel.torch.Policy` or
    :class:`~parllel.export.numpy_policy.NumpyPolicy`."""

    trained_with: dict[str, Any]
    source: Path | None

    def act(self, observation: Any, deterministic: bool = True) -> Any:
        """The action for one observation."""
        ...

    def reset(self, env_indices: Any = None) -> None:
        """Forget the recurrent state."""
        ...


def load_any_policy(
    path: str | os.PathLike[str],
    *,
    clip_actions: bool = False,
    seed: int | None = None,
) -> PlayingPolicy:
    """A run's (or a policy file's) policy, whichever backend trained it.

    A JAX run's ``policy.npz`` (or checkpoints) plays in numpy
    (:func:`~parllel.export.numpy_policy.load_numpy_policy`, no JAX or torch
    imported); anything else is a torch policy
    (:func:`parllel.torch.load_policy`, which imports torch). ``seed`` seeds
    the stochastic actions (torch's global generator for a torch policy).

    Raises:
        PolicyFileError, ConfigError: as the loaders.
    """
    if plays_in_numpy(path):
        return load_numpy_policy(path, clip_actions=clip_actions, seed=seed)
    import torch  # only a torch policy needs it

    from parllel.torch import load_policy

    if seed is not None:
        torch.manual_seed(seed)
    return load_policy(path, clip_actions=clip_actions)


_VIDEO_HINT = (
    f"{install_hint('video')}: moviepy writes the video, pygame renders "
    "gymnasium's classic-control envs"
)


def _load_module(source: str, directory: Path | None = None) -> Any:
    if source.endswith(".py"):
        path = Path(source).expanduser()
        if directory is not None and not path.is_absolute():
            path = directory / path
        if not path.is_file():
            raise ConfigError(f"env factory file {path} does not exist")
        spec = importlib.util.spec_from_file_location(f"_enjoy_env_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise ConfigError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[spec.name]
            raise
        return module
    try:
        return importlib.import_module(source)
    except ImportError as error:
        raise ConfigError(
            f"cannot import env factory module {source!r}: {error}"
        ) from error


def resolve_env_factory(
    env: str, directory: str | os.PathLike[str] | None = None
) -> Callable[..., gym.Env]:
    """A function building the env named by ``env``.

    ``env`` is ``"module:function"`` or ``"path/to/file.py:function"`` (the
    part after the last colon is a Python name), or else a gymnasium id
    (``"CartPole-v1"``, also ``"module:EnvId-v0"``), built by ``gym.make``.
    A relative file path is relative to ``directory`` if given (a run
    directory, for the factory its policy file records), else to the
    current directory.

    Raises:
        ConfigError: the module, file or function does not exist (and, when
            the returned function is called, gymnasium has no env ``env``).
    """
    source, _, name = env.rpartition(":")
    if source and name.isidentifier():
        base = None if directory is None else Path(directory)
        factory = getattr(_load_module(source, base), name, None)
        if not callable(factory):
            raise ConfigError(f"{source} has no function {name!r}")
        return factory

    def make(**kwargs: Any) -> gym.Env:
        try:
            return gym.make(env, **kwargs)
        except gym.error.Error as error:  # no such id, namespace or version
            raise ConfigError(
                f"gymnasium cannot make {env!r} ({type(error).__name__}: {error}); "
                "pass --env with a registered gymnasium id or the function that "
                "builds the env (module:function or file.py:function)"
            ) from error

    return make


def _has_parameter(factory: Callable[..., Any], name: str, *, var_kw: bool) -> bool:
    """True if ``factory`` takes a keyword ``name`` (or any keyword, if ``var_kw``)."""
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return var_kw
    return any(
        (p.name == name and p.kind is not inspect.Parameter.POSITIONAL_ONLY)
        or (var_kw and p.kind is inspect.Parameter.VAR_KEYWORD)
        for p in parameters
    )


def _accepts_render_mode(factory: Callable[..., Any]) -> bool:
    return _has_parameter(factory, "render_mode", var_kw=True)


def make_env(
    env: str | Callable[..., gym.Env],
    *,
    video_dir: str | None = None,
    env_id: str | None = None,
    directory: str | os.PathLike[str] | None = None,
) -> gym.Env:
    """Build the env (recording every episode into ``video_dir`` if given).

    Args:
        env: a gymnasium id, ``"module:function"``, ``"file.py:function"``
            or the function itself.
        directory: what a relative file path is relative to (see
            :func:`resolve_env_factory`).
        video_dir: record every episode into this directory.
        env_id: passed as ``env_id=`` to a factory that has an ``env_id``
            parameter (ignored for a gymnasium id and other factories).

    Raises:
        ConfigError: the env cannot render ``rgb_array`` frames for a video.
        MissingDependencyError: moviepy is missing for a video.
    """
    factory = env if callable(env) else resolve_env_factory(env, directory)
    if callable(env):
        env = getattr(env, "__qualname__", repr(env))
    if env_id is not None and _has_parameter(factory, "env_id", var_kw=False):
        factory = functools.partial(factory, env_id=env_id)
    if video_dir is None:
        return factory()
    if importlib.util.find_spec("moviepy") is None:
        raise MissingDependencyError(f"--video needs moviepy: {_VIDEO_HINT}")
    if not _accepts_render_mode(factory):
        raise ConfigError(
            f"--video: the env factory {env} takes no render_mode argument; give "
            "it one (render_mode=None, passed on to gymnasium.make) so it can "
            "render rgb_array frames"
        )
    instance = factory(render_mode="rgb_array")
    if instance.render_mode != "rgb_array":
        instance.close()
        raise ConfigError(
            f"--video: {env} renders {instance.render_mode!r}, not 'rgb_array' frames"
        )
    return gym.wrappers.RecordVideo(
        instance, video_dir, episode_trigger=lambda _: True, name_prefix="enjoy"
    )


class Episode(NamedTuple):
    """One evaluated episode: its return and length, and whether ``max_steps``
    cut it before it ended."""

    return_: float
    length: int
    cut: bool = False


def evaluate(
    policy: PlayingPolicy,
    env: gym.Env,
    episodes: int,
    *,
    seed: int | None = None,
    deterministic: bool = True,
    max_steps: int | None = None,
    report: Callable[[str], None] = print,
) -> list[Episode]:
    """Run ``episodes`` episodes of ``policy`` in ``env``; return each
    :class:`Episode` (an episode cut at ``max_steps`` is reported as cut).

    The first reset is seeded with ``seed`` (the later ones continue the
    env's random stream); the policy's recurrent state is reset at every
    episode start.

    Raises:
        MissingDependencyError: the env cannot render for lack of a package.
    """
    results = []
    try:
        for episode in range(episodes):
            observation, _ = env.reset(seed=seed if episode == 0 else None)
            policy.reset()
            total, length, done = 0.0, 0, False
            while not done and (max_steps is None or length < max_steps):
                action = policy.act(observation, deterministic=deterministic)
                observation, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                length += 1
                done = terminated or truncated
            results.append(Episode(total, length, cut=not done))
            line = f"episode {episode + 1}: return {total:.2f}, length {length}"
            if not done:
                line += f" (cut at max_steps={max_steps}: not ended)"
            report(line)
    except gym.error.DependencyNotInstalled as error:  # e.g. rendering for a video
        raise MissingDependencyError(f"{error}; {_VIDEO_HINT}") from error
    return results


_ENV_HINT = "pass --env (a gymnasium id, module:function or file.py:function)"


def _recorded_env(
    args: argparse.Namespace, policy: PlayingPolicy, env_name: str
) -> gym.Env:
    """The env of ``--env``, or the one the policy records (a factory's
    relative path is relative to the run directory)."""
    env_id = policy.trained_with.get("env_id")
    if args.env or env_name != policy.trained_with.get("env_factory"):
        return make_env(env_name, video_dir=args.video, env_id=env_id)
    path = Path(args.path)
    try:
        factory = resolve_env_factory(env_name, path if path.is_dir() else path.parent)
    except ConfigError as error:
        raise ConfigError(
            f"{policy.source} records the env factory {env_name!r}, which is not "
            f"found here ({error}); {_ENV_HINT}"
        ) from None
    return make_env(factory, video_dir=args.video, env_id=env_id)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m parllel.enjoy",
        description="Evaluate a trained policy for a few episodes (and record them).",
    )
    parser.add_argument("path", help="a run directory or a policy file")
    parser.add_argument("--episodes", type=int, default=3, help="episodes to run")
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the first reset and of --stochastic's action sampling "
        "(default: 0, so a rerun plays the same episodes)",
    )
    parser.add_argument(
        "--stochastic", action="store_true", help="sample actions (default: the mode)"
    )
    parser.add_argument(
        "--env",
        default=None,
        help="gymnasium id, module:function or file.py:function building the env "
        "(default: what the export records)",
    )
    parser.add_argument("--video", metavar="DIR", default=None, help="record episodes")
    parser.add_argument(
        "--max-steps", type=int, default=None, help="cut episodes at this length"
    )
    parser.add_argument(
        "--clip-actions", action="store_true", help="clip Box actions into the bounds"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> list[Episode]:
    """The command line; returns each :class:`Episode`."""
    args = _parser().parse_args(argv)
    if args.episodes < 1:
        raise SystemExit(f"--episodes must be >= 1, got {args.episodes}")
    try:
        policy = load_any_policy(
            args.path, clip_actions=args.clip_actions, seed=args.seed
        )
        trained = policy.trained_with
        env_name = args.env or trained.get("env_factory") or trained.get("env_id")
        if not env_name:
            raise ConfigError(f"{policy.source} records no env: {_ENV_HINT}")
        env = _recorded_env(args, policy, env_name)
        print(f"{policy} from {policy.source}")
        try:
            results = evaluate(
                policy,
                env,
                args.episodes,
                seed=args.seed,
                deterministic=not args.stochastic,
                max_steps=args.max_steps,
            )
        except Exception as error:
            if args.video and "OpenGL" in str(error):  # MuJoCo without a display
                raise ConfigError(
                    f"--video: the env cannot render ({type(error).__name__}: "
                    f"{error}); on a machine without a display, MuJoCo envs "
                    "render with MUJOCO_GL=egl (or MUJOCO_GL=osmesa) set in the "
                    "environment"
                ) from error
            raise
        finally:
            env.close()
    except ParllelError as error:  # said plainly, without a traceback
        raise SystemExit(f"python -m parllel.enjoy: {error}") from None
    returns = np.array([episode.return_ for episode in results])
    lengths = np.array([episode.length for episode in results])
    cut = sum(episode.cut for episode in results)
    print(
        f"mean return {returns.mean():.2f} +- {returns.std():.2f}, mean length "
        f"{lengths.mean():.1f} over {len(results)} episodes"
        + (f" ({cut} cut at --max-steps {args.max_steps})" if cut else "")
    )
    if args.video:
        print(f"videos in {args.video}")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
