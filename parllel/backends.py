"""The seam between the core and a learning library (torch, JAX).

The runners, checkpoints and seeding import neither torch nor JAX; what they
need of the library (portable tensors, finiteness, the global RNG) goes
through a :class:`Backend`, found by the library's package name in
:data:`BACKEND_MODULES` and imported only once that library is. Action
generators are checkpointed as :class:`StatefulGenerator` instead. See
docs/architecture.md ("The backend seam"), which also shows how to register
a backend of your own.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Protocol

__all__ = [
    "BACKEND_MODULES",
    "Backend",
    "StatefulGenerator",
    "backend_named",
    "loaded_backends",
]

#: library (its top-level package) -> module whose ``BACKEND`` serves it.
BACKEND_MODULES: dict[str, str] = {
    "torch": "parllel.torch.backend",
    "jax": "parllel.jax.backend",
}


class Backend(Protocol):
    """What the core needs from a learning library (see docs/architecture.md).

    A module named in :data:`BACKEND_MODULES` holds one instance as
    ``BACKEND``. Checkpoints call :meth:`owns`, :meth:`to_portable` and
    :meth:`from_portable` for every object they pickle; the finite check
    calls :meth:`is_finite` on the leaves a backend owns; RNG snapshots and
    :func:`~parllel.seeding.seed_everything` call the rest.
    """

    #: the library's top-level package (the key in :data:`BACKEND_MODULES`).
    name: str

    def owns(self, value: object) -> bool:
        """Whether ``value`` is one of the library's tensors or arrays."""
        ...

    def to_portable(self, value: Any) -> Any:
        """``value`` as numpy arrays and Python values (picklable without the
        library; e.g. ``{"array": ..., "dtype": "bfloat16", "device": "cuda:0"}``)."""
        ...

    def from_portable(self, portable: Any, device: str | None) -> Any:
        """The tensor :meth:`to_portable` described, on ``device`` (None: the
        device it was saved from; the library's own device names)."""
        ...

    def is_finite(self, value: Any) -> bool:
        """Whether an owned tensor holds no NaN or infinity (True if it is not
        of a floating-point or complex dtype)."""
        ...

    def capture_rng(self) -> Any:
        """The library's global RNG state (picklable; None if it has none,
        as JAX, whose keys live in the algorithm's state)."""
        ...

    def restore_rng(self, state: Any) -> None:
        """Put back what :meth:`capture_rng` returned."""
        ...

    def seed(self, seed: int, *, deterministic: bool) -> None:
        """Seed the global RNG with ``seed`` (the run's ``seeds.torch``, the
        learner's stream; JAX: nothing); with ``deterministic``, also make
        the library's kernels deterministic."""
        ...


class StatefulGenerator(Protocol):
    """A random generator whose state can be taken and put back
    (``torch.Generator``; a JAX handler's key holder)."""

    def get_state(self) -> Any:
        """Its state (picklable, or tensors a backend owns)."""
        ...

    def set_state(self, state: Any) -> Any:
        """Continue from a state :meth:`get_state` returned."""
        ...


def backend_named(name: str) -> Backend:
    """The backend of library ``name`` (imports the backend and the library).

    Raises:
        KeyError: no backend is known for ``name``.
    """
    module = importlib.import_module(BACKEND_MODULES[name])
    backend: Backend = module.BACKEND
    return backend


def loaded_backends() -> list[Backend]:
    """The backends whose library this process has imported (none imported here).

    A library without its backend module installed (JAX without
    ``parllel.jax``) is left out: its arrays are pickled as they are.
    """
    found = []
    for name, module_name in BACKEND_MODULES.items():
        if name not in sys.modules:
            continue
        try:
            found.append(backend_named(name))
        except ModuleNotFoundError as error:
            if error.name is None or not module_name.startswith(error.name):
                raise
    return found
