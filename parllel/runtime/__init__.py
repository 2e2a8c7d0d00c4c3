"""Run-time services of a training run: its directory, checkpoints, seeds and
command line.

- :mod:`parllel.runtime.run_directory`: :class:`RunDirectory` (config,
  metadata, logs and checkpoints of one run);
- :mod:`parllel.runtime.checkpoint`: atomic checkpoint files, the newest
  readable one, RNG snapshots;
- :mod:`parllel.runtime.files`: atomic writes and the checkpoint file format
  (a pickle; each learning library's tensors stored portably);
- :mod:`parllel.runtime.backends`: the :class:`Backend` protocol through
  which the core reaches torch or JAX (neither is imported by this package);
- :mod:`parllel.runtime.compatibility`: whether a checkpoint fits the run
  that loads it;
- :mod:`parllel.runtime.finite`: refusing to checkpoint NaN weights;
- :mod:`parllel.runtime.seeding`: :func:`seed_everything` applies the one
  seed scheme (:class:`Seeds`, defined in the torch-free
  :mod:`parllel.seeding`) to python, numpy and the learning library;
- :mod:`parllel.runtime.cli`: a script's command line from its config
  dataclass (``tyro``, in the ``cli`` extra).

The training loops that use these services are in :mod:`parllel.runners`.

Example::

    seeds = Seeds.from_master(0, n_envs=8)
    seed_everything(seeds)
    run = RunDirectory.create("runs", name="ppo-cartpole", config=config, seeds=seeds)
    save_checkpoint(run.checkpoints_dir, {"model": model.state_dict()}, step=0)
"""

from parllel.runtime.checkpoint import load_checkpoint, save_checkpoint
from parllel.runtime.run_directory import RunDirectory
from parllel.runtime.seeding import Seeds, seed_everything

__all__ = [
    "RunDirectory",
    "Seeds",
    "load_checkpoint",
    "save_checkpoint",
    "seed_everything",
]
