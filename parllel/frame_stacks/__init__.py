"""Frame stacking: the env's ``k``-frame stacks stored as one frame per step.

- :mod:`~parllel.frame_stacks.rule`: the ``k``-frame rule (which stored rows
  make a stack) and the bit-for-bit comparison of frames.
- :mod:`~parllel.frame_stacks.sample_tree`: the on-policy sample tree's
  ``frames`` and ``frame_depth`` fields, stored and checked at every step.
- :mod:`~parllel.frame_stacks.replay`: replay trees of single frames and the
  stacks they rebuild when sampled.

The layouts are explained in docs/samplers.md ("Frame stacks") and docs/atari.md.
"""
