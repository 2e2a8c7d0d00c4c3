"""Slots: the small integer ids a ProcessCage's workers know its slots by, both sides.

Every shared-memory view a cage hands to its workers (an action, an
observation slot, a reward slot, ...) gets a view id the first time it is
used; its descriptor crosses the pipe once (:class:`~parllel.cages.process.channel.Views`).
Every shape of slot tree gets a layout id, sent once as the tree with leaf
positions in place of its views (:class:`~parllel.cages.process.channel.Layout`), so
a worker rebuilds the same nesting and node types (tuple-built ArrayDicts
stay sequences, keys such as ``"ale.lives"`` stay whole). Afterwards a step
names its slots by integers only.

:class:`SlotRegistry` hands out the ids (main process); :class:`WorkerSlots`
attaches the views and rebuilds the trees (worker).
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any

import numpy as np

from parllel.arrays.views import attach_view, describe_view, view_address
from parllel.cages.process.channel import (
    MAX_LEAVES,
    MAX_TREES,
    Layout,
    Message,
    ResetArgs,
    Views,
)
from parllel.errors import ArrayClosedError, ConfigError
from parllel.tree import ArrayDict, tree_map
from parllel.tree.utils import tree_to_ndarray


@dataclass(frozen=True)
class RegisteredSlots:
    """What a cage sends for one slot tree.

    Attributes:
        layout_id: the tree's layout id.
        ids: view id of every leaf, in the tree's leaf order.
        messages: Layout/Views messages the workers have not had yet.
        views: the tree as an ArrayDict of plain ndarray views (for the
            main process's own share of the envs).
    """

    layout_id: int
    ids: np.ndarray
    messages: list[Message]
    views: ArrayDict


def slot_name(path: str) -> str:
    """A slot's path as the user wrote it (``env_info.lives``, ``action``)."""
    return path[len("out.") :] if path.startswith("out.") else path


class SlotRegistry:
    """View ids and layout ids of the slots of one cage (``n_envs`` envs).

    Views are identified by their memory (address, shape, strides, dtype),
    so two Array objects over the same slot share an id.
    """

    def __init__(self, n_envs: int) -> None:
        self.n_envs = n_envs
        self._view_ids: dict[tuple, int] = {}
        self._descriptors: list[tuple[int, Any]] = []
        self._layout_ids: dict[bytes, int] = {}
        self._layouts: list[Layout] = []

    def register(self, tree: dict[str, Any]) -> RegisteredSlots:
        """Ids (and messages for what is new) for a tree of ``[n_envs]`` slots.

        Raises:
            ConfigError: a slot's leading dimension is not ``n_envs``, the
                tree has too many leaves, or a slot is not in shared memory.
            ArrayClosedError: a slot's Array was closed.
        """
        views = tree_to_ndarray(ArrayDict(tree))  # nested dicts become ArrayDicts
        leaves = list(views.items_flat())
        positions = iter(range(len(leaves)))
        skeleton = tree_map(lambda _: next(positions), views)
        # the pickled skeleton names the nesting exactly (dotted paths would not)
        layout_key = pickle.dumps(skeleton, pickle.HIGHEST_PROTOCOL)
        known_id = self._layout_ids.get(layout_key)
        new_layout = known_id is None
        if known_id is None:
            if len(leaves) > MAX_LEAVES:
                raise ConfigError(f"too many slot leaves ({len(leaves)}) for one step")
            layout_id = len(self._layout_ids)
        else:
            layout_id = known_id
        ids = np.empty(len(leaves), np.int64)
        new: dict[tuple, tuple[int, Any]] = {}  # key: (view id, descriptor)
        for j, (path, view) in enumerate(leaves):
            ids[j] = self._view_id(path, view, new)
        # commit only a tree that passed every check: nothing half-taught
        messages: list[Message] = []
        if new_layout:
            self._layout_ids[layout_key] = layout_id
            self._layouts.append(Layout(layout_id, skeleton))
            messages.append(self._layouts[-1])
        if new:
            described = list(new.values())
            self._view_ids.update((key, view_id) for key, (view_id, _) in new.items())
            self._descriptors += described
            messages.append(Views(described))
        return RegisteredSlots(layout_id, ids, messages, views)

    def _view_id(self, path: str, view: np.ndarray, new: dict) -> int:
        """The id of ``view``; a new one is added to ``new`` with its descriptor."""
        if path.split(".", 1)[0] != "action" and not view.flags.writeable:
            raise ArrayClosedError(
                f"step slot {slot_name(path)!r} is read-only: its Array was "
                "closed (close() released its shared memory), so workers "
                "cannot write into it"
            )
        key = (view_address(view), view.shape, view.strides, view.dtype.char)
        view_id = self._view_ids.get(key)
        if view_id is not None:
            return view_id
        if key in new:
            return new[key][0]
        if view.ndim == 0 or view.shape[0] != self.n_envs:
            raise ConfigError(
                f"slot {slot_name(path)!r} has shape {view.shape}; its "
                f"leading dimension must be the cage's {self.n_envs} envs"
            )
        try:
            descriptor = describe_view(view)
        except ConfigError as exc:
            raise ConfigError(
                f"slot {slot_name(path)!r}: {exc}. ProcessCage workers "
                "write straight into the buffer"
            ) from None
        except ArrayClosedError as exc:
            raise ArrayClosedError(f"slot {slot_name(path)!r}: {exc}") from None
        view_id = len(self._view_ids) + len(new)
        new[key] = (view_id, descriptor)
        return view_id

    def known(self) -> list[Message]:
        """Every layout and view registered so far (to teach a restarted worker)."""
        return [*self._layouts, Views(list(self._descriptors))]


class WorkerSlots:
    """The views, layouts and slot trees a worker has been taught.

    View ids and layouts arrive once (:class:`Views`, :class:`Layout`); a
    step names its tree by ``(layout id, *view ids)``, and the tree built
    for such a key is kept (up to ``MAX_TREES`` of them).
    """

    def __init__(self) -> None:
        self.views: dict[int, np.ndarray] = {}
        self.layouts: dict[int, Any] = {}
        self.trees: dict[tuple, Any] = {}
        self.reset_args: ResetArgs | None = None  # for the next RESET only

    def learn(self, message: Layout | Views | ResetArgs) -> None:
        """Remember a layout, the next reset's arguments, or attach new views."""
        if isinstance(message, ResetArgs):
            self.reset_args = message
        elif isinstance(message, Layout):
            self.layouts[message.layout_id] = message.skeleton
        else:
            for view_id, descriptor in message.descriptors:
                self.views[view_id] = attach_view(descriptor)  # over all envs

    def tree(self, key: tuple) -> Any:
        """Build (and keep) the slot tree of ``key = (layout id, *view ids)``."""
        if len(self.trees) >= MAX_TREES:
            self.trees.clear()
        views, ids = self.views, key[1:]
        tree = tree_map(lambda j: views[ids[j]], self.layouts[key[0]])
        self.trees[key] = tree
        return tree
