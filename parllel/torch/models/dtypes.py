"""The torch side of the dtype policy: model inputs take the model's dtype.

The sample tree keeps the env's observation dtype (gymnasium's MuJoCo envs
return float64; see ``observation_dtype`` of
:func:`parllel.builders.build_sample_tree` to store another). The encoders of
:mod:`parllel.torch.models` cast their input to the model's floating dtype
(float32 unless the model was converted, e.g. ``model.double()``), so every
path into a model gets it: sampling, training batches, replays and exported
policies. A model that reads observations without one of these encoders
casts them itself, e.g. with :func:`to_model_dtype`.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["FollowsModelDtype", "to_model_dtype"]


def to_model_dtype(tensor: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """``tensor`` in ``reference``'s dtype (``tensor`` itself if it already is).

    Example:
        >>> to_model_dtype(torch.zeros(3, dtype=torch.float64), torch.empty(0)).dtype
        torch.float32
    """
    return tensor if tensor.dtype == reference.dtype else tensor.to(reference.dtype)


class FollowsModelDtype(nn.Module):
    """Base of modules without parameters that cast their input to the model's dtype.

    A zero-size buffer, ``dtype_reference``, follows the model through
    ``model.to(dtype)`` / ``model.double()``; it is not part of the state
    dict, so checkpoints and exported policies are unchanged.
    """

    dtype_reference: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("dtype_reference", torch.empty(0), persistent=False)
