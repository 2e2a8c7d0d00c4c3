"""The JAX set-up a training script makes before its first computation."""

from __future__ import annotations

from parllel.jax.compilation_cache import enable_compilation_cache
from parllel.jax.cpu_backend import configure_cpu_backend
from parllel.validation import check_count

__all__ = ["prepare_jax_for_training"]


def prepare_jax_for_training(runs: int = 1) -> int:
    """Turn on the compilation cache and set up the CPU backend for ``runs``
    runs in this process; call it before the first JAX computation.

    A single run gets one XLA thread, as ``torch.set_num_threads(1)`` gives
    torch (the env workers have the other cores); a seed group (``runs > 1``)
    gets one CPU device per core, over which its stacked updates split
    (docs/jax.md, "The CPU backend"; docs/seeds.md).

    Example:
        >>> prepare_jax_for_training(runs=config.seeds)

    Returns:
        The CPU devices JAX uses.
    """
    check_count("runs", runs)
    enable_compilation_cache()  # later runs of the same set-up load their programs
    if runs > 1:
        return configure_cpu_backend(devices="cores")
    return configure_cpu_backend(threads=1)
