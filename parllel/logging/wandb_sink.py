"""A logger sending metrics, config and run metadata to Weights & Biases.

The W&B run is tied to the parllel run directory (its id in
``logs/wandb.json``, W&B's files in ``logs/wandb/``), so one parllel run is
one W&B run however often it is resumed; rewinding on resume is partial, as
W&B only accepts increasing steps. ``wandb`` is imported when the sink is
built. See docs/logging.md ("Weights & Biases").
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from parllel.errors import ConfigError, MissingDependencyError
from parllel.errors.base import install_hint
from parllel.logging.base import Sink, to_scalars

STATE_FILE = "wandb.json"
"""the file under the run directory's ``logs/`` holding the W&B run id"""
METADATA_KEY = "parllel_metadata"
"""the W&B config entry holding the run directory's ``metadata.json``"""
_MODES = ("online", "offline", "disabled", "shared")


def _import_wandb() -> Any:
    try:
        import wandb
    except ImportError as error:
        raise MissingDependencyError(
            "WandbSink needs the 'wandb' package: pip install wandb, or "
            f"{install_hint('wandb')}"
        ) from error
    return wandb


def _run_path(run_dir: Any) -> Path:
    """The directory of a RunDirectory (its ``path``) or of a path."""
    path = getattr(run_dir, "path", run_dir)
    return Path(os.fspath(path))


def _read_json(path: Path) -> Any:
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def _write_json(path: Path, data: Any) -> None:
    """Write JSON through a temporary file and ``os.replace``."""
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as file:
            json.dump(data, file, indent=2)
            file.write("\n")
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


class WandbSink(Sink):
    """Log every metric to a Weights & Biases run tied to a run directory.

    Example:
        >>> sink = WandbSink("cartpole", run, mode="offline")  # run: a RunDirectory
        >>> sink.log(4096, {"train/return_mean": 21.5})
        >>> sink.close()  # finishes the W&B run

    Args:
        run_dir: the :class:`~parllel.runners.RunDirectory` or its path; W&B
            files go to its ``logs/wandb/``.
        config: the config to log (default: the run's ``config.json``).
        mode: ``"online"``, ``"offline"`` or ``"disabled"``; None lets W&B
            decide (``WANDB_MODE``, else online).
        name: the W&B run's display name (default: the run directory's name).
        resume: continue the W&B run stored in the run directory, if any.
        **init_kwargs: more arguments for ``wandb.init``.

    Raises:
        MissingDependencyError: if wandb is not installed.
        ConfigError: an unknown ``mode`` or a stored id of another project.
    """

    def __init__(
        self,
        project: str,
        run_dir: Any,
        *,
        config: Mapping[str, Any] | None = None,
        mode: str | None = None,
        name: str | None = None,
        resume: bool = False,
        **init_kwargs: Any,
    ) -> None:
        if mode is not None and mode not in _MODES:
            raise ConfigError(f"mode must be one of {_MODES} or None, got {mode!r}")
        for reserved in ("project", "dir", "id", "resume", "config", "mode", "name"):
            if reserved in init_kwargs:
                raise ConfigError(f"WandbSink sets wandb.init's {reserved!r} itself")
        self._wandb = _import_wandb()
        self.run_path = _run_path(run_dir)
        logs_dir = self.run_path / "logs"
        (logs_dir / "wandb").mkdir(parents=True, exist_ok=True)
        self.state_path = logs_dir / STATE_FILE
        stored = _read_json(self.state_path) if resume else None
        if stored is not None and stored.get("project") != project:
            raise ConfigError(
                f"{self.state_path} holds a W&B run of project "
                f"{stored.get('project')!r}, not {project!r}: resume with the "
                "project the run was started with"
            )
        run_config = dict(config) if config is not None else self._run_config()
        # the config read from config.json, checked again at the first log
        # call (resuming updates config.json after the loggers are built)
        self._sent_config = None if config is not None else dict(run_config)
        metadata = _read_json(self.run_path / "metadata.json")
        if metadata is not None:
            run_config[METADATA_KEY] = metadata
        self.skip_until: int | None = None
        self.skipped = 0
        self.run = self._wandb.init(
            project=project,
            dir=str(logs_dir),
            id=stored["id"] if stored else None,
            resume="allow" if stored else None,
            config=run_config,
            mode=mode,
            name=name or self.run_path.name,
            **init_kwargs,
        )
        self.last_step: int | None = stored.get("last_step") if stored else None
        self._state = {"project": project, "id": self.run.id}
        self._save_state()

    def _run_config(self) -> dict[str, Any]:
        data = _read_json(self.run_path / "config.json")
        if data is None:
            return {}
        return data if isinstance(data, dict) else {"config": data}

    def _update_config(self) -> None:
        """Send the entries of ``config.json`` that changed since ``__init__``."""
        sent, self._sent_config = self._sent_config or {}, None
        changed = {k: v for k, v in self._run_config().items() if sent.get(k) != v}
        if changed:
            self.run.config.update(changed, allow_val_change=True)

    def _save_state(self) -> None:
        _write_json(self.state_path, {**self._state, "last_step": self.last_step})

    @property
    def run_id(self) -> str:
        """The W&B run's id (stored in ``logs/wandb.json``)."""
        return str(self.run.id)

    def rewind(self, step: int) -> None:
        """Resume at ``step``: skip rows up to the last step W&B already has.

        W&B's history cannot be truncated and its steps must increase, so the
        rows logged after ``step`` by the interrupted run stay; the resumed
        run's rows at steps W&B already has are not sent (counted in
        :attr:`skipped`).
        """
        if self.closed:
            raise ValueError(f"WandbSink({self.run_path}) used after close()")
        if self.last_step is not None and self.last_step > int(step):
            self.skip_until = self.last_step

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Send ``metrics`` at ``step`` (W&B's step axis is the run's step)."""
        if self.closed:
            raise ValueError(f"WandbSink({self.run_path}) used after close()")
        values = to_scalars(metrics)
        step = int(step)
        if self._sent_config is not None:
            self._update_config()
        if self.skip_until is not None:
            if step <= self.skip_until:
                self.skipped += 1
                return
            self.skip_until = None
        self.run.log(values, step=step)
        self.last_step = step
        self._save_state()

    def close(self) -> None:
        """Finish the W&B run (an offline run's files are then complete)."""
        if not self.closed:
            self.run.finish()
        super().close()
