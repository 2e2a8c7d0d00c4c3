"""What the runner talks to besides the sampler and algorithm: callbacks and checkpointed objects."""

from __future__ import annotations

from typing import Any, Protocol


class Stateful(Protocol):
    """Anything a checkpoint saves: a model, optimizer, algorithm, transform."""

    def state_dict(self) -> Any:
        """Everything needed to continue later: nested dicts of numpy arrays,
        tensors a backend owns and picklable Python values
        (:mod:`parllel.checkpoints.files`)."""
        ...

    def load_state_dict(self, state: Any) -> Any:
        """Restore what :meth:`state_dict` returned."""
        ...


class Callback:
    """Hooks the runner calls; subclass and override the ones you need.

    Every hook receives the runner (counters: ``runner.env_steps``,
    ``runner.updates``; ``runner.request_stop()`` ends training after the
    current iteration).
    """

    def on_train_start(self, runner: Any) -> None:
        """Before the first batch (after a resume, with restored counters)."""

    def on_collect_end(self, runner: Any, batch: Any, traj_infos: list) -> None:
        """After a batch was collected and transformed, before optimizing."""

    def on_update_end(self, runner: Any, metrics: dict[str, float]) -> None:
        """After the algorithm's update; ``metrics`` is what will be logged."""

    def on_eval_end(self, runner: Any, eval_metrics: dict[str, float]) -> None:
        """After an evaluation."""

    def on_train_end(self, runner: Any) -> None:
        """After the last iteration (also when stopped early)."""
