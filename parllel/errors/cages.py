"""Errors of cages (:mod:`parllel.cages`) and the envs they step."""

from __future__ import annotations

from parllel.errors.base import ConfigError, ParllelError

__all__ = [
    "CageError",
    "CageStateError",
    "ClosedCageError",
    "DynamicSpaceError",
    "EnvAttributeError",
    "EnvError",
    "EnvIndexError",
    "InvalidActionError",
    "SpaceMismatchError",
    "StepTimeoutError",
    "UnknownOptionError",
    "WorkerDiedError",
]


class CageError(ParllelError, RuntimeError):
    """Base class of errors about cages (environment wrappers)."""


class ClosedCageError(CageError):
    """A cage was used after ``close()``."""


class CageStateError(CageError):
    """Calls on a cage came out of order (e.g. two ``step_async`` in a row)."""


class EnvError(CageError):
    """An environment raised, or returned what its slots cannot hold (an info
    value that does not fit its slot, a frame stack that is not the previous
    one shifted); carries the env index and the original traceback.

    The env's own exception is the ``__cause__`` (also from a worker process,
    when it pickles).

    Attributes:
        env_index: global index of the env that raised.
        worker_traceback: the formatted traceback from where the env ran.
    """

    def __init__(
        self, message: str, env_index: int | None = None, worker_traceback: str = ""
    ) -> None:
        super().__init__(message)
        self.env_index = env_index
        self.worker_traceback = worker_traceback


class EnvAttributeError(EnvError, AttributeError):
    """An env (and every env it wraps) lacks an attribute asked for by name.

    Raised by ``cage.get_attr`` / ``call``; ``env_index`` names the env.
    """


class EnvIndexError(ConfigError, IndexError):
    """An env index given to a cage (or an adapter over one) is out of range.

    Indices count from 0; negative ones count from the end, as in a Python
    list (-1 is the last env), so the valid ones for ``n`` envs are
    ``-n <= i < n``.
    """


class WorkerDiedError(CageError):
    """A worker process exited unexpectedly (e.g. killed by a signal).

    Attributes:
        worker_index: index of the worker within its cage.
        env_indices: global indices of the envs the worker held.
        exitcode: the process's exit code (negative: killed by that signal).
    """

    def __init__(
        self,
        message: str,
        worker_index: int,
        env_indices: tuple[int, ...],
        exitcode: int | None,
    ) -> None:
        super().__init__(message)
        self.worker_index = worker_index
        self.env_indices = env_indices
        self.exitcode = exitcode


class StepTimeoutError(CageError, TimeoutError):
    """A worker did not finish a step or reset within the cage's ``step_timeout``.

    The message names every late worker and its envs, with each one's Python
    stack; the cage is closed.

    Attributes:
        worker_index: index of the (first) late worker within its cage.
        env_indices: global indices of that worker's envs.
        timeout: the ``step_timeout`` in seconds.
        worker_stack: that worker's Python stack, as faulthandler prints it.
    """

    def __init__(
        self,
        message: str,
        worker_index: int,
        env_indices: tuple[int, ...],
        timeout: float | None,
        worker_stack: str,
    ) -> None:
        super().__init__(message)
        self.worker_index = worker_index
        self.env_indices = env_indices
        self.timeout = timeout
        self.worker_stack = worker_stack


class SpaceMismatchError(CageError, ValueError):
    """Environments in one cage disagree about their spaces, or an env's probe
    observation does not match its declared observation space (the message
    names the env, the leaf, both dtypes and shapes, and the fix)."""


class InvalidActionError(CageError, ValueError, TypeError):
    """An action does not fit the action space (shape or dtype), or is of the
    wrong kind (a scalar or an object where a batch was expected).

    Also a ``TypeError``, as gymnasium's vector envs raise for such actions.
    """


class DynamicSpaceError(ConfigError, TypeError):
    """A space without fixed shape and dtype where values must live in shared memory.

    Also a ``TypeError``, as gymnasium raises for such spaces in shared memory.
    """


class UnknownOptionError(ConfigError, TypeError):
    """A keyword argument that no cage takes (a misspelt option); the message
    names the closest one and lists them all. Also a ``TypeError``, as Python's
    own unexpected-keyword error."""
