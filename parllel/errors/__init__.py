"""One error hierarchy for parllel, grouped by layer.

Every error parllel raises on purpose derives from :class:`ParllelError`, so a
training script can catch them all; the specific subclasses say what went
wrong and, where it helps, also derive from the matching builtin
(``ValueError``, ``TypeError``, ...), so generic handlers keep working. Every
warning derives from :class:`ParllelWarning`. Import them from here
(``from parllel.errors import EnvError``); the modules hold one layer each:

``base`` (the bases, errors of every layer), ``arrays`` (arrays, trees),
``cages``, ``samplers``, ``distributed``, ``replays``, ``interop``,
``multiagent``, ``learning`` (the torch layer: losses, policy export) and
``runtime`` (run directories, checkpoints, training loops, logging, bench).
The interop errors that are also gymnasium's vector-env exception types are
in :mod:`parllel.errors.vector_env` (it imports gymnasium, so this package
does not import it).
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
    ActionTypeError,
    CageError,
    CageStateError,
    ClosedCageError,
    DynamicSpaceError,
    EnvAttributeError,
    EnvError,
    EnvIndexError,
    EnvInfoError,
    InvalidActionError,
    MainGuardError,
    ObservationMismatchError,
    RebalanceRefusedWarning,
    SerialFallbackWarning,
    SpaceMismatchError,
    StepTimeoutError,
    UnknownOptionError,
    WorkerDiedError,
)
from parllel.errors.distributed import (
    DistributedSamplerDiedError,
    DistributedSamplerError,
    SamplerActorRestartWarning,
    SamplerActorTimeoutWarning,
)
from parllel.errors.interop import UnsupportedVectorEnvError
from parllel.errors.learning import (
    HandlerClosedError,
    NonFiniteLossError,
    PageLockError,
    PolicyExportError,
    PolicyFileError,
    PolicyNotFoundError,
    SeedRunStoppedWarning,
)
from parllel.errors.multiagent import (
    AgentSpaceError,
    EmptyPoolError,
    MismatchedAgentsError,
    NonActingAgentError,
    UnknownSnapshotError,
    WrongAdapterError,
)
from parllel.errors.replays import ReplayCapacityWarning, ReplayError
from parllel.errors.runtime import (
    CheckpointError,
    CheckpointFallbackWarning,
    CheckpointMismatchError,
    CheckpointNotFoundError,
    CorruptCheckpointError,
    EnvFactoryError,
    InterruptIgnoredWarning,
    MetricError,
    NonFiniteCheckpointError,
    RunDirectoryError,
    ScheduleWarning,
    TotalStepsChangedWarning,
)
from parllel.errors.samplers import (
    BackgroundSamplerDiedError,
    BackgroundSamplerError,
    BackgroundSamplerRestartWarning,
    FrameStackError,
    NonFiniteSampleError,
    PolicyLagError,
    TreeRingClosedError,
    TreeRingError,
)

__all__ = [
    "ActionTypeError",
    "AgentSpaceError",
    "ArrayClosedError",
    "BackgroundSamplerDiedError",
    "BackgroundSamplerError",
    "BackgroundSamplerRestartWarning",
    "CageError",
    "CageStateError",
    "CheckpointError",
    "CheckpointFallbackWarning",
    "CheckpointMismatchError",
    "CheckpointNotFoundError",
    "ClosedCageError",
    "ConfigError",
    "CorruptCheckpointError",
    "DistributedSamplerDiedError",
    "DistributedSamplerError",
    "DtypeError",
    "DynamicSpaceError",
    "EmptyPoolError",
    "EnvAttributeError",
    "EnvError",
    "EnvFactoryError",
    "EnvIndexError",
    "EnvInfoError",
    "FrameStackError",
    "HandlerClosedError",
    "InterruptIgnoredWarning",
    "InvalidActionError",
    "MainGuardError",
    "MetricError",
    "MismatchedAgentsError",
    "MissingDependencyError",
    "NonActingAgentError",
    "NonFiniteCheckpointError",
    "NonFiniteError",
    "NonFiniteLossError",
    "NonFiniteSampleError",
    "NotSharedError",
    "ObservationMismatchError",
    "PageLockError",
    "ParllelError",
    "ParllelWarning",
    "PolicyExportError",
    "PolicyFileError",
    "PolicyLagError",
    "PolicyNotFoundError",
    "RebalanceRefusedWarning",
    "ReplayCapacityWarning",
    "ReplayError",
    "RunDirectoryError",
    "SamplerActorRestartWarning",
    "SamplerActorTimeoutWarning",
    "SeedRunStoppedWarning",
    "ScheduleWarning",
    "SerialFallbackWarning",
    "ShapeError",
    "SpaceMismatchError",
    "StepTimeoutError",
    "TotalStepsChangedWarning",
    "TreeRingClosedError",
    "TreeRingError",
    "TreeStructureError",
    "UnknownOptionError",
    "UnknownSnapshotError",
    "UnsupportedVectorEnvError",
    "WorkerDiedError",
    "WrongAdapterError",
]

# tracebacks, pickles and warning filters name every class by its public path
# (``parllel.errors.EnvError``), whichever layer's module defines it
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
