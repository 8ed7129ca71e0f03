"""Who may see what, computed straight from the source's permissions — never from OpenFGA.

An independent reading of Confluence's rules: a page is visible to a user who may view its space
(directly, through nested groups, or because the space is open to every signed-in user) and who
passes the view restriction of the page and of every restricted ancestor. A page the permissions
do not classify is invisible, and so is everything below it. The leak suite compares what the
service returns with this oracle, so a bug in the model, the tuples or the gate shows up as a
difference.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from core.models import Page, Permissions, Space


@dataclass(frozen=True)
class Oracle:
    spaces: tuple[Space, ...]
    pages: tuple[Page, ...]
    permissions: Permissions

    @classmethod
    def of(cls, spaces: Iterable[Space], pages: Iterable[Page], permissions: Permissions) -> Oracle:
        return cls(tuple(spaces), tuple(pages), permissions)

    def groups_of(self, user: str) -> set[str]:
        """Every group ``user`` is a member of, through any depth of nesting."""
        subjects = {f"user:{user}"}
        groups: set[str] = set()
        changed = True
        while changed:
            changed = False
            for group, members in self.permissions.group_members.items():
                if group not in groups and subjects & set(members):
                    groups.add(group)
                    subjects.add(f"group:{group}#member")
                    changed = True
        return groups

    def _passes(self, user: str, subjects: Iterable[str], *, everyone: bool) -> bool:
        mine = {f"user:{user}"} | {f"group:{g}#member" for g in self.groups_of(user)}
        return any(s in mine or (everyone and s == "user:*") for s in subjects)

    def visible(self, user: str) -> set[str]:
        """Typed ids of the spaces and pages ``user`` may view."""
        spaces = {
            space.id
            for space in self.spaces
            if self._passes(user, self.permissions.space_viewers.get(space.key, ()), everyone=True)
        }
        by_id = {page.page_id: page for page in self.pages}
        shown: set[str] = set()
        for page in self.pages:
            node: Page | None = page
            ok = f"space:{page.space_key}" in spaces
            while ok and node is not None:
                restriction = self.permissions.page_restrictions.get(node.page_id)
                ok = restriction is not None and (not restriction or self._passes(user, restriction, everyone=False))
                node = by_id.get(node.parent_id) if node.parent_id is not None else None
            if ok:
                shown.add(page.id)
        return spaces | shown

    def children(self, node_id: str) -> list[str]:
        """Typed ids of the children of a space (its root pages) or a page, in tree order."""
        if node_id.startswith("space:"):
            found = [p for p in self.pages if p.parent_id is None and f"space:{p.space_key}" == node_id]
        else:
            found = [p for p in self.pages if p.parent_id is not None and f"page:{p.parent_id}" == node_id]
        return [p.id for p in sorted(found, key=lambda p: p.position)]
