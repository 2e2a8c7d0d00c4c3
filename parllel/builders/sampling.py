"""Sample trees, replay trees, in-sampler transforms and the evaluation sampler."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from numpy.typing import DTypeLike

from parllel import fields
from parllel.agents import Handler
from parllel.arrays.array import Storage
from parllel.cages import (
    Cage,
    CageOptions,
    ProcessCage,
    SerialCage,
    TrajInfo,
)
from parllel.samplers import EvalSampler, sample_tree_from_examples
from parllel.samplers.build import with_float_dtype
from parllel.samplers.steps import ObservationNormalizer
from parllel.transforms import (
    ClipRewards,
    EstimateAdvantage,
    NormalizeAdvantage,
    NormalizeObservations,
    NormalizeRewards,
)
from parllel.tree import ArrayDict


def build_sample_tree(
    cage: Cage | Sequence[Cage],
    handler: Handler,
    batch_T: int,
    *,
    storage: Storage | None = None,
    **options: Any,
) -> ArrayDict:
    """Allocate the sample tree for ``cage`` (or several, e.g. the two of an
    alternating sampler: their envs side by side) and ``handler`` (see
    :func:`parllel.samplers.sample_tree_from_examples` for the layout and ``options``).

    Storage defaults to shared memory if any cage is a process cage, local
    otherwise. Observations keep the env's dtype unless
    ``observation_dtype=np.float32`` (say) is among the options: torch models
    cast their input to the model's dtype either way. ``frame_stack=k``
    stores one frame per step of the env's ``k``-frame stacks (Atari; PPO
    rebuilds the stacks per minibatch): see
    :mod:`parllel.frame_stacks.sample_tree`.
    """
    cages = [cage] if isinstance(cage, Cage) else list(cage)
    if storage is None:
        process = any(isinstance(c, ProcessCage) for c in cages)
        storage = "shared" if process else "local"
    example = cages[0].example
    # the agent's example sees what the tree will hold
    observation_dtype = options.get("observation_dtype")
    observation = with_float_dtype(example[fields.OBSERVATION], observation_dtype)
    agent_example = handler.example_outputs(observation)
    n_envs = sum(c.n_envs for c in cages)
    return sample_tree_from_examples(
        example, agent_example, batch_T, n_envs, storage, **options
    )


def build_replay_tree(
    cage: Cage,
    handler: Handler,
    batch_T: int,
    full_size: int,
    *,
    storage: Storage = "local",
    observation_dtype: DTypeLike | None = None,
) -> ArrayDict:
    """Allocate a replay tree of full-size Arrays (``full_size`` rows per env).

    It has the sample tree's layout (observation with its bootstrap row,
    action, reward, terminated, truncated, final observation) so
    ``replay.record_batch(sample_tree)`` copies each batch in. ``full_size``
    is rounded up to a multiple of ``batch_T``; the replay keeps
    ``full_size - 1`` steps per env. Local memory by default: only the main
    process reads it. ``observation_dtype`` as for :func:`build_sample_tree`
    (e.g. ``np.float32``: half the memory for float64 observations).

    Example:
        >>> sample_tree = build_sample_tree(cage, handler, 1, final_observation=True)
        >>> replay_tree = build_replay_tree(cage, handler, 1, full_size=1_000_000)
        >>> replay = UniformReplay(replay_tree, 256, np.random.default_rng(0))
    """
    rows = -(-int(full_size) // int(batch_T)) * int(batch_T)
    return build_sample_tree(
        cage,
        handler,
        batch_T,
        storage=storage,
        full_size=rows,
        env_info=False,
        bootstrap=False,
        final_observation=True,
        previous=False,
        observation_dtype=observation_dtype,
    )


def add_advantage_estimation(
    sample_tree: ArrayDict,
    gamma: float,
    gae_lambda: float,
    *,
    normalize: bool = False,
    only_valid: bool = False,
    truncation_as_termination: bool = False,
) -> list:
    """GAE transforms, optionally normalizing advantages.

    Truncated episodes are bootstrapped from the value of their final
    observation; ``truncation_as_termination=True`` treats a truncation as a
    termination instead (no bootstrap: CleanRL's ``next_done = terminated |
    truncated``; the sample tree then needs no final observations).
    Returns the transforms to put in the pipeline, in order.
    """
    transforms: list = [
        EstimateAdvantage(
            sample_tree,
            gamma,
            gae_lambda,
            truncation_as_termination=truncation_as_termination,
        )
    ]
    if normalize:
        transforms.append(NormalizeAdvantage(sample_tree, only_valid=only_valid))
    return transforms


def add_obs_normalization(
    sample_tree: ArrayDict, **kwargs: Any
) -> NormalizeObservations:
    """An observation normalizer for the sampler (``observation_normalizer=``).

    The sampler normalizes every fresh observation with it before the agent
    acts, and freezes it during evaluation.
    """
    return NormalizeObservations(sample_tree, **kwargs)


def add_reward_normalization(
    sample_tree: ArrayDict,
    gamma: float,
    *,
    clip: float | None = None,
    reset: Literal["episode_end", "termination"] = "episode_end",
    prior_count: float = 0.0,
) -> list:
    """Reward normalization by the running std of the discounted return, then clipping.

    ``reset``: when each env's running return restarts (``"termination"``:
    gymnasium 0.28's ``NormalizeReward``, CleanRL's; see
    :class:`~parllel.transforms.NormalizeRewards`). Put these before
    advantage estimation in the pipeline.
    """
    transforms: list = [
        NormalizeRewards(sample_tree, gamma, reset=reset, prior_count=prior_count)
    ]
    if clip is not None:
        transforms.append(ClipRewards(sample_tree, clip))
    return transforms


def add_reward_clipping(sample_tree: ArrayDict, bound: float = 1.0) -> list:
    """Reward clipping to ``[-bound, bound]`` (Atari's ``[-1, 1]``), in the pipeline.

    The transform clips the sample tree's ``reward`` after sampling, so the
    episode returns the cages report stay the env's; the same as SB3's and
    CleanRL's ``ClipRewardEnv`` (``sign(reward)``) for integer rewards, as all
    Atari games give. Put it before advantage estimation in the pipeline.
    """
    return [ClipRewards(sample_tree, bound)]


def build_eval_sampler(
    env_factory: Callable[..., Any],
    handler: Handler,
    n_envs: int,
    n_episodes: int,
    env_kwargs: dict[str, Any] | None = None,
    *,
    seed: int | Sequence[int] | None = None,
    observation_normalizer: ObservationNormalizer | None = None,
    max_steps: int | None = None,
    traj_info_type: Callable[..., TrajInfo] = TrajInfo,
    traj_info_kwargs: dict[str, Any] | None = None,
) -> tuple[EvalSampler, Cage]:
    """A serial eval cage plus an :class:`~parllel.samplers.EvalSampler` on it.

    Give it ``seed=seeds.eval_envs`` (``Seeds.from_master(..., n_eval_envs=n_envs)``):
    the evaluation envs' own stream, apart from the training envs'.

    ``handler`` must be built for ``n_envs`` envs (it may wrap the training
    agent: evaluation switches it to deterministic ``"eval"`` mode and back).
    ``traj_info_type`` / ``traj_info_kwargs``: the episodes' TrajInfo, as for
    the training cages (e.g. :class:`~parllel.multiagent.MultiAgentTrajInfo`
    for per-agent returns of multi-agent envs).
    Returns the sampler and its cage (close the cage when done).
    """
    options = CageOptions(
        seed=seed,
        traj_info_type=traj_info_type,
        traj_info_kwargs=traj_info_kwargs or {},
    )
    cage = SerialCage(env_factory, n_envs, env_kwargs, options=options)
    tree = build_sample_tree(cage, handler, batch_T=1, storage="local")
    sampler = EvalSampler(
        cage,
        handler,
        tree,
        n_episodes,
        observation_normalizer=observation_normalizer,
        max_steps=max_steps,
    )
    return sampler, cage
