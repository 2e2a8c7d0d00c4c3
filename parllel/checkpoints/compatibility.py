"""Whether a checkpoint fits what it is loaded into: config keys and shapes.

Every check raises :class:`~parllel.errors.CheckpointMismatchError` naming
each difference with both values, before anything is loaded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from parllel.errors import CheckpointError, CheckpointMismatchError, ParllelError
from parllel.tree import tree_items
from parllel.tree.nodes import mapping_children

#: Config keys never compared on resume: training longer is normal.
NEVER_COMPARED = ("total_steps",)


@runtime_checkable
class CountedState(Protocol):
    """An object whose state holds tables of varying length (a replay's saved
    episode ends): :func:`check_object` lets their first axis differ."""

    @property
    def counted_state_entries(self) -> tuple[str, ...]:
        """Dotted prefixes of those entries (see :func:`check_state_shapes`'s
        ``counted``)."""
        ...


@runtime_checkable
class CheckedState(Protocol):
    """An object whose state is large: :func:`check_object` compares with
    :meth:`state_for_check` instead of a copy from ``state_dict()``."""

    def state_for_check(self) -> Mapping[str, Any]:
        """The state as ``state_dict()`` has it, with views instead of copies."""
        ...


def _flatten(value: Any) -> dict[str, Any]:
    """``{dotted name: value}`` of a nested config or state (lists are values)."""
    return dict(tree_items(value, children_of=mapping_children))


def _under(name: str, prefix: str) -> bool:
    """Whether dotted ``name`` is ``prefix`` or an entry under it."""
    return name == prefix or name.startswith(prefix + ".")


def check_config(
    saved: Mapping[str, Any],
    current: Mapping[str, Any],
    *,
    keys: Iterable[str] | Mapping[str, str] | None = None,
    ignore: Iterable[str] = (),
) -> None:
    """Refuse to resume when the configs differ in keys that matter.

    Nested dicts are compared leaf by leaf under dotted names
    (``"algo.learning_rate"``). Compare JSON forms (e.g. both read from or
    written through :func:`~parllel.runners.run_directory.to_jsonable`), so
    tuples and lists compare alike.

    Args:
        saved: the config the checkpoint was made with.
        current: the config of the run that wants to load it.
        keys: dotted names (or prefixes, e.g. ``"model"``) that must match;
            None means every key. A mapping gives each one what it fixes
            (e.g. ``{"envs": "training episodes: lost lives or whole games"}``),
            which the message says with a difference.
        ignore: dotted names or prefixes that may differ (e.g.
            ``"total_steps"``, ``"log_interval"``).

    Raises:
        CheckpointMismatchError: naming each differing key with both values.
    """
    saved_flat, current_flat = _flatten(saved), _flatten(current)
    wanted = list(keys) if keys is not None else None
    reasons = dict(keys) if isinstance(keys, Mapping) else {}
    ignored = list(ignore)

    def matters(name: str) -> bool:
        def under(prefixes: list[str]) -> bool:
            return any(_under(name, prefix) for prefix in prefixes)

        return (wanted is None or under(wanted)) and not under(ignored)

    missing = object()
    problems = []
    for name in sorted(set(saved_flat) | set(current_flat)):
        if not matters(name):
            continue
        old, new = saved_flat.get(name, missing), current_flat.get(name, missing)
        if old is missing or new is missing or old != new:
            shown_old = "<absent>" if old is missing else repr(old)
            shown_new = "<absent>" if new is missing else repr(new)
            reason = next(
                (why for key, why in reasons.items() if _under(name, key)), None
            )
            because = f" ({reason})" if reason else ""
            problems.append(
                f"  {name}: checkpoint {shown_old}, current {shown_new}{because}"
            )
    if problems:
        raise CheckpointMismatchError(
            "config differs from the checkpoint's in keys that matter:\n"
            + "\n".join(problems)
        )


def _shape(value: Any) -> tuple[int, ...] | None:
    shape = getattr(value, "shape", None)
    return tuple(shape) if shape is not None else None


def check_state_dict(
    saved: Mapping[str, Any], current: Any, *, name: str = "model"
) -> None:
    """Refuse a state dict whose keys or tensor shapes differ from ``current``'s.

    Args:
        saved: the state dict from the checkpoint.
        current: the module (anything with ``state_dict()``) or state dict it
            would be loaded into.
        name: what it is, for the message (``"model"``, ``"critic"``, ...).

    Raises:
        CheckpointMismatchError: naming missing and unexpected entries and
            every parameter whose shape differs, with both shapes.
    """
    if hasattr(current, "state_dict"):
        current = current.state_dict()
    problems = []
    missing = [key for key in current if key not in saved]
    unexpected = [key for key in saved if key not in current]
    if missing:
        problems.append(f"  missing from the checkpoint: {', '.join(missing)}")
    if unexpected:
        problems.append(f"  not in the current {name}: {', '.join(unexpected)}")
    for key in current:
        if key in saved:
            old, new = _shape(saved[key]), _shape(current[key])
            if old != new:
                problems.append(
                    f"  {name} parameter {key!r}: shape {old} in the checkpoint, "
                    f"{new} in the current {name}"
                )
    if problems:
        raise CheckpointMismatchError(
            f"checkpoint does not fit the current {name}:\n" + "\n".join(problems)
        )


def _check_counted(
    saved_flat: Mapping[str, Any],
    current_flat: Mapping[str, Any],
    prefix: str,
    name: str,
) -> list[str]:
    """Problems of the entries under ``prefix``, whose first axis counts items.

    The count may differ from the current object's; the shape past it and
    the dtype may not, and every saved entry under ``prefix`` must count the
    same number of items.
    """
    problems = []
    counts: dict[str, int] = {}
    for key, value in saved_flat.items():
        shape = _shape(value)
        if _under(key, prefix) and shape:
            counts[key] = shape[0]
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"{key!r} {count}" for key, count in counts.items())
        problems.append(
            f"  {name} entries under {prefix!r} count different numbers of items "
            f"in the checkpoint ({listed}): the checkpoint is damaged"
        )
    for key, value in current_flat.items():
        if not _under(key, prefix) or key not in saved_flat:
            continue
        old, new = _shape(saved_flat[key]), _shape(value)
        if old is None or new is None:
            continue
        if old[1:] != new[1:]:
            problems.append(
                f"  {name} entry {key!r}: items of shape {old[1:]} in the "
                f"checkpoint, {new[1:]} in the current {name}"
            )
        old_dtype = getattr(saved_flat[key], "dtype", None)
        new_dtype = getattr(value, "dtype", None)
        if old_dtype != new_dtype:
            problems.append(
                f"  {name} entry {key!r}: dtype {old_dtype} in the checkpoint, "
                f"{new_dtype} in the current {name}"
            )
    return problems


def check_state_shapes(
    saved: Any, current: Any, *, name: str, counted: Iterable[str] = ()
) -> None:
    """Refuse saved state whose arrays differ in shape from the current object's.

    For objects that are not torch modules (observation normalizers, reward
    statistics, replays, ...): both states are walked as nested mappings and
    every entry present in both that has a shape must have the same shape.
    Entries present in only one are left to the object's ``load_state_dict``.

    Args:
        saved: the state from the checkpoint.
        current: the object (anything with ``state_dict()``) or its state.
        name: what it is, for the message (``"observation_normalizer"``).
        counted: dotted names (or prefixes) of entries whose first axis
            counts items, so it may differ from the current object's (the
            rows of a sparse table, e.g. a replay's final observations). For
            these the shape past the first axis and the dtype must match, and
            the saved entries under one prefix must count the same items.

    Raises:
        CheckpointMismatchError: naming every entry whose shape (or, for
            ``counted`` entries, item shape, dtype or count) differs, with
            both values.
    """
    if hasattr(current, "state_dict"):
        current = current.state_dict()
    saved_flat, current_flat = _flatten(saved), _flatten(current)
    prefixes = list(counted)
    problems = []
    for prefix in prefixes:
        problems.extend(_check_counted(saved_flat, current_flat, prefix, name))
    for key, value in current_flat.items():
        if key not in saved_flat or any(_under(key, p) for p in prefixes):
            continue
        old, new = _shape(saved_flat[key]), _shape(value)
        if old is not None and new is not None and old != new:
            problems.append(
                f"  {name} entry {key.strip('.') or '<root>'!r}: shape {old} in "
                f"the checkpoint, {new} in the current {name}"
            )
    if problems:
        raise CheckpointMismatchError(
            f"checkpoint does not fit the current {name}:\n" + "\n".join(problems)
        )


def check_object(name: str, obj: Any, state: Any) -> None:
    """Refuse ``state`` if its shapes do not fit ``obj`` (torch modules: keys too).

    An object whose state holds tables of varying length names them as a
    :class:`CountedState` (dotted prefixes, see :func:`check_state_shapes`'s
    ``counted``); one whose state is large may be a :class:`CheckedState`,
    whose ``state_for_check()`` (its state without copies) is compared.

    Raises:
        CheckpointMismatchError: see :func:`check_state_dict` and
            :func:`check_state_shapes`.
    """
    if hasattr(obj, "named_parameters"):
        check_state_dict(state, obj.state_dict(), name=name)
    else:
        counted = (
            tuple(obj.counted_state_entries) if isinstance(obj, CountedState) else ()
        )
        if isinstance(obj, CheckedState):
            current: Any = obj.state_for_check()
        else:
            current = obj.state_dict()
        check_state_shapes(state, current, name=name, counted=counted)


def load_object(name: str, obj: Any, state: Any) -> None:
    """Load ``state`` into ``obj``; what it refuses is a checkpoint mismatch.

    Raises:
        CheckpointMismatchError: wrapping the error ``load_state_dict`` raised.
    """
    try:
        obj.load_state_dict(state)
    except CheckpointError:
        raise
    except (ParllelError, ValueError, KeyError, TypeError, RuntimeError) as error:
        raise CheckpointMismatchError(
            f"checkpoint does not fit the current {name}: {error}"
        ) from error


def config_difference_hint(saved: Mapping[str, Any], current: Mapping[str, Any]) -> str:
    """The config keys that differ from the checkpoint's, as a hint for a message."""
    try:
        check_config(saved, current, ignore=NEVER_COMPARED)
    except CheckpointMismatchError as difference:
        lines = str(difference).splitlines()[1:]
        return "\nconfig keys that differ from the checkpoint's:\n" + "\n".join(lines)
    return ""
