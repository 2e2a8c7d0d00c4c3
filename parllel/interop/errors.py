"""An env's error, re-raised as the builtin type the env raised, too.

Code written against ``SyncVectorEnv`` catches an env's own exception type
(e.g. its ``ValueError``: ``SyncVectorEnv`` lets it through); the adapters
raise parllel's :class:`~parllel.errors.EnvError` that is an instance of that
type too. The errors that are gymnasium's vector-env exception types are in
:mod:`parllel.errors.vector_env`.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Iterator
from contextlib import contextmanager

from parllel.errors import EnvAttributeError, EnvError

__all__ = ["as_builtin_type", "env_errors_as_builtins"]


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
