"""One error hierarchy for parllel, grouped by layer.

Every error parllel raises on purpose derives from :class:`ParllelError`
(and, where it helps, from the matching builtin); every warning is a
:class:`ParllelWarning`. Import them from here (``from parllel.errors import
EnvError``); the modules hold one layer each (``base``, ``arrays``,
``cages``, ``samplers``, ``distributed``, ``replays``, ``interop``,
``multiagent``, ``learning``, ``runtime``), and
:mod:`parllel.errors.vector_env` the ones that need gymnasium. See
docs/architecture.md ("Decisions worth knowing").
"""

from __future__ import annotations

from parllel.errors.arrays import (
    ArrayClosedError,
    DtypeError,
    NotSharedError,
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
    MainGuardError,
    SpaceMismatchError,
    StepTimeoutError,
    UnknownOptionError,
    WorkerDiedError,
)
from parllel.errors.distributed import DistributedSamplerError
from parllel.errors.interop import UnsupportedVectorEnvError
from parllel.errors.learning import (
    NonFiniteLossError,
    PolicyExportError,
    PolicyFileError,
)
from parllel.errors.multiagent import (
    MismatchedAgentsError,
    UnknownSnapshotError,
)
from parllel.errors.replays import ReplayError
from parllel.errors.runtime import (
    CheckpointError,
    CheckpointMismatchError,
    RunDirectoryError,
)
from parllel.errors.samplers import (
    BackgroundSamplerError,
    PolicyLagError,
    TreeRingClosedError,
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
    "MainGuardError",
    "MismatchedAgentsError",
    "MissingDependencyError",
    "NonFiniteError",
    "NonFiniteLossError",
    "NotSharedError",
    "ParllelError",
    "ParllelWarning",
    "PolicyExportError",
    "PolicyFileError",
    "PolicyLagError",
    "ReplayError",
    "RunDirectoryError",
    "ShapeError",
    "SpaceMismatchError",
    "StepTimeoutError",
    "TreeRingClosedError",
    "TreeRingError",
    "TreeStructureError",
    "UnknownOptionError",
    "UnknownSnapshotError",
    "UnsupportedVectorEnvError",
    "WorkerDiedError",
]

# tracebacks, pickles and warning filters name every class by its public path
# (``parllel.errors.EnvError``), whichever layer's module defines it
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
