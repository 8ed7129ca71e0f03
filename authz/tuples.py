"""Every OpenFGA tuple Wayfinder writes is built here, from what the source reports."""

from __future__ import annotations

from collections.abc import Iterable

from authz.base import Check, RelationTuple
from core.models import Page, Permissions

VIEWER = "viewer"
EVERYONE = "user:*"


def group_tuples(permissions: Permissions) -> set[RelationTuple]:
    return {
        RelationTuple(member, "member", f"group:{group}")
        for group, members in permissions.group_members.items()
        for member in members
    }


def space_tuples(space_key: str, permissions: Permissions) -> set[RelationTuple]:
    return {RelationTuple(subject, VIEWER, f"space:{space_key}") for subject in permissions.space_viewers.get(space_key, ())}


def page_tuples(page: Page, permissions: Permissions) -> set[RelationTuple]:
    """Space membership, parent edge or root marker, and own restriction or the unrestricted marker.

    A page the permissions do not classify gets no restriction tuple at all and stays invisible.
    """
    tuples = {RelationTuple(f"space:{page.space_key}", "space", page.id)}
    if page.parent_id is None:
        tuples.add(RelationTuple(EVERYONE, "is_root", page.id))
    else:
        tuples.add(RelationTuple(f"page:{page.parent_id}", "parent", page.id))
    restriction = permissions.page_restrictions.get(page.page_id)
    if restriction is None:
        return tuples  # unclassified: no marker, so nobody passes its restriction
    if restriction:
        tuples.update(RelationTuple(subject, "restricted_viewer", page.id) for subject in restriction)
    else:
        tuples.add(RelationTuple(EVERYONE, "unrestricted", page.id))
    return tuples


def confluence_tuples(space_key: str, pages: Iterable[Page], permissions: Permissions) -> set[RelationTuple]:
    tuples = group_tuples(permissions) | space_tuples(space_key, permissions)
    for page in pages:
        tuples |= page_tuples(page, permissions)
    return tuples


def can_view(subject: str, obj: str) -> Check:
    """The one question the gate asks about a space or a page."""
    return Check(subject, VIEWER, obj)
