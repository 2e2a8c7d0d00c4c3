"""Torch layer of parllel: models, distributions, algorithms, tensor utilities.

Everything here may import torch; the data and sampling layers below
(``parllel.arrays``, ``parllel.tree``, ...) must not.
"""
