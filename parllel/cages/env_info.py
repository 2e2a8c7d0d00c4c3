"""Env-info slots: which keys are preallocated, with which dtype, and checked writes.

Policy (docs/cages.md): every key whose value in the probe step is a number
(bool, int, float, numpy scalar) or a numeric numpy array gets a slot, stored
as **float64** unless a dtype is declared for it (parllel's own keys, the
multi-agent ``fields.AGENT_*``, have theirs: :data:`DECLARED_INFO_DTYPES`), so a key that is an int in
one step and a float in another keeps both. Every write is checked: a value
that the slot cannot hold exactly (a string, ``None``, a wrong shape, an int
beyond float64's exact range, a fraction in a declared integer slot...)
raises :class:`~parllel.errors.EnvError` naming the key; floats written
into a declared narrower float slot are rounded to its precision. A key
missing from a step's info writes 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from parllel import fields
from parllel.errors import EnvError


@dataclass
class KeptInfos:
    """The info dicts of a cage's last step or reset, as the envs returned them.

    Only cages built with ``keep_infos=True`` keep them (see
    :attr:`parllel.cages.Cage.last_infos`). Keys are cage-local env indices;
    envs whose info was empty are left out.

    Attributes:
        step: the info of each env's ``env.step`` (the last step of a
            finished episode included).
        reset: the info of each env's ``env.reset`` in this call (auto-reset
            after an episode's end, a ``"next_step"`` reset, or an explicit
            reset).
    """

    step: dict[int, dict] = field(default_factory=dict)
    reset: dict[int, dict] = field(default_factory=dict)

    def update(self, other: KeptInfos) -> None:
        """Add the infos of another part of the cage (disjoint env indices)."""
        self.step.update(other.step)
        self.reset.update(other.reset)


INFO_DTYPE = np.dtype(np.float64)
#: dtypes of the info keys parllel's multi-agent adapters write every step
#: (``[A]`` arrays); :func:`numeric_info_example` uses them unless ``dtypes``
#: declares another
DECLARED_INFO_DTYPES: dict[str, np.dtype] = {
    fields.AGENT_REWARD: np.dtype(np.float32),
    fields.AGENT_TERMINATED: np.dtype(np.bool_),
    fields.AGENT_TRUNCATED: np.dtype(np.bool_),
    fields.AGENT_MASK: np.dtype(np.bool_),
}
_SCALARS = (bool, int, float, np.number, np.bool_)
_NUMPY_SCALARS = (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
    np.uint32, np.uint64, np.float16, np.float32, np.float64,
)  # fmt: skip


def numeric_info_example(
    info: Mapping[str, Any], dtypes: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Example values of the env-info keys that get a slot (see the module policy).

    Numbers become float64 scalars, numeric arrays float64 arrays of their
    shape, unless ``dtypes`` (or :data:`DECLARED_INFO_DTYPES`, for parllel's
    own keys) declares a dtype for the key. Other entries
    (strings, nested dicts, ...) get no slot and reach ``TrajInfo.extra``.
    Keys keep their names, dots included (``"ale.lives"``).

    Example:
        >>> numeric_info_example({"lives": 3, "name": "x"}, dtypes={"lives": np.int8})
        {'lives': np.int8(0)}
    """
    dtypes = dict(dtypes or {})
    unknown = set(dtypes) - set(map(str, info))
    if unknown:
        raise KeyError(
            f"dtypes declared for info keys {sorted(unknown)} that the example info "
            f"does not have (keys: {sorted(map(str, info))})"
        )
    dtypes = {**DECLARED_INFO_DTYPES, **dtypes}
    example = {}
    for key, value in info.items():
        if isinstance(value, _SCALARS):
            shape: tuple[int, ...] = ()
        elif isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
            shape = value.shape
        else:
            continue
        dtype = np.dtype(dtypes.get(str(key), INFO_DTYPE))
        example[str(key)] = np.zeros(shape, dtype)[()]
    return example


def _exact_types(dtype: np.dtype) -> frozenset[type]:
    """Scalar types whose every value ``dtype`` stores as the policy allows."""
    kind = dtype.kind
    types: set[type] = {bool, np.bool_}
    if kind == "f":
        types.add(float)  # rounded to a declared float precision by policy
        bits = np.finfo(dtype).nmant + 1
        for t in _NUMPY_SCALARS:
            scalar_dtype = np.dtype(t)
            tkind = scalar_dtype.kind
            # an integer's bits (iinfo's) are its item size in bits
            if tkind == "f" or (tkind in "iu" and 8 * scalar_dtype.itemsize <= bits):
                types.add(t)
    elif kind in "iu":
        types.update(t for t in _NUMPY_SCALARS if np.can_cast(t, dtype, "safe"))
    elif kind != "b":
        types = set()
    return frozenset(types)


_EXACT: dict[np.dtype, frozenset[type]] = {}


def info_slots(out_info: Mapping[str, Any]) -> list[tuple]:
    """``(key, view, exact_types, zero)`` per slot of an ``env_info`` tree of views.

    Views are ``[n_envs, ...]`` ndarrays or Arrays (kept as given: an Array's
    window may move).
    """
    slots = []
    for key, view in out_info.items():
        if isinstance(view, Mapping):
            raise EnvError(
                f"env_info slot {key!r} is a tree; info slots are one array per key"
            )
        exact = _EXACT.get(view.dtype)
        if exact is None:
            exact = _EXACT[view.dtype] = _exact_types(view.dtype)
        zero = np.zeros(view.shape[1:], view.dtype)[()]
        slots.append((key, view, exact, zero))
    return slots


class InfoSlotTables:
    """:func:`info_slots` tables of ``env_info`` slot trees, cached by identity.

    Samplers pass the same slot objects every batch, so each table is built
    once; an entry holds its tree, so the id cannot be reused meanwhile.
    """

    def __init__(self, max_entries: int = 4096) -> None:
        self.max_entries = max_entries
        self._cache: dict[int, tuple] = {}

    def get(self, out_info: Any) -> tuple[list[tuple], frozenset[str]]:
        """The table of ``out_info`` (empty for None) and the set of its keys."""
        if not out_info:
            return [], frozenset()
        entry = self._cache.get(id(out_info))
        if entry is None or entry[0] is not out_info:
            if len(self._cache) >= self.max_entries:
                self._cache.clear()
            slots = info_slots(out_info)
            keys = frozenset(key for key, *_ in slots)
            entry = self._cache[id(out_info)] = (out_info, slots, keys)
        return entry[1], entry[2]


def write_info_value(view: Any, j: int, value: Any, key: str, env: int) -> None:
    """Write ``value`` into ``view[j]`` if it survives exactly, else raise EnvError.

    The slow path of :meth:`EnvGroup.step` (values not of an exact type).
    """
    dtype = view.dtype
    if (
        type(value) is np.ndarray
        and value.dtype == dtype
        and value.shape == view.shape[1:]
    ):  # e.g. the multi-agent adapters' [A] arrays: stored exactly as they are
        view[j] = value
        return
    if type(value) is int and dtype.kind == "f":
        limit = 1 << (np.finfo(dtype).nmant + 1)
        if -limit <= value <= limit:
            view[j] = value
            return
    if (
        value is None
        or isinstance(value, (str, bytes, Mapping))
        or (not isinstance(value, (np.ndarray, list, tuple, *_SCALARS)))
    ):
        raise _info_error(key, env, value, view, "is not a number or numeric array")
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise _info_error(key, env, value, view, f"has dtype {array.dtype}")
    if array.shape != view.shape[1:]:
        raise _info_error(key, env, value, view, f"has shape {array.shape}")
    with np.errstate(invalid="ignore", over="ignore"):
        stored = array.astype(dtype)
        if not (array.dtype.kind == "f" and dtype.kind == "f"):
            back = stored.astype(array.dtype)
            if not np.array_equal(back, array, equal_nan=array.dtype.kind == "f"):
                raise _info_error(key, env, value, view, "would not be stored exactly")
    view[j] = stored


def _info_error(key: str, env: int, value: Any, view: Any, why: str) -> EnvError:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return EnvError(
        f"env {env}: info key {key!r} = {text} ({type(value).__name__}) {why}, so "
        f"it does not fit its slot of dtype {view.dtype} and shape {view.shape[1:]}. "
        "Preallocated info keys (numbers and numeric arrays in the probe step) must "
        "keep a numeric value of that shape: declare the key's dtype "
        "(numeric_info_example(info, dtypes=...)), drop it from the env_info slots, "
        "or convert it in a wrapper",
        env_index=env,
    )
