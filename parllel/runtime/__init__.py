"""Run-time services of a training run: its directory, checkpoints, seeds and
command line.

:class:`RunDirectory` (run_directory), atomic checkpoints and RNG snapshots
(checkpoint, files), the torch/JAX :class:`Backend` seam (backends),
checkpoint compatibility, the NaN-weights refusal (finite),
:func:`seed_everything` (seeding) and a script's command line (cli). The
training loops that use them are in :mod:`parllel.runners`.

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
