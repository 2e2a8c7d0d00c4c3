"""An env's own exception, re-raised by the interop adapters.

Code written against ``SyncVectorEnv`` catches an env's own exception (e.g.
its ``ValueError``: ``SyncVectorEnv`` lets it through). The adapters do the
same: an :class:`~parllel.errors.EnvError` carrying the env's exception as its
``__cause__`` (from a worker process too, when the exception pickles) is
re-raised as that exception, chained from the EnvError, which names the env
and holds the worker's traceback. The errors that are gymnasium's vector-env
exception types are in :mod:`parllel.errors.vector_env`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from parllel.errors import EnvError, ParllelError

__all__ = ["reraise_env_exceptions"]


@contextmanager
def reraise_env_exceptions() -> Iterator[None]:
    """Re-raise an :class:`EnvError` as the env's own exception, chained from it.

    An EnvError without such a cause (or whose cause is parllel's own error)
    propagates unchanged.
    """
    try:
        yield
    except EnvError as error:
        cause = error.__cause__
        if not isinstance(cause, Exception) or isinstance(cause, ParllelError):
            raise
        error.__cause__ = None  # the chain runs env exception <- EnvError, once
        error.__suppress_context__ = True
        raise cause.with_traceback(cause.__traceback__) from error
