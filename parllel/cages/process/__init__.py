"""The process cage: envs stepped in worker processes, straight into shared memory.

:class:`ProcessCage` (``cage``) sits on ``startup``, ``processes``,
``faults``, ``worker_handle``, ``worker``, ``slots`` and ``channel``, each
importing only the ones below it; :mod:`parllel.cages.child_processes` holds the
multiprocessing helpers. What each module holds: docs/cages.md ("Modules").
"""

__all__: list[str] = []  # users import ProcessCage from parllel.cages
