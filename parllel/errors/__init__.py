"""One error hierarchy for parllel, grouped by layer.

Every error parllel raises on purpose derives from :class:`ParllelError`
(and, where it helps, from the matching builtin); every warning is a
:class:`ParllelWarning`. Import them from here (``from parllel.errors import
EnvError``); the modules hold one layer each (``base``, ``arrays``,
``cages``, ``samplers``, ``distributed``, ``replays``, ``multiagent``,
``export``, ``runtime``), and :mod:`parllel.errors.vector_env` the ones
that need gymnasium. See docs/architecture.md ("Decisions worth knowing").
"""

from __future__ import annotations

from parllel.errors.arrays import (
    ArrayClosedError,
    DtypeError,
    ShapeError,
    TreeStructureError,
)
from parllel.errors.base import (
    ConfigError,
    MissingDependencyError,
    NonFiniteError,
    ParllelError,
    ParllelWarning,
)
from parllel.errors.cages import (
    CageError,
    CageStateError,
    ClosedCageError,
    DynamicSpaceError,
    EnvAttributeError,
    EnvError,
    EnvIndexError,
    InvalidActionError,
    SpaceMismatchError,
    StepTimeoutError,
    UnknownOptionError,
    WorkerDiedError,
)
from parllel.errors.distributed import DistributedSamplerError
from parllel.errors.export import PolicyFileError
from parllel.errors.multiagent import MismatchedAgentsError
from parllel.errors.replays import ReplayError
from parllel.errors.runtime import (
    CheckpointError,
    CheckpointMismatchError,
    RunDirectoryError,
)
from parllel.errors.samplers import (
    BackgroundSamplerError,
    PolicyLagError,
    TreeRingError,
)

__all__ = [
    "ArrayClosedError",
    "BackgroundSamplerError",
    "CageError",
    "CageStateError",
    "CheckpointError",
    "CheckpointMismatchError",
    "ClosedCageError",
    "ConfigError",
    "DistributedSamplerError",
    "DtypeError",
    "DynamicSpaceError",
    "EnvAttributeError",
    "EnvError",
    "EnvIndexError",
    "InvalidActionError",
    "MismatchedAgentsError",
    "MissingDependencyError",
    "NonFiniteError",
    "ParllelError",
    "ParllelWarning",
    "PolicyFileError",
    "PolicyLagError",
    "ReplayError",
    "RunDirectoryError",
    "ShapeError",
    "SpaceMismatchError",
    "StepTimeoutError",
    "TreeRingError",
    "TreeStructureError",
    "UnknownOptionError",
    "WorkerDiedError",
]

# tracebacks, pickles and warning filters name every class by its public path
# (``parllel.errors.EnvError``), whichever layer's module defines it
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
