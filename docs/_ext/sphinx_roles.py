"""Griffe extension: render the docstrings' Sphinx roles as mkdocstrings cross-references.

parllel's docstrings write references as ``:class:`TrajInfo``` or
``:func:`~parllel.tree.buffer_from_example```. This extension rewrites each role,
once the package is loaded, into autorefs' Markdown form
(``[`TrajInfo`][parllel.cages.traj_info.TrajInfo]``), resolving a short name in
the scope of the object whose docstring holds it (its members, then its module's
names, imports included). A name that does not resolve to a public parllel object
stays inline code, so the build never emits a link that cannot land.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):`(~?)([^`]+)`")


def _public(path: str) -> bool:
    return path.startswith("parllel") and not any(
        part.startswith("_") for part in path.split(".")
    )


def _lookup(scope: Any, dotted: str) -> str | None:
    """The canonical path of ``dotted`` looked up from ``scope`` outwards."""
    head, _, rest = dotted.partition(".")
    while scope is not None:
        member = scope.members.get(head) if hasattr(scope, "members") else None
        if member is not None:
            try:
                target = member.final_target if member.is_alias else member
            except Exception:  # an import from outside parllel
                return None
            path = target.path + (f".{rest}" if rest else "")
            return path
        scope = scope.parent
    return None


def _resolve(obj: Any, target: str, package: Any) -> str | None:
    if target.startswith("parllel."):
        try:
            found = package.modules_collection[target]
        except Exception:
            return None
        return found.final_target.path if found.is_alias else found.path
    return _lookup(obj, target)


class SphinxRoles(griffe.Extension):
    """Rewrites Sphinx roles in every docstring of the loaded package."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        self._walk(pkg, pkg, set())

    def _walk(self, obj: Any, package: Any, seen: set[str]) -> None:
        if obj.path in seen:
            return
        seen.add(obj.path)
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(
                lambda match: self._link(obj, match, package), obj.docstring.value
            )
        for member in obj.members.values():
            if not member.is_alias:
                self._walk(member, package, seen)

    def _link(self, obj: Any, match: re.Match[str], package: Any) -> str:
        short, target = match.group(1) == "~", match.group(2).rstrip("()")
        text = target.rsplit(".", 1)[-1] if short else target
        path = _resolve(obj, target, package)
        if path is None or not _public(path):
            return f"`{text}`"
        return f"[`{text}`][{path}]"
