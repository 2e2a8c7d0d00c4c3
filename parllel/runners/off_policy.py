"""OffPolicyRunner: collect a batch into the replay, then update from samples."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from parllel.checkpoints.compatibility import CountedState
from parllel.errors import ConfigError
from parllel.replays.transitions import ReplayBatch
from parllel.runners.callbacks import Callback
from parllel.runners.notices import warn_learning_never_starts
from parllel.runners.runner import Runner
from parllel.samplers.protocols import AsyncSampler, TrainingSampler

__all__ = [
    "AttributeSchedule",
    "OffPolicyAlgorithm",
    "OffPolicyRunner",
    "ReplayCheckpoint",
    "RunnerReplay",
]


class RunnerReplay(Protocol):
    """What :class:`OffPolicyRunner` and its algorithm need from a replay
    (:class:`~parllel.replays.UniformReplay`, ``PrioritizedReplay``)."""

    learning_starts: int
    batch_size: int

    def __len__(self) -> int:
        """Transitions stored (offered for sampling)."""
        ...

    @property
    def ready(self) -> bool:
        """Whether ``learning_starts`` transitions are stored."""
        ...

    def record_batch(self, batch: Mapping[str, Any] | None = None) -> int:
        """Store (or declare stored) the batch just collected."""
        ...

    def sample(self) -> ReplayBatch:
        """A batch of stored transitions."""
        ...

    def state_dict(
        self, include_contents: bool = False, copy: bool = True
    ) -> dict[str, Any]:
        """Counters, RNG state (and every stored row with ``include_contents``)."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        ...


class OffPolicyAlgorithm(Protocol):
    """What :class:`OffPolicyRunner` calls on its algorithm (e.g. SAC, DQN)."""

    def optimize(
        self, replay: RunnerReplay, new_steps: int | None = None
    ) -> Mapping[str, float]:
        """Run the updates ``new_steps`` new env steps allow, from ``replay``."""
        ...


class ReplayCheckpoint:
    """A replay as a checkpoint object, with or without its stored rows.

    Counters, window position and RNG state are always saved; the rows
    (``include_contents=True``) can be large, so they are optional. Without
    them a resumed run refills the replay (``learning_starts`` again).

    Args:
        replay: a :mod:`parllel.replays` replay.
        include_contents: also save every stored transition.
    """

    def __init__(self, replay: RunnerReplay, include_contents: bool = False) -> None:
        self.replay = replay
        self.include_contents = bool(include_contents)

    @property
    def counted_state_entries(self) -> tuple[str, ...]:
        """The replay's state entries whose first axis is a count (the saved
        episode ends), which a checkpoint may hold more or fewer of."""
        if isinstance(self.replay, CountedState):
            return tuple(self.replay.counted_state_entries)
        return ()

    def state_dict(self) -> dict[str, Any]:
        """The replay's state (see ``replay.state_dict``)."""
        return self.replay.state_dict(include_contents=self.include_contents)

    def state_for_check(self) -> dict[str, Any]:
        """:meth:`state_dict` with views of the rows, not copies: what a
        resume compares shapes with (a copy of a large replay would need its
        memory twice)."""
        return self.replay.state_dict(
            include_contents=self.include_contents, copy=False
        )

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the replay (empty again if the checkpoint has no rows)."""
        self.replay.load_state_dict(state)


class AttributeSchedule(Callback):
    """Set ``target.<name> = schedule(runner.env_steps)`` before every batch.

    For exploration and annealing that follow the env step: DQN's epsilon,
    a prioritized replay's ``beta``.

    Example:
        >>> AttributeSchedule(agent, "epsilon", epsilon_schedule(1.0, 0.05, 10_000))
        >>> AttributeSchedule(replay, "beta", lambda step: min(1.0, 0.4 + step / 1e5))

    Args:
        target: the object whose attribute is set.
        name: attribute name.
        schedule: env steps -> value.
    """

    def __init__(
        self, target: Any, name: str, schedule: Callable[[int], float]
    ) -> None:
        if not hasattr(target, name):
            raise ConfigError(f"{type(target).__name__} has no attribute {name!r}")
        self.target, self.name, self.schedule = target, name, schedule

    def _set(self, runner: Any) -> None:
        setattr(self.target, self.name, self.schedule(runner.env_steps))

    def on_train_start(self, runner: Any) -> None:
        """Value for the first batch (after a resume: at the restored step)."""
        self._set(runner)

    def on_update_end(self, runner: Any, metrics: dict[str, float]) -> None:
        """Value for the next batch; logged as ``schedule/<name>``."""
        self._set(runner)
        metrics[f"schedule/{self.name}"] = float(getattr(self.target, self.name))


class OffPolicyRunner(Runner[OffPolicyAlgorithm]):
    """Off-policy training: collect, record into the replay, optimize from it.

    Each iteration the sampler collects one ``[T, B]`` batch,
    ``replay.record_batch(batch)`` stores it (copying the window into the
    replay's full-size tree, or, if the sampler wrote into that tree itself,
    declaring its window stored) and, once ``replay.ready``
    (``learning_starts`` reached), ``algorithm.optimize(replay,
    new_steps=T * B)`` runs the updates the algorithm's replay ratio asks
    for. ``runner.updates`` counts gradient updates.

    The replay joins the checkpoint objects as ``"replay"`` (counters, RNG,
    and with ``checkpoint_replay_contents=True`` every stored row). Logging,
    evaluation, callbacks, checkpoints, resume and seeding are
    :class:`~parllel.runners.Runner`'s.

    Example:
        >>> runner = OffPolicyRunner(sampler, replay, sac, total_steps=20_000,
        ...                          eval_sampler=evaluator, eval_interval_steps=1_000,
        ...                          checkpoint_objects={"agent": model, "sac": sac})
        >>> summary = runner.run()

    Args:
        sampler: fills ``[T, B]`` batches (``collect_batch()``).
        replay: a :class:`~parllel.replays.UniformReplay` or
            :class:`~parllel.replays.PrioritizedReplay`.
        algorithm: e.g. :class:`~parllel.torch.algos.SAC` or ``DQN``.
        total_steps: env steps to train for.
        checkpoint_replay_contents: save the replay's rows in checkpoints.
        **kwargs: see :class:`~parllel.runners.Runner`.
    """

    def __init__(
        self,
        sampler: TrainingSampler | AsyncSampler,
        replay: RunnerReplay,
        algorithm: OffPolicyAlgorithm,
        total_steps: int,
        *,
        checkpoint_replay_contents: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(sampler, algorithm, total_steps, **kwargs)
        self.replay = replay
        if self.checkpoint_dir is not None or self.checkpoint_objects:
            self.checkpoint_objects.setdefault(
                "replay", ReplayCheckpoint(replay, checkpoint_replay_contents)
            )

    def run(self) -> dict[str, float]:
        """Train as :meth:`Runner.run` does; first warn
        (:class:`~parllel.errors.ParllelWarning`) if the replay cannot reach
        ``learning_starts`` before ``total_steps``: no update would run."""
        if not self.finished and not self.replay.ready:
            warn_learning_never_starts(
                len(self.replay),
                max(self.replay.learning_starts, self.replay.batch_size),
                self.env_steps,
                self.total_steps,
                self.steps_per_batch,
            )
        return super().run()

    def _iterate(self) -> Mapping[str, float]:
        batch = self._collect()
        self.replay.record_batch(batch)
        if not self.replay.ready:
            return {}  # no catching up on the steps before learning starts
        metrics = self.algorithm.optimize(self.replay, new_steps=self.steps_per_batch)
        self.updates += int(metrics.get("updates", 1))
        return metrics
