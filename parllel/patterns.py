"""Small functions that wire the common setups; every object stays replaceable.

A training script calls these instead of repeating the wiring, but still
holds every object they return (cages, handler, sample tree, transforms,
samplers) and can swap any of them. Nothing here hides the algorithm.

Example:
    >>> cage = build_cages(make_env, n_envs=8, seed=0)
    >>> handler = TorchHandler(agent, n_envs=cage.n_envs)
    >>> sample_tree = build_sample_tree(cage, handler, batch_T=128)
    >>> gae = add_advantage_estimation(sample_tree, gamma=0.99, gae_lambda=0.95)
    >>> transform = Compose(gae)  # a list of transforms, run in order
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from numbers import Integral
from signal import SIGINT
from typing import Any, TypedDict

from parllel import fields
from parllel.agents import Handler
from parllel.arrays import Storage
from parllel.cages import (
    Cage,
    ProcessCage,
    SerialCage,
    TrajInfo,
    suggest_layout_for,
)
from parllel.errors import CheckpointError, ConfigError, RunDirectoryError
from parllel.samplers import (
    EvalSampler,
    ObservationNormalizer,
    sample_tree_from_examples,
)
from parllel.transforms import (
    ClipRewards,
    EstimateAdvantage,
    NormalizeAdvantage,
    NormalizeObservations,
    NormalizeRewards,
)
from parllel.tree import ArrayDict

PARALLEL_CHOICES = ("auto", "process", "serial")


class _CageOptions(TypedDict):
    """The arguments a SerialCage and a ProcessCage share (besides the envs)."""

    seed: int | Sequence[int] | None
    env_offset: int
    reset_mode: str
    traj_info_type: Callable[..., TrajInfo]
    traj_info_kwargs: dict[str, Any] | None


def build_cages(
    env_factory: Callable[..., Any],
    n_envs: int,
    env_kwargs: dict[str, Any] | None = None,
    *,
    parallel: str = "auto",
    seed: int | Sequence[int] | None = None,
    env_offset: int = 0,
    reset_mode: str = "auto",
    traj_info_type: Callable[..., TrajInfo] = TrajInfo,
    traj_info_kwargs: dict[str, Any] | None = None,
    **process_kwargs: Any,
) -> Cage:
    """One cage for ``n_envs`` envs: in worker processes, or serial.

    ``parallel="auto"`` times a few steps of one env and a synchronization
    with a helper process, and asks :func:`~parllel.cages.suggest_layout`
    whether processes can win on this machine (and with which layout);
    ``"process"`` always uses a
    :class:`~parllel.cages.ProcessCage` (layout from ``process_kwargs``, or
    suggested, falling back to one worker per core); ``"serial"`` a
    :class:`~parllel.cages.SerialCage`. Same seed, same results either way.
    ``seed``: a master seed or one seed per env (``seeds.envs``; the same
    seeds, see :mod:`parllel.seeding`).
    """
    if parallel not in PARALLEL_CHOICES:
        raise ConfigError(
            f"parallel must be one of {PARALLEL_CHOICES}, got {parallel!r}"
        )
    common: _CageOptions = {
        "seed": seed,
        "env_offset": env_offset,
        "reset_mode": reset_mode,
        "traj_info_type": traj_info_type,
        "traj_info_kwargs": traj_info_kwargs,
    }
    layout = None
    if parallel != "serial" and not {"envs_per_worker", "n_workers"} & set(
        process_kwargs
    ):
        layout = suggest_layout_for(
            env_factory, n_envs, env_kwargs, process_kwargs.get("start_method")
        )
    if parallel == "serial" or (parallel == "auto" and layout is None):
        return SerialCage(env_factory, n_envs, env_kwargs, **common)
    return ProcessCage(
        env_factory,
        n_envs,
        env_kwargs,
        **{**(layout or {}), **process_kwargs},
        **common,
    )


def build_alternating_cages(
    env_factory: Callable[..., Any],
    n_envs: int,
    env_kwargs: dict[str, Any] | None = None,
    *,
    seed: int | Sequence[int] | None = None,
    traj_info_type: Callable[..., TrajInfo] = TrajInfo,
    traj_info_kwargs: dict[str, Any] | None = None,
    share_core: bool | None = None,
    pin_main_process: bool = False,
    **process_kwargs: Any,
) -> list[ProcessCage]:
    """The two cages of an :class:`~parllel.samplers.AlternatingSampler`.

    Envs ``[0, n // 2)`` and ``[n // 2, n)``, one worker each. Only one half
    steps at a time (the main process infers for the other), so with
    ``share_core`` both workers are pinned to the last usable CPU and poll
    (yielding) between steps instead of blocking: the idle worker yields the
    core to the stepping one, and no blocking wake-up (tens of µs, docs/cages.md) is paid
    per half step. ``pin_main_process`` also restricts this process to the
    other CPUs, so the OS never runs inference on the workers' core (a process
    setting: it stays after the cages close, and worker processes started
    later with ``fork``/``spawn`` inherit it unless given ``worker_cpus``;
    measured in ``benchmarks/sampler_throughput.py``). Default: share a core when there
    are 2 or 3 usable CPUs (with more, each worker gets its own core and the
    cage's default polling applies). ``seed``: a master seed or one seed per
    env (split between the halves). Other keyword arguments go to both
    :class:`~parllel.cages.ProcessCage`s.

    Example:
        >>> cages = build_alternating_cages(make_env, 8, seed=0)
        >>> sampler = AlternatingSampler(cages, handler, sample_tree)
    """
    if n_envs < 2:
        raise ConfigError(f"alternating sampling needs n_envs >= 2, got {n_envs}")
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if share_core is None:
        share_core = 2 <= len(cpus) <= 3
    if share_core:
        if not cpus:
            raise ConfigError("share_core needs os.sched_setaffinity (Linux)")
        process_kwargs = {
            "worker_cpus": cpus[-1:],
            "worker_spin_seconds": 0.002,
            **process_kwargs,
        }
    half = n_envs // 2
    seeds: tuple[Any, Any] = (seed, seed)
    if seed is not None and not isinstance(seed, (int, Integral)):
        seed = list(seed)
        if len(seed) != n_envs:
            raise ConfigError(f"seed holds {len(seed)} per-env seeds for {n_envs} envs")
        seeds = (seed[:half], seed[half:])
    common = {
        "n_workers": 1,
        "traj_info_type": traj_info_type,
        "traj_info_kwargs": traj_info_kwargs,
        **process_kwargs,
    }
    first = ProcessCage(env_factory, half, env_kwargs, seed=seeds[0], **common)
    try:
        second = ProcessCage(
            env_factory,
            n_envs - half,
            env_kwargs,
            seed=seeds[1],
            env_offset=half,
            **common,
        )
    except BaseException:
        first.close()
        raise
    if share_core and pin_main_process:
        os.sched_setaffinity(0, set(cpus[:-1]))
    return [first, second]


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
    otherwise.
    """
    cages = [cage] if isinstance(cage, Cage) else list(cage)
    if storage is None:
        process = any(isinstance(c, ProcessCage) for c in cages)
        storage = "shared" if process else "local"
    example = cages[0].example
    agent_example = handler.example_outputs(example[fields.OBSERVATION])
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
) -> ArrayDict:
    """Allocate a replay tree of full-size Arrays (``full_size`` rows per env).

    It has the sample tree's layout (observation with its bootstrap row,
    action, reward, terminated, truncated, final observation) so
    ``replay.record_batch(sample_tree)`` copies each batch in. ``full_size``
    is rounded up to a multiple of ``batch_T``; the replay keeps
    ``full_size - 1`` steps per env. Local memory by default: only the main
    process reads it.

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
    )


def add_advantage_estimation(
    sample_tree: ArrayDict,
    gamma: float,
    gae_lambda: float,
    *,
    normalize: bool = False,
    only_valid: bool = False,
) -> list:
    """GAE transforms (bootstrapping truncations), optionally normalizing advantages.

    Returns the transforms to put in the pipeline, in order.
    """
    transforms: list = [EstimateAdvantage(sample_tree, gamma, gae_lambda)]
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
    sample_tree: ArrayDict, gamma: float, *, clip: float | None = None
) -> list:
    """Reward normalization by the running std of the discounted return, then clipping.

    Put these before advantage estimation in the pipeline.
    """
    transforms: list = [NormalizeRewards(sample_tree, gamma)]
    if clip is not None:
        transforms.append(ClipRewards(sample_tree, clip))
    return transforms


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
) -> tuple[EvalSampler, Cage]:
    """A serial eval cage plus an :class:`~parllel.samplers.EvalSampler` on it.

    Give it ``seed=seeds.eval_envs`` (``Seeds.from_master(..., n_eval_envs=n_envs)``):
    the evaluation envs' own stream, apart from the training envs'.

    ``handler`` must be built for ``n_envs`` envs (it may wrap the training
    agent: evaluation switches it to deterministic ``"eval"`` mode and back).
    Returns the sampler and its cage (close the cage when done).
    """
    cage = SerialCage(env_factory, n_envs, env_kwargs, seed=seed)
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


def build_run_logger(
    run: Any,
    total_steps: int,
    *,
    resume: bool = False,
    resume_step: int | None = None,
    table_every: int = 4,
) -> Any:
    """The usual loggers of a run directory: console table, CSV, TensorBoard, progress bar.

    The console table shows returns, losses, steps/s and elapsed time every
    ``table_every``-th log line and at the end, written through the progress
    bar so the two never collide; every metric goes to ``progress.csv`` and
    TensorBoard.

    ``resume=True`` keeps the run's ``progress.csv`` and TensorBoard events;
    :meth:`Runner.load <parllel.runners.Runner.load>` then rewinds them to the
    checkpoint's step (rows and events logged after it are dropped, so no step
    appears twice). Without a runner, pass ``resume_step`` to rewind here.

    Needs the ``torch`` and ``logging`` extras (TensorBoard, and tqdm for the
    bar in a terminal).
    """
    from parllel.logging import (
        CsvSink,
        MultiLogger,
        ProgressBar,
        StdoutTable,
        TensorBoardSink,
    )

    bar = ProgressBar(total=total_steps)
    logger = MultiLogger(
        [
            StdoutTable(every=table_every, progress_bar=bar),
            CsvSink(run.progress_csv, resume=resume),
            TensorBoardSink(run.tensorboard_dir),
            bar,
        ]
    )
    if resume and resume_step is not None:
        logger.rewind(resume_step)
    return logger


def run_training(
    runner: Any, run: Any, *, resume: bool = False, close: tuple = ()
) -> dict[str, float]:
    """Resume if asked, run, always close ``close`` (and the runner's logger), plot.

    Prints the outcome. After a normal end: the final eval return and the run
    directory; the last metrics are returned. A resumed run that had already
    finished trains nothing and says so (returns ``{}``). A resume that fails
    (no readable checkpoint, one that does not fit) prints why, without a
    traceback, and exits with status 1. After Ctrl-C: the checkpoint written,
    the run directory and the command that resumes it, then ``SystemExit(130)``
    (the shell's status for Ctrl-C; 143 after SIGTERM), also after a second
    Ctrl-C that skipped the checkpoint (which says so when the run has no
    checkpoint to resume from). ``close`` holds anything with ``close()``
    (cages, sample trees). The learning curve needs the ``plot`` extra.
    """
    from parllel.plot import plot_learning_curve
    from parllel.runtime.cli import resume_command

    summary: dict[str, float] = {}
    already_finished = exited_at_once = False
    resume_error: Exception | None = None
    try:
        if resume:
            try:
                runner.load(run.checkpoints_dir)
            except (CheckpointError, RunDirectoryError) as error:
                resume_error = error
            else:
                run.record_resume(
                    runner.env_steps, runner.resumed_from, config=runner.config or None
                )
        if resume_error is None:
            already_finished = runner.finished
            if not already_finished:
                summary = runner.run()
    except KeyboardInterrupt:
        exited_at_once = True
    finally:
        for obj in (runner.logger, *close):
            if obj is not None:
                obj.close()
    signals = getattr(runner, "stop_signals", None)
    status = 128 + int(signals[-1] if signals else SIGINT)
    if resume_error is not None:
        print(f"cannot resume {run.path}: {resume_error}", file=sys.stderr)
        raise SystemExit(1)
    if exited_at_once:
        newest = run.latest_checkpoint()
        if newest is None:
            print(
                "interrupted before the first checkpoint: the run cannot be "
                f"resumed (nothing in {run.checkpoints_dir}); run in {run.path}"
            )
        else:
            print(f"interrupted: exited without a new checkpoint; run in {run.path}")
            print(f"newest checkpoint: {newest}")
            print(f"resume with: {resume_command(run.path)}")
        raise SystemExit(status)
    if already_finished:
        print(
            f"run already finished: {runner.env_steps} of total_steps "
            f"{runner.total_steps} env steps done, nothing to train (resume "
            f"with a larger --total-steps to train further); run in {run.path}"
        )
        return {}
    try:
        plot_learning_curve(run.path)
    except (ConfigError, FileNotFoundError) as error:  # e.g. nothing logged yet
        print(f"no learning curve: {error}")
    if runner.interrupted:
        print(f"interrupted at step {runner.env_steps}; run in {run.path}")
        if runner.last_checkpoint is not None:
            print(f"checkpoint written: {runner.last_checkpoint}")
            print(f"resume with: {resume_command(run.path)}")
        raise SystemExit(status)
    eval_return = summary.get("eval/return_mean", float("nan"))
    print(
        f"eval return {eval_return:.1f} after {runner.env_steps} steps; run in {run.path}"
    )
    return summary
