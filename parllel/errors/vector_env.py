"""parllel's errors that are also the exception types gymnasium's vector envs raise.

Code written against ``SyncVectorEnv`` / ``AsyncVectorEnv`` catches
gymnasium's types: ``ClosedEnvironmentError`` after ``close()``,
``NoAsyncCallError`` / ``AlreadyPendingCallError`` for calls out of order.
The interop adapters raise these, which are parllel's errors too. This module
imports gymnasium; :mod:`parllel.errors` does not import it.
"""

from __future__ import annotations

from gymnasium.error import (
    AlreadyPendingCallError,
    ClosedEnvironmentError,
    NoAsyncCallError,
)

from parllel.errors.cages import CageStateError, ClosedCageError

__all__ = ["CallPendingError", "NoPendingStepError", "VectorEnvClosedError"]


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
