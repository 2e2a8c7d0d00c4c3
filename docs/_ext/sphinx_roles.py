"""Griffe extension: render the docstrings' Sphinx roles as mkdocstrings cross-references.

It also reads a Google-style ``Example:`` heading as griffe's ``Examples:``
section, so doctest blocks render as code.

parllel's docstrings write references as ``:class:`TrajInfo``` or
``:func:`~parllel.tree.buffer_from_example```. This extension rewrites each role,
once the package is loaded, into an optional autorefs reference
(``<autoref identifier="parllel.cages.traj_info.TrajInfo" optional>``),
resolving a short name in the scope of the object whose docstring holds it (its
members, then its module's names, imports included). A reference whose target
the site does not render (a private helper, an undocumented attribute) becomes
plain inline code instead of a broken link; a name that does not resolve to a
parllel object stays inline code too.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

# Google style's "Example:" heading is griffe's "Examples:" section (doctest blocks)
EXAMPLE_HEADING = re.compile(r"^(\s*)Example:[ \t]*$", re.M)
ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):`(~?)([^`]+)`")
TITLED = re.compile(r"^(.*?)\s*<([^<>]+)>$")


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
            text = EXAMPLE_HEADING.sub(r"\1Examples:", obj.docstring.value)
            obj.docstring.value = ROLE.sub(
                lambda match: self._link(obj, match, package), text
            )
        for member in obj.members.values():
            if not member.is_alias:
                self._walk(member, package, seen)

    def _link(self, obj: Any, match: re.Match[str], package: Any) -> str:
        short, body = match.group(1) == "~", " ".join(match.group(2).split())
        titled = TITLED.match(body)  # Sphinx's "title <target>" form
        if titled:
            text, target = titled.group(1), titled.group(2).rstrip("()")
        else:
            target = body.rstrip("()")
            text = target.rsplit(".", 1)[-1] if short else target
        path = _resolve(obj, target, package)
        if path is None or not _public(path):
            return f"`{text}`"
        return f'<autoref identifier="{path}" optional><code>{text}</code></autoref>'
