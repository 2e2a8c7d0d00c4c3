"""The process cage: envs stepped in worker processes, straight into shared memory.

Its modules, from the cage down:

- :mod:`~parllel.cages.process.cage`: :class:`ProcessCage` itself.
- :mod:`~parllel.cages.process.startup`: checking its settings, splitting the
  envs, starting the workers and the main process's share.
- :mod:`~parllel.cages.process.processes`: who steps which envs, env calls
  and attributes sent where the env lives, envs moved between processes.
- :mod:`~parllel.cages.process.faults`: restarting a dead worker, the error
  for a hung one.
- :mod:`~parllel.cages.process.worker_handle`: one worker seen from the main
  process (command, wait, receive, stop).
- :mod:`~parllel.cages.process.worker`: the worker process's command loop.
- :mod:`~parllel.cages.process.slots`: the ids both sides know the shared
  slots by.
- :mod:`~parllel.cages.process.channel`: the control row, the pipe's
  messages and replies.

Below them, :mod:`parllel.cages.child_processes` holds the multiprocessing helpers
(start contexts, semaphore waiting, the parent-alive check).
"""

__all__: list[str] = []  # users import ProcessCage from parllel.cages
