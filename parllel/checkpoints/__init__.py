"""Checkpoint files: writing, finding and reading them, and whether they fit.

- :mod:`parllel.checkpoints.checkpoint`: atomic checkpoint files, the newest
  readable one, RNG snapshots;
- :mod:`parllel.checkpoints.files`: atomic writes and the checkpoint file format
  (a pickle; each learning library's tensors stored portably through
  :mod:`parllel.backends`);
- :mod:`parllel.checkpoints.compatibility`: whether a checkpoint fits the run
  that loads it;
- :mod:`parllel.checkpoints.finite`: refusing to checkpoint NaN weights.

A run's directory (:class:`~parllel.runners.RunDirectory`) and the training
loops that checkpoint are in :mod:`parllel.runners`.

Example::

    save_checkpoint(run.checkpoints_dir, {"model": model.state_dict()}, step=0)
    state = load_checkpoint(run.checkpoints_dir / "checkpoint_0.pt")
"""

from parllel.checkpoints.checkpoint import load_checkpoint, save_checkpoint

__all__ = ["load_checkpoint", "save_checkpoint"]
