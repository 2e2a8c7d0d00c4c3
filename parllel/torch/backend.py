"""torch's side of the core's backend seam (:mod:`parllel.backends`).

Checkpoints store each tensor as a numpy array with its dtype, device and
``requires_grad``; dtypes numpy lacks (``bfloat16``, float8) as their raw
bytes. Sparse and quantized tensors are left to torch's own pickling.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["BACKEND", "TorchBackend"]

#: torch dtypes numpy has (the others are stored as raw bytes)
_NUMPY_DTYPES = {
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
    torch.float16, torch.float32, torch.float64, torch.complex64, torch.complex128,
}  # fmt: skip


class TorchBackend:
    """Checkpoint, finite-check, RNG and seeding operations on torch tensors."""

    name = "torch"

    def owns(self, value: object) -> bool:
        """Whether ``value`` is a dense torch tensor (parameters too)."""
        return isinstance(value, torch.Tensor) and value.layout == torch.strided

    def to_portable(self, value: torch.Tensor) -> dict[str, Any]:
        """The tensor as a numpy array with its dtype, device and grad flag."""
        tensor = value.detach().cpu().resolve_conj().resolve_neg()
        if tensor.dtype in _NUMPY_DTYPES:
            array = tensor.numpy()
        else:  # raw bytes, reinterpreted when read
            array = tensor.contiguous().reshape(-1).view(torch.uint8).numpy()
        return {
            "array": array,
            "shape": tuple(value.shape),
            "dtype": str(value.dtype).removeprefix("torch."),
            "device": str(value.device),
            "requires_grad": value.requires_grad,
        }

    def from_portable(self, portable: dict[str, Any], device: str | None) -> Any:
        """The tensor :meth:`to_portable` described, on ``device`` (None: its own)."""
        dtype = getattr(torch, portable["dtype"])
        # unpickled arrays are writable (no copy); a caller's read-only one is copied
        tensor = torch.from_numpy(np.require(portable["array"], requirements="W"))
        if tensor.dtype != dtype:
            tensor = tensor.view(dtype)
        tensor = tensor.reshape(portable["shape"])
        tensor = tensor.to(portable["device"] if device is None else device)
        return tensor.requires_grad_(portable["requires_grad"])

    def is_finite(self, value: torch.Tensor) -> bool:
        """Whether the tensor holds no NaN or inf (True unless floating/complex)."""
        if not (value.is_floating_point() or value.is_complex()):
            return True
        return bool(torch.isfinite(value).all())

    def capture_rng(self) -> dict[str, Any]:
        """torch's CPU RNG state and, where CUDA is available, every device's."""
        state: dict[str, Any] = {"cpu": torch.get_rng_state()}
        if torch.cuda.is_available():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    def restore_rng(self, state: dict[str, Any]) -> None:
        """Put back what :meth:`capture_rng` returned (CUDA's where available)."""
        torch.set_rng_state(state["cpu"])
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])

    def seed(self, seed: int, *, deterministic: bool) -> None:
        """``torch.manual_seed(seed)`` (every CUDA device too); with
        ``deterministic``, ``torch.use_deterministic_algorithms(True)``."""
        torch.manual_seed(seed)
        if deterministic:
            torch.use_deterministic_algorithms(True)


#: the instance :func:`parllel.backends.backend_named` returns for torch
BACKEND = TorchBackend()
