"""Env indices as users give them: negative ones count from the end.

Every cage method that takes env indices (``reset``, ``call``, ``apply``,
``get_attr``, ``set_attr``, ``render``), and so every adapter over a cage
(:mod:`parllel.interop`), reads them through :func:`normalize_env_indices`:
``-1`` is the last env, as in a Python list and SB3's ``DummyVecEnv``.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable

from parllel.errors import EnvIndexError


def normalize_env_indices(indices: Iterable[int] | None, n_envs: int) -> list[int]:
    """``indices`` as indices in ``[0, n_envs)``, in their order (None: every env).

    Raises:
        EnvIndexError: an index is not an integer, or is ``>= n_envs`` or
            ``< -n_envs``.

    Example:
        >>> normalize_env_indices([0, -1, -4], 4)
        [0, 3, 0]
    """
    if indices is None:
        return list(range(n_envs))
    given = list(indices)
    normalized = []
    bad = []
    for index in given:
        try:
            i = operator.index(index)
        except TypeError:
            raise EnvIndexError(
                f"env indices must be integers, got {index!r} in {given!r}"
            ) from None
        if -n_envs <= i < n_envs:
            normalized.append(i % n_envs)
        else:
            bad.append(i)
    if bad:
        raise EnvIndexError(
            f"env indices {bad} out of range for {n_envs} envs: give indices "
            f"from 0 to {n_envs - 1}, or from -{n_envs} to -1 to count from the "
            "last env"
        )
    return normalized
