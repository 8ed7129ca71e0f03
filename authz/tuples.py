"""Every OpenFGA tuple Wayfinder writes, and every question the gate asks, is built here.

The builders enforce what the model cannot: a page is listed once and has exactly one parent (or
is a root), its parent is a page of the same space, there are no cycles, and subjects are spelled
the way the model allows. A source that breaks one of these gets a SourceError naming the pages
involved, before anything is written. From the checked tree each page gets exactly one guard (its
nearest restricting ancestor) or the unguarded marker.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from authz.base import Check, Condition, RelationTuple
from core import ids
from core.errors import InvalidArgument, SourceError
from core.models import Page, Permissions, Principal

VIEWER = "viewer"
DELEGATE = "delegate"
EVERYONE = "user:*"
LIVE_GRANT = "live_grant"

# Object types whose tuples the index pipeline owns (and deletes when the source drops them).
# Grants (task objects) are written by people, through authz.grants, and never touched by a sync.
SOURCE_TYPES = frozenset({"group", "space", "page"})

def _subject(subject: str, where: str, *, everyone: bool = False) -> str:
    """``subject`` if the model allows it here: ``user:<id>``, ``group:<id>#member``, or ``user:*``
    where everyone may be allowed; a SourceError naming ``where`` otherwise."""
    if everyone and subject == EVERYONE:
        return subject
    kind, _, name = subject.partition(":")
    try:
        if kind == "user":
            return ids.user_id(name)
        if kind == "group" and name.endswith("#member"):
            return f"{ids.group_id(name.removesuffix('#member'))}#member"
    except InvalidArgument:
        pass
    allowed = "'user:<id>', 'group:<id>#member'" + (" or 'user:*'" if everyone else "")
    raise SourceError(f"{where}: subject {subject!r} is not one of {allowed}")


def _group(name: str) -> str:
    try:
        return ids.group_id(name)
    except InvalidArgument as exc:
        raise SourceError(f"group {name!r}: {exc}") from exc


def group_tuples(permissions: Permissions) -> set[RelationTuple]:
    return {
        RelationTuple(_subject(member, f"members of group {group!r}"), "member", _group(group))
        for group, members in permissions.group_members.items()
        for member in members
    }


def space_tuples(space_key: str, permissions: Permissions) -> set[RelationTuple]:
    """Who may view the space. ``user:*`` (every signed-in user) only when the source lists it."""
    return {
        RelationTuple(_subject(subject, f"viewers of space {space_key}", everyone=True), VIEWER, ids.space_id(space_key))
        for subject in permissions.space_viewers.get(space_key, ())
    }


def page_tuples(page: Page, permissions: Permissions, guard: str | None) -> set[RelationTuple]:
    """Space, existence marker, guard edge or unguarded marker, and own restriction or the
    unrestricted marker. ``guard`` is the page id of the nearest restricting ancestor (see
    :func:`guards`). A page the permissions do not classify gets no restriction tuple at all and
    stays invisible; so does everything it guards.
    """
    tuples = {
        RelationTuple(ids.space_id(page.space_key), "space", page.id),
        RelationTuple(EVERYONE, "exists", page.id),
    }
    if guard is None:
        tuples.add(RelationTuple(EVERYONE, "unguarded", page.id))
    else:
        tuples.add(RelationTuple(ids.page_id(guard), "guard", page.id))
    restriction = permissions.page_restrictions.get(page.page_id)
    if restriction is None:
        return tuples  # unclassified: no marker, so nobody passes its restriction
    if restriction:
        tuples.update(
            RelationTuple(_subject(subject, f"restriction of {page.id}"), "restricted_viewer", page.id)
            for subject in restriction
        )
    else:
        tuples.add(RelationTuple(EVERYONE, "unrestricted", page.id))
    return tuples


def guards(pages: Iterable[Page], permissions: Permissions) -> dict[str, str | None]:
    """Page id → id of its nearest ancestor that restricts viewing or has no permission data (its
    guard), or None when no ancestor does. The pages must form a tree (:func:`check_tree`)."""
    parent_of = {page.page_id: page.parent_id for page in pages}
    found: dict[str, str | None] = {}
    for start in parent_of:
        chain: list[str] = []  # pages whose guard is the same as the one found at the end
        node = start
        while node not in found:
            chain.append(node)
            parent = parent_of[node]
            if parent is None or permissions.page_restrictions.get(parent) != ():  # restricted or unclassified
                result = parent
                break
            node = parent
        else:
            result = found[node]
        found.update(dict.fromkeys(chain, result))
    return found


def check_tree(space_key: str, pages: Sequence[Page]) -> None:
    """Each page once, with one parent that is a page of this space, a position of its own among
    its siblings, and no cycles."""
    parent_of: dict[str, str | None] = {}
    for page in pages:
        if page.space_key != space_key:
            raise SourceError(f"{page.id} belongs to space {page.space_key}, not {space_key}")
        if page.page_id in parent_of:
            first, second = parent_of[page.page_id], page.parent_id
            if first != second:
                raise SourceError(
                    f"{page.id} has two parents: {_parent_name(first)} and {_parent_name(second)}; "
                    "a page has exactly one"
                )
            raise SourceError(f"{page.id} is listed twice in space {space_key}")
        parent_of[page.page_id] = page.parent_id
    for page_id, parent in parent_of.items():
        if parent is not None and parent not in parent_of:
            raise SourceError(f"page:{page_id} has parent page:{parent}, which is not a page of space {space_key}")
    taken: dict[tuple[str | None, int], str] = {}
    for page in pages:
        other = taken.setdefault((page.parent_id, page.position), page.page_id)
        if other != page.page_id:  # siblings are listed, and paged through, by position
            raise SourceError(f"page:{other} and {page.id} share position {page.position} under {_parent_name(page.parent_id)}")
    for start in parent_of:
        seen = {start}
        node = parent_of[start]
        while node is not None:
            if node in seen:
                raise SourceError(f"the parents of page:{start} form a cycle through page:{node}")
            seen.add(node)
            node = parent_of[node]


def _parent_name(parent: str | None) -> str:
    return "the space root" if parent is None else f"page:{parent}"


def confluence_tuples(space_key: str, pages: Iterable[Page], permissions: Permissions) -> set[RelationTuple]:
    pages = list(pages)
    check_tree(space_key, pages)
    guard_of = guards(pages, permissions)
    tuples = group_tuples(permissions) | space_tuples(space_key, permissions)
    for page in pages:
        tuples |= page_tuples(page, permissions, guard_of[page.page_id])
    return tuples


def anchors(space_key: str, pages: Iterable[Page], permissions: Permissions) -> dict[str, str]:
    """Page id → the object whose ``viewer`` check answers the page's own: the page itself when it
    restricts viewing (or has no permission data), else its guard, else its space.

    Under the model an unrestricted page passes exactly what its guard passes, and one with no
    guard exactly what its space's viewers pass; so pages sharing an anchor are visible to the
    same users, and one check per anchor tells a pre-filter which pages a user may see.
    """
    pages = list(pages)
    guard_of = guards(pages, permissions)
    found: dict[str, str] = {}
    for page in pages:
        guard = guard_of[page.page_id]
        if permissions.page_restrictions.get(page.page_id) != ():
            found[page.id] = page.id
        else:
            found[page.id] = ids.space_id(space_key) if guard is None else ids.page_id(guard)
    return found


def grant_tuple(user: str, agent: str, task: str, expires_at: datetime) -> RelationTuple:
    """``agent`` may act for ``user`` on ``task`` until ``expires_at`` (a timezone-aware time)."""
    ids.user_id(user)
    if expires_at.tzinfo is None:
        raise ValueError("expires_at must be timezone-aware")
    condition = Condition.of(LIVE_GRANT, {"grantor": user, "expires_at": _rfc3339(expires_at)})
    return RelationTuple(ids.agent_id(agent), DELEGATE, ids.task_id(task), condition)


def can_view(subject: str, obj: str) -> Check:
    """The question the gate asks about every space and page."""
    return Check(subject, VIEWER, obj)


def holds_live_grant(principal: Principal, now: datetime) -> Check:
    """The question asked beside every batch of an agent's checks: does its grant from this user
    for this task still hold at ``now``?"""
    if principal.agent is None or principal.task is None:
        raise ValueError("holds_live_grant needs a delegated principal")
    context = (("acting_for", principal.user), ("current_time", _rfc3339(now)))
    return Check(ids.agent_id(principal.agent), DELEGATE, ids.task_id(principal.task), context)


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
