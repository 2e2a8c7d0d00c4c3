"""One error hierarchy for parllel.

Every error parllel raises on purpose derives from :class:`ParllelError`, so a
training script can catch them all; the specific subclasses below say what
went wrong and, where it helps, also derive from the matching builtin
(``ValueError``, ``TypeError``, ...), so generic handlers keep working.
"""

from __future__ import annotations


class ParllelError(Exception):
    """Base class of every error raised by parllel."""


class ShapeError(ParllelError, ValueError):
    """A value's shape does not fit the array slot it is written to."""


class DtypeError(ParllelError, TypeError):
    """A value's dtype cannot be cast safely to the array's dtype."""


class TreeStructureError(ParllelError, KeyError):
    """A written value has missing, extra or ``None`` leaves.

    The message names the leaf path (e.g. ``observation.pixels``).
    """

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return str(self.args[0]) if self.args else ""


class ArrayClosedError(ParllelError, RuntimeError):
    """An array whose shared memory was released was used again."""


class ConfigError(ParllelError, ValueError):
    """A constructor argument or hyperparameter is invalid."""


class CageError(ParllelError, RuntimeError):
    """Base class of errors about cages (environment wrappers)."""


class ClosedCageError(CageError):
    """A cage was used after ``close()``."""


class CageStateError(CageError):
    """Calls on a cage came out of order (e.g. two ``step_async`` in a row)."""


class EnvError(CageError):
    """An environment raised; carries the env index and the original traceback.

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


class SpaceMismatchError(CageError, ValueError):
    """Environments in one cage disagree about their spaces."""


class InvalidActionError(CageError, ValueError):
    """An action does not fit the action space (shape or dtype)."""


class ActionTypeError(InvalidActionError, TypeError):
    """Actions of the wrong kind: a scalar or an object where a batch was expected.

    Also a ``TypeError``, as gymnasium's vector envs raise for such actions.
    """


class DynamicSpaceError(ConfigError, TypeError):
    """A space without fixed shape and dtype where values must live in shared memory.

    Also a ``TypeError``, as gymnasium raises for such spaces in shared memory.
    """


class MissingDependencyError(ParllelError, ImportError):
    """An optional package a feature needs is not installed.

    The message names the package and the ``pip install`` line that adds it.
    """


class MetricError(ParllelError, TypeError):
    """A logged metric is not a real number (or the key is not a string)."""


class RunDirectoryError(ParllelError, OSError):
    """A run directory is missing, incomplete, or cannot be created."""


class CheckpointError(ParllelError, RuntimeError):
    """Base class of errors about saving, finding or loading checkpoints."""


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """No checkpoint exists where one was asked for."""


class CheckpointMismatchError(CheckpointError, ValueError):
    """A checkpoint does not fit what it is loaded into.

    The message names every differing config key or state-dict entry with
    both values (e.g. a parameter's shape in the checkpoint and in the model).
    """


class ReplayError(ParllelError, RuntimeError):
    """A replay buffer cannot do what was asked (e.g. sample before it holds enough)."""


class NonFiniteError(ParllelError, FloatingPointError):
    """A value that must be finite is NaN or infinite."""


class NonFiniteSampleError(NonFiniteError):
    """An env produced a NaN or infinite observation or reward (sampler check).

    Attributes:
        field: the sample-tree field (e.g. ``observation`` or ``reward``).
        env_index: global index of the env.
        step: the step of the batch that produced it (-1: a reset observation).
    """

    def __init__(self, message: str, field: str, env_index: int, step: int) -> None:
        super().__init__(message)
        self.field = field
        self.env_index = env_index
        self.step = step


class NonFiniteLossError(NonFiniteError):
    """An algorithm's loss or gradient norm is NaN or infinite.

    Raised before the optimizer step, so the weights are those of the last
    finite update (and no checkpoint of this update is written).

    Attributes:
        terms: names of the non-finite loss terms / gradient norms.
    """

    def __init__(self, message: str, terms: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.terms = terms


class NonFiniteCheckpointError(NonFiniteError, CheckpointError):
    """A checkpoint was refused: the state holds NaN or infinite tensors."""


class ReplayCapacityWarning(ParllelError, RuntimeWarning):
    """A replay dropped stored steps early: its final-observation table was full."""


class ObservationMismatchError(SpaceMismatchError):
    """An env's observation does not match its declared observation space.

    Checked on the probe step at cage construction; the message names the
    env, the leaf, the actual and declared dtype and shape, and the fix.
    """


class EnvInfoError(EnvError):
    """An env-info value does not fit the slot preallocated for its key.

    The message names the key, the env, the value and the slot's dtype and
    shape (docs/cages.md describes the info policy).
    """


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


class CorruptCheckpointError(CheckpointError):
    """A checkpoint file exists but cannot be read (truncated, damaged, not parllel's)."""


class ParllelWarning(UserWarning):
    """Base class of the warnings parllel issues."""


class CheckpointFallbackWarning(ParllelWarning):
    """The newest checkpoint was unreadable; an older one was loaded instead."""


class ScheduleWarning(ParllelWarning):
    """Training will run a different number of steps than asked (whole batches)."""


class TotalStepsChangedWarning(ParllelWarning):
    """A run resumes with another ``total_steps`` than its checkpoint's run.

    Schedules that follow training progress (``env_steps / total_steps``,
    e.g. linear learning-rate and clip-range decay) jump at the resume.
    """


class RebalanceRefusedWarning(ParllelWarning):
    """A ProcessCage switched load balancing off: its envs cannot move between
    processes (e.g. MuJoCo's ``EzPickle`` envs would lose their state); the
    current split of envs is kept."""


class InterruptIgnoredWarning(ParllelWarning):
    """SIGINT is ignored in this process (a background job), so Ctrl-C cannot stop training."""


class UnsupportedVectorEnvError(ConfigError):
    """A gymnasium vector env cannot serve as asked (e.g. its autoreset mode).

    Raised by ``parllel.interop.VectorEnvCage``; the message names what the
    vector env lacks and how to build one that has it.
    """


class MainGuardError(ConfigError):
    """Worker processes would start from unguarded top-level code of the main script.

    With the ``spawn`` / ``forkserver`` start methods every worker first
    re-runs the main script; the message quotes the line and says how to
    guard it (or to step the envs in this process instead).
    """


class SerialFallbackWarning(ParllelWarning):
    """``parallel="auto"`` stepped the envs in this process although processes could pay."""


class TreeRingError(ParllelError, RuntimeError):
    """A :class:`~parllel.samplers.TreeRing` was used out of turn (e.g. two
    ``begin_write`` without ``end_write``)."""


class TreeRingClosedError(TreeRingError):
    """A :class:`~parllel.samplers.TreeRing` was closed while (or before) waiting on it."""


class BackgroundSamplerError(ParllelError, RuntimeError):
    """The background sampler's process raised; carries that process's traceback.

    Attributes:
        worker_traceback: the formatted traceback from the background process.
    """

    def __init__(self, message: str, worker_traceback: str = "") -> None:
        super().__init__(message)
        self.worker_traceback = worker_traceback


class BackgroundSamplerDiedError(BackgroundSamplerError):
    """The background sampler's process exited without reporting an error.

    Attributes:
        exitcode: the process's exit code (negative: killed by that signal).
    """

    def __init__(self, message: str, exitcode: int | None) -> None:
        super().__init__(message)
        self.exitcode = exitcode


class PolicyLagError(ParllelError, RuntimeError):
    """A batch was collected by a policy older than ``max_lag`` versions allow."""


class BackgroundSamplerRestartWarning(ParllelWarning):
    """The background sampler's process died and a new one was started in its
    place (``BackgroundSampler(max_restarts=...)``); its envs start from reset."""


class DistributedSamplerError(ParllelError, RuntimeError):
    """A sampler actor of a :class:`~parllel.distributed.RaySampler` raised (its
    sampler, its builder, or loading the published weights).

    Attributes:
        actor_index: the actor's index (0 to ``n_actors - 1``).
        worker_traceback: the formatted traceback from the actor.
    """

    def __init__(
        self, message: str, actor_index: int, worker_traceback: str = ""
    ) -> None:
        super().__init__(message)
        self.actor_index = actor_index
        self.worker_traceback = worker_traceback


class DistributedSamplerDiedError(DistributedSamplerError):
    """A sampler actor of a :class:`~parllel.distributed.RaySampler` died more
    often than its ``max_restarts`` allow."""


class SamplerActorTimeoutWarning(ParllelWarning):
    """A sampler actor of a :class:`~parllel.distributed.RaySampler` has not
    returned its batch within ``timeout_seconds`` (the learner keeps waiting)."""


class SamplerActorRestartWarning(ParllelWarning):
    """A sampler actor of a :class:`~parllel.distributed.RaySampler` died and
    Ray restarted it; its unfinished batch was dropped and collected again by
    the new actor, whose envs start from reset."""


class EnvFactoryError(ConfigError):
    """A ``MODULE:FACTORY`` reference names no importable callable, or the
    factory raised or returned something that is not an env.

    The message names the reference and what went wrong (e.g. the module that
    did not import, or the factory's exception).
    """


class PolicyExportError(ConfigError):
    """A policy cannot be exported: how to rebuild it is unknown (no recorded
    architecture, a custom activation or space), or its parts do not fit."""


class PolicyFileError(ParllelError, ValueError):
    """A policy file (or the spec of a run's checkpoints) cannot be read: it is
    damaged, not a parllel policy, of a newer format, or needs a builder that
    is not registered."""


class PolicyNotFoundError(PolicyFileError, FileNotFoundError):
    """No policy file at a path, or a run directory with neither an exported
    policy nor a checkpoint it can be loaded from."""


class EmptyPoolError(ParllelError, RuntimeError):
    """An opponent was asked of an :class:`~parllel.multiagent.OpponentPool`
    that holds no snapshot yet (add the learner's first snapshot)."""


class UnknownSnapshotError(ParllelError, KeyError):
    """An opponent id names no snapshot the pool holds (never added, or evicted)."""


class AgentSpaceError(ConfigError):
    """The agents of a multi-agent env do not share one observation or action
    space, or a space cannot be stacked over agents; the message names the
    agents and their spaces."""


class MismatchedAgentsError(ParllelError, ValueError):
    """A multi-agent env returned values for agents it does not declare in
    ``possible_agents``, or not for the agents that acted, or a dict action
    names an agent outside ``possible_agents``; the message names them."""


class UnknownOptionError(ConfigError, TypeError):
    """A keyword argument that no cage takes (a misspelt option); the message
    names the closest one and lists them all. Also a ``TypeError``, as Python's
    own unexpected-keyword error."""


class WrongAdapterError(ConfigError):
    """A PettingZoo env was given to the adapter of the other API: an
    ``AECEnv`` to :class:`~parllel.multiagent.ParallelEnvAdapter`, or a
    ``ParallelEnv`` to :class:`~parllel.multiagent.AECEnvAdapter`; the
    message names the env and the adapter to use."""


class NonActingAgentError(ParllelError, ValueError):
    """An action was given for an agent that does not act at this step (or
    none for one that does); the message names the agent."""
