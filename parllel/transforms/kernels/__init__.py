"""Numba kernels behind the transforms.

Every kernel is a pure ``@numba.njit(cache=True)`` function over numpy arrays
that writes into explicit output arguments (like a ufunc's ``out=``). Kernels
do not validate their arguments; the checked entry points live in
:mod:`parllel.transforms.functional`, which reshape ``[T, B, ...]`` data to the
3-D ``[T, B, N]`` layout the kernels expect.
"""
