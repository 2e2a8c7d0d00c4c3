"""The ``valid`` mask for wait-reset sampling, as a numba kernel.

With wait-reset, an env that finishes an episode mid-batch is not reset until
the batch ends; the steps it records afterwards are garbage. Definition, per
env ``b``::

    valid[0, b] = True
    valid[t, b] = valid[t - 1, b] and not done[t - 1, b]      (t >= 1)

with ``done = terminated or truncated``. So the step that ends an episode is
valid (its reward and flags are real) and every later step in the batch is
not. The next batch starts valid again because the sampler resets finished
envs between batches.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def valid_mask_kernel(
    terminated: np.ndarray, truncated: np.ndarray, valid_out: np.ndarray
) -> None:
    """Write the wait-reset valid mask into ``valid_out``.

    Args:
        terminated: ``[T, B]`` flags (pass ``done`` here and as ``truncated``
            if only ``done`` is recorded).
        truncated: ``[T, B]`` flags.
        valid_out: ``[T, B]`` bool output.
    """
    n_steps, n_envs = terminated.shape
    if n_steps == 0:
        return
    for b in range(n_envs):
        valid_out[0, b] = True
    for t in range(1, n_steps):
        for b in range(n_envs):
            ended = terminated[t - 1, b] or truncated[t - 1, b]
            valid_out[t, b] = valid_out[t - 1, b] and not ended
