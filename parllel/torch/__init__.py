"""Torch layer of parllel: models, distributions, algorithms, tensor utilities.

Everything here may import torch; the data and sampling layers below
(``parllel.arrays``, ``parllel.tree``, ...) must not.

:class:`TorchHandler` runs a torch agent on sample-tree slots;
:class:`SharedWeights` shares its weights with sampler processes.

:func:`export_policy` and :func:`load_policy` (from
:mod:`parllel.torch.export`) save a trained policy to one file and load it
back as a :class:`Policy` acting on raw gymnasium observations.
"""

from parllel.torch.export.artifact import export_policy
from parllel.torch.export.policy import Policy, load_policy
from parllel.torch.export.run_export import PolicyExport
from parllel.torch.handler import TorchHandler
from parllel.torch.weights import SharedWeights

__all__ = [
    "Policy",
    "PolicyExport",
    "SharedWeights",
    "TorchHandler",
    "export_policy",
    "load_policy",
]
