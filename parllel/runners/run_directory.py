"""A directory per training run: config, metadata, logs and checkpoints.

``runs/<name>-<YYYYmmdd-HHMMSS>/`` holds ``config.json``,
``metadata.json``, ``logs/`` (CSV, TensorBoard) and ``checkpoints/``; the
full layout is in docs/logging.md ("Run directories")::

    run = RunDirectory.create("runs", name="ppo-cartpole", config=config, seeds=seeds)
    logger = CsvSink(run.progress_csv)
    run = RunDirectory.open("runs/ppo-cartpole-20250101-120000")  # resume
    state = load_checkpoint(run.latest_checkpoint())
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import math
import os
import platform
import socket
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import numpy as np

from parllel import DISTRIBUTION
from parllel.checkpoints.checkpoint import latest_checkpoint
from parllel.errors import ConfigError, RunDirectoryError
from parllel.seeding import Seeds

CONFIG_FILE = "config.json"
METADATA_FILE = "metadata.json"
#: File in a seed group's directory naming its runs' directories in column order.
RUNS_FILE = "seed_runs.txt"
# name in metadata.json: distribution whose version is recorded
_VERSIONED_PACKAGES = {
    name: name for name in ("numpy", "torch", "gymnasium", "numba")
} | {"parllel": DISTRIBUTION}
_MAX_DEPTH = 32
_MAX_ARRAY_SIZE = 1000
#: the run directories :meth:`RunDirectory.create` made in this process, in order
_CREATED: list[Path] = []


def to_jsonable(value: Any, _depth: int = 0) -> Any:
    """Turn a config (dataclasses, dicts, lists, numpy values, ...) into JSON types.

    Dataclasses become dicts of their fields, mappings get string keys,
    tuples and sets become lists, paths and dtypes/devices become strings,
    enums their value, classes and functions their qualified name, numpy
    scalars and small arrays Python numbers and lists. Anything else becomes
    its ``repr()``, so writing a config never fails.

    Example:
        >>> to_jsonable({"lr": np.float32(3e-4), "env": EnvConfig("CartPole-v1")})
        {'lr': 0.0003000000142492354, 'env': {'id': 'CartPole-v1'}}
    """
    if _depth > _MAX_DEPTH:
        return repr(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value, _depth + 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            field.name: to_jsonable(getattr(value, field.name), _depth + 1)
            for field in dataclasses.fields(value)
        }
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(item, _depth + 1) for item in value]
    if isinstance(value, (set, frozenset)):
        items = [to_jsonable(item, _depth + 1) for item in value]
        return sorted(items, key=repr)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, type) or (callable(value) and hasattr(value, "__qualname__")):
        return f"{getattr(value, '__module__', '?')}.{value.__qualname__}"
    shape = getattr(value, "shape", None)
    if callable(getattr(value, "tolist", None)) and isinstance(shape, tuple):
        if math.prod(shape) <= _MAX_ARRAY_SIZE:  # numpy/torch scalars and arrays
            return to_jsonable(value.tolist(), _depth + 1)
    if isinstance(value, np.dtype) or type(value).__name__ in ("dtype", "device"):
        return str(value)  # numpy dtypes, torch.dtype, torch.device
    return repr(value)


def _write_json(path: Path, data: Any) -> None:
    """Write JSON through a temporary file and ``os.replace``."""
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as file:
            json.dump(data, file, indent=2, sort_keys=False)
            file.write("\n")
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).astimezone().isoformat()


def _package_version(name: str) -> str | None:
    try:
        return importlib_metadata.version(name)
    except importlib_metadata.PackageNotFoundError:
        return None


def git_commit(
    directory: str | os.PathLike[str] | None = None,
) -> dict[str, Any] | None:
    """The git commit (and whether the tree is dirty) of ``directory``.

    Args:
        directory: a path inside a git work tree; the current directory if None.

    Returns:
        ``{"commit": sha, "dirty": bool}``, or None outside a git tree or
        without git.
    """
    cwd = os.fspath(directory) if directory is not None else None

    def run(*args: str) -> str:
        result = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
        return result.stdout.strip()

    try:
        commit = run("rev-parse", "HEAD")
        dirty = bool(run("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": dirty}


def collect_metadata(seeds: Seeds | Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Facts about the process that make a run reproducible and traceable.

    Returns:
        Versions (python and ``numpy``, ``torch``, ``gymnasium``, ``numba``,
        ``parllel``), seeds, command line, working directory, hostname, pid,
        platform, git commit of the working directory, and start time.
    """
    if isinstance(seeds, Seeds):
        seeds = seeds.to_dict()
    return {
        "start_time": _now(),
        "command": [sys.executable, *sys.argv],
        "cwd": os.getcwd(),
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "platform": platform.platform(),
        "versions": {
            "python": platform.python_version(),
            **{
                name: _package_version(distribution)
                for name, distribution in _VERSIONED_PACKAGES.items()
            },
        },
        "seeds": to_jsonable(seeds) if seeds is not None else None,
        "git": git_commit(),
        "resumes": [],
    }


@dataclasses.dataclass(frozen=True)
class RunDirectory:
    """Paths of one run's directory; create a new one or open one to resume.

    Attributes:
        path: the run directory.
    """

    path: Path

    @classmethod
    def create(
        cls,
        root: str | os.PathLike[str] = "runs",
        name: str = "run",
        *,
        config: Any = None,
        seeds: Seeds | Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        timestamp: datetime.datetime | None = None,
    ) -> RunDirectory:
        """Make ``root/<name>-<timestamp>/`` with its files and folders.

        If that directory exists (two runs started in the same second), a
        suffix ``-1``, ``-2``, ... is added.

        Args:
            root: parent of all runs (created if needed).
            name: the run's name; no path separators.
            config: the resolved config, written through :func:`to_jsonable`.
            seeds: the run's seeds, recorded in metadata.
            metadata: extra entries for ``metadata.json``.
            timestamp: the start time to name the directory by (default now).

        Returns:
            The new run directory.

        Raises:
            ConfigError: for an empty name or one containing a path separator.
        """
        if (
            not name
            or any(sep in name for sep in ("/", "\\", os.sep))
            or name in (".", "..")
        ):
            raise ConfigError(f"run name must be a plain file name, got {name!r}")
        stamp = (timestamp or datetime.datetime.now()).strftime("%Y%m%d-%H%M%S")
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        for attempt in range(1000):
            suffix = f"-{attempt}" if attempt else ""
            path = root / f"{name}-{stamp}{suffix}"
            try:
                path.mkdir()
                break
            except FileExistsError:
                continue
        else:
            raise RunDirectoryError(f"could not create a new run directory in {root}")
        _CREATED.append(path)
        run = cls(path)
        run.logs_dir.mkdir()
        run.checkpoints_dir.mkdir()
        _write_json(run.config_path, to_jsonable(config if config is not None else {}))
        _write_json(
            run.metadata_path,
            {**collect_metadata(seeds), **to_jsonable(metadata or {})},
        )
        return run

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> RunDirectory:
        """Open an existing run directory, e.g. to resume it.

        Raises:
            RunDirectoryError: if ``path`` does not exist or is not a run
                directory (no ``config.json`` / ``metadata.json``).
        """
        run = cls(Path(path))
        if not run.path.exists():
            raise RunDirectoryError(
                f"{run.path} does not exist (expected a run directory such as "
                "runs/<name>-<timestamp>)"
            )
        missing = [
            p.name for p in (run.config_path, run.metadata_path) if not p.is_file()
        ]
        if not run.path.is_dir() or missing:
            raise RunDirectoryError(
                f"{run.path} is not a run directory (missing: "
                f"{', '.join(missing) or run.path.name})"
            )
        run.logs_dir.mkdir(exist_ok=True)
        run.checkpoints_dir.mkdir(exist_ok=True)
        return run

    @property
    def name(self) -> str:
        """The directory's name, ``<name>-<timestamp>``."""
        return self.path.name

    @property
    def config_path(self) -> Path:
        """``config.json``."""
        return self.path / CONFIG_FILE

    @property
    def metadata_path(self) -> Path:
        """``metadata.json``."""
        return self.path / METADATA_FILE

    @property
    def logs_dir(self) -> Path:
        """``logs/``."""
        return self.path / "logs"

    @property
    def progress_csv(self) -> Path:
        """``logs/progress.csv``, for :class:`~parllel.logging.CsvSink`."""
        return self.logs_dir / "progress.csv"

    @property
    def tensorboard_dir(self) -> Path:
        """``logs/tensorboard/``, for :class:`~parllel.logging.TensorBoardSink`."""
        return self.logs_dir / "tensorboard"

    @property
    def checkpoints_dir(self) -> Path:
        """``checkpoints/``."""
        return self.path / "checkpoints"

    @property
    def learning_curve_path(self) -> Path:
        """``learning_curve.png``, written by :mod:`parllel.plot`."""
        return self.path / "learning_curve.png"

    def read_config(self) -> Any:
        """The config as stored (JSON types)."""
        return json.loads(self.config_path.read_text())

    def read_metadata(self) -> dict[str, Any]:
        """The metadata as stored."""
        return json.loads(self.metadata_path.read_text())

    def seeds(self) -> Seeds | None:
        """The seeds recorded at creation, if any."""
        data = self.read_metadata().get("seeds")
        return Seeds.from_dict(data) if data else None

    def update_metadata(self, **entries: Any) -> None:
        """Add or replace top-level entries of ``metadata.json`` (atomically)."""
        data = self.read_metadata()
        data.update(to_jsonable(entries))
        _write_json(self.metadata_path, data)

    def record_resume(
        self,
        step: int,
        checkpoint: str | os.PathLike[str] | None = None,
        *,
        config: Any = None,
    ) -> None:
        """Append a resume record (time, step, checkpoint, command) to the metadata.

        With ``config`` (the resumed run's resolved config), ``config.json``
        is updated to it, and the record lists the keys that changed
        (``"config_changes": {key: [old, new]}``), so resuming again without
        flags continues with the config of the last resume.
        """
        data = self.read_metadata()
        record = {
            "time": _now(),
            "step": int(step),
            "checkpoint": os.fspath(checkpoint) if checkpoint else None,
            "command": [sys.executable, *sys.argv],
            "hostname": socket.gethostname(),
        }
        if config is not None:
            old, new = self.read_config(), to_jsonable(config)
            if isinstance(old, dict) and isinstance(new, dict):
                record["config_changes"] = {
                    key: [old.get(key), new.get(key)]
                    for key in sorted(set(old) | set(new))
                    if old.get(key) != new.get(key)
                }
            if new != old:
                _write_json(self.config_path, new)
        data.setdefault("resumes", []).append(record)
        _write_json(self.metadata_path, data)

    def latest_checkpoint(self) -> Path | None:
        """The newest ``checkpoints/checkpoint_<step>.pt``, or None."""
        return latest_checkpoint(self.checkpoints_dir)


def created_count() -> int:
    """How many run directories this process has created (a mark for
    :func:`remove_unstarted`)."""
    return len(_CREATED)


def remove_unstarted(since: int) -> list[Path]:
    """Remove the run directories created after mark ``since`` that nothing
    was written to, newest first; return them.

    Such a directory holds only ``config.json``, ``metadata.json`` and empty
    ``logs/`` and ``checkpoints/`` (a seed group's directory also its list
    of runs, whose directories were removed before it): a script that failed
    before training (a bad flag, an env that cannot be built) leaves no
    half-made run behind. Directories with a log or a checkpoint are kept.
    """
    removed = []
    for path in reversed(_CREATED[since:]):
        if path.is_dir() and _unstarted(path):
            for name in (CONFIG_FILE, METADATA_FILE, RUNS_FILE):
                (path / name).unlink(missing_ok=True)
            for name in ("logs", "checkpoints"):
                if (path / name).is_dir():
                    (path / name).rmdir()
            path.rmdir()
            removed.append(path)
    del _CREATED[since:]
    return removed


def _unstarted(path: Path) -> bool:
    for entry in path.iterdir():
        if entry.name in (CONFIG_FILE, METADATA_FILE, RUNS_FILE) and entry.is_file():
            continue
        if entry.name in ("logs", "checkpoints") and entry.is_dir():
            if not any(entry.iterdir()):
                continue
        return False
    return True
