"""Torch layer of parllel: models, distributions, algorithms, tensor utilities.

Everything here may import torch; the data and sampling layers below
(``parllel.arrays``, ``parllel.tree``, ...) must not.

:func:`export_policy` and :func:`load_policy` (from
:mod:`parllel.torch.export`) save a trained policy to one file and load it
back as a :class:`Policy` acting on raw gymnasium observations.
"""

from parllel.torch.export import Policy, PolicyExport, export_policy, load_policy

__all__ = ["Policy", "PolicyExport", "export_policy", "load_policy"]
