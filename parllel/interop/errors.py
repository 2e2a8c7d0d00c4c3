"""parllel's errors as the exception types gymnasium's vector envs raise.

Code written against ``SyncVectorEnv`` / ``AsyncVectorEnv`` catches
gymnasium's types: an env's own ``ValueError`` (``SyncVectorEnv`` lets it
through), ``ClosedEnvironmentError`` after ``close()``,
``NoAsyncCallError`` / ``AlreadyPendingCallError`` for calls out of order.
The adapters raise parllel's errors (with parllel's messages) that are
instances of those types too.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Iterator
from contextlib import contextmanager

from gymnasium.error import (
    AlreadyPendingCallError,
    ClosedEnvironmentError,
    NoAsyncCallError,
)

from parllel.errors import CageStateError, ClosedCageError, EnvAttributeError, EnvError

__all__ = [
    "CallPendingError",
    "NoPendingStepError",
    "VectorEnvClosedError",
    "env_errors_as_builtins",
]


class VectorEnvClosedError(ClosedCageError, ClosedEnvironmentError):
    """A vector env was used after ``close()`` (also gymnasium's ``ClosedEnvironmentError``)."""


class NoPendingStepError(CageStateError, NoAsyncCallError):
    """``step_wait()`` without ``step_async()`` (also gymnasium's ``NoAsyncCallError``)."""

    def __init__(self, message: str, name: str = "step") -> None:
        Exception.__init__(self, message)
        self.name = name


class CallPendingError(CageStateError, AlreadyPendingCallError):
    """A call while a step is pending (also gymnasium's ``AlreadyPendingCallError``)."""

    def __init__(self, message: str, name: str = "step") -> None:
        Exception.__init__(self, message)
        self.name = name


_RAISED = re.compile(r"raised (\w+) in ")
_COMBINED: dict[type[BaseException], type[EnvError]] = {
    AttributeError: EnvAttributeError
}


def _builtin_type(error: EnvError) -> type[Exception] | None:
    """The builtin exception type the env raised (None: not a builtin one)."""
    cause = error.__cause__
    if cause is not None:
        kind: object = type(cause)
    else:  # from a worker process: the type is named in the message
        match = _RAISED.search(str(error))
        kind = getattr(builtins, match.group(1), None) if match else None
    if (
        isinstance(kind, type)
        and issubclass(kind, Exception)
        and getattr(builtins, kind.__name__, None) is kind
    ):
        return kind
    return None


def _combined(kind: type[Exception]) -> type[EnvError] | None:
    """``EnvError`` that is also a ``kind`` (None where the two cannot combine)."""
    if kind not in _COMBINED:
        name = f"Env{kind.__name__}"
        try:
            combined = type(
                name,
                (EnvError, kind),
                {
                    "__doc__": f"An env raised {kind.__name__} (EnvError and {kind.__name__}).",
                    "__module__": __name__,
                    "__str__": Exception.__str__,  # KeyError would repr the message
                },
            )
        except TypeError:  # incompatible layouts
            return None
        globals()[name] = combined  # picklable by reference
        _COMBINED[kind] = combined
    return _COMBINED[kind]


def as_builtin_type(error: EnvError) -> EnvError:
    """``error`` as an instance of the builtin type the env raised, when it is one.

    Same message, env index, traceback and cause; ``error`` itself when the env
    raised no builtin exception or ``error`` is one already.
    """
    kind = _builtin_type(error)
    if kind is None or isinstance(error, kind) or type(error) is not EnvError:
        return error
    combined = _combined(kind)
    if combined is None:
        return error
    converted = combined(str(error), error.env_index, error.worker_traceback)
    converted.__cause__ = error.__cause__
    converted.__suppress_context__ = True
    return converted


@contextmanager
def env_errors_as_builtins() -> Iterator[None]:
    """Re-raise an :class:`EnvError` as :func:`as_builtin_type` makes it."""
    try:
        yield
    except EnvError as error:
        converted = as_builtin_type(error)
        if converted is error:
            raise
        raise converted.with_traceback(error.__traceback__) from error.__cause__
