"""Training loops: the runner base, on- and off-policy runners, callbacks.

The run-time services the loops use (run directories, checkpoints, seeding,
the command line) are in :mod:`parllel.runtime`; their old names here
(``parllel.runners.RunDirectory``, ``parllel.runners.checkpoint``, ...) keep
working, with a :class:`DeprecationWarning`, for one release.
"""

from typing import Any

from parllel.runners.off_policy import OffPolicyRunner
from parllel.runners.on_policy import OnPolicyRunner
from parllel.runners.runner import Callback, Runner
from parllel.runners.selfplay import SelfPlayCallback
from parllel.runtime import __all__ as _runtime_names

__all__ = [
    "Callback",
    "OffPolicyRunner",
    "OnPolicyRunner",
    "Runner",
    "SelfPlayCallback",
]

_MOVED_TO_RUNTIME = tuple(_runtime_names)  # every public name of parllel.runtime


def __getattr__(name: str) -> Any:
    if name in _MOVED_TO_RUNTIME:
        from parllel._deprecation import moved_attribute

        return moved_attribute(__name__, "parllel.runtime", name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
