"""Whether a checkpoint fits what it is loaded into: config keys and shapes.

Every check raises :class:`~parllel.errors.CheckpointMismatchError` naming
each difference with both values, before anything is loaded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from parllel.errors import CheckpointError, CheckpointMismatchError, ParllelError
from parllel.tree import tree_items
from parllel.tree.nodes import mapping_children

#: Config keys never compared on resume: training longer is normal.
NEVER_COMPARED = ("total_steps",)


def _flatten(value: Any) -> dict[str, Any]:
    """``{dotted name: value}`` of a nested config or state (lists are values)."""
    return dict(tree_items(value, children_of=mapping_children))


def check_config(
    saved: Mapping[str, Any],
    current: Mapping[str, Any],
    *,
    keys: Iterable[str] | None = None,
    ignore: Iterable[str] = (),
) -> None:
    """Refuse to resume when the configs differ in keys that matter.

    Nested dicts are compared leaf by leaf under dotted names
    (``"algo.learning_rate"``). Compare JSON forms (e.g. both read from or
    written through :func:`~parllel.runtime.run_directory.to_jsonable`), so
    tuples and lists compare alike.

    Args:
        saved: the config the checkpoint was made with.
        current: the config of the run that wants to load it.
        keys: dotted names (or prefixes, e.g. ``"model"``) that must match;
            None means every key.
        ignore: dotted names or prefixes that may differ (e.g.
            ``"total_steps"``, ``"log_interval"``).

    Raises:
        CheckpointMismatchError: naming each differing key with both values.
    """
    saved_flat, current_flat = _flatten(saved), _flatten(current)
    wanted = list(keys) if keys is not None else None
    ignored = list(ignore)

    def matters(name: str) -> bool:
        def under(prefixes: list[str]) -> bool:
            return any(name == p or name.startswith(p + ".") for p in prefixes)

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
            problems.append(f"  {name}: checkpoint {shown_old}, current {shown_new}")
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


def check_state_shapes(saved: Any, current: Any, *, name: str) -> None:
    """Refuse saved state whose arrays differ in shape from the current object's.

    For objects that are not torch modules (observation normalizers, reward
    statistics, replays, ...): both states are walked as nested mappings and
    every entry present in both that has a shape must have the same shape.
    Entries present in only one are left to the object's ``load_state_dict``.

    Args:
        saved: the state from the checkpoint.
        current: the object (anything with ``state_dict()``) or its state.
        name: what it is, for the message (``"observation_normalizer"``).

    Raises:
        CheckpointMismatchError: naming every entry whose shape differs, with
            both shapes.
    """
    if hasattr(current, "state_dict"):
        current = current.state_dict()
    saved_flat, current_flat = _flatten(saved), _flatten(current)
    problems = []
    for key, value in current_flat.items():
        if key not in saved_flat:
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

    Raises:
        CheckpointMismatchError: see :func:`check_state_dict` and
            :func:`check_state_shapes`.
    """
    if hasattr(obj, "named_parameters"):
        check_state_dict(state, obj.state_dict(), name=name)
    else:
        check_state_shapes(state, obj.state_dict(), name=name)


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
