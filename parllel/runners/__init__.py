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

__all__ = [
    "Callback",
    "OffPolicyRunner",
    "OnPolicyRunner",
    "Runner",
]

_MOVED_TO_RUNTIME = (
    "RunDirectory",
    "Seeds",
    "capture_rng_state",
    "check_config",
    "check_state_dict",
    "check_state_shapes",
    "latest_checkpoint",
    "load_checkpoint",
    "load_latest_checkpoint",
    "restore_rng_state",
    "save_checkpoint",
    "seed_everything",
)


def __getattr__(name: str) -> Any:
    if name in _MOVED_TO_RUNTIME:
        from parllel._deprecation import moved_attribute

        return moved_attribute(__name__, "parllel.runtime", name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
