"""Every OpenFGA tuple Wayfinder writes, and every question the gate asks, is built here.

The builders enforce what the model cannot: a page is listed once and has exactly one parent (or
is a root), its parent is a page of the same space, there are no cycles, and subjects are spelled
the way the model allows. A source that breaks one of these gets a SourceError naming the pages
involved, before anything is written. From the checked tree each page gets exactly one guard (its
nearest restricting ancestor) or the unguarded marker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime

from authz.base import Check, Condition, RelationTuple
from core import ids
from core.errors import InvalidArgument, SourceError
from core.models import ASSIGNEE, REPORTER, Issue, JiraPermissions, Page, Permissions, Principal

VIEWER = "viewer"
DELEGATE = "delegate"
EVERYONE = "user:*"
LIVE_GRANT = "live_grant"

# Object types whose tuples the index pipeline owns (and deletes when the source drops them).
# Grants (task objects) are written by people, through authz.grants, and never touched by a sync.
SOURCE_TYPES = frozenset({"group", "space", "page", "project_role", "project", "security_level", "issue"})

def _subject(subject: str, where: str, *, everyone: bool = False, roles: bool = False) -> str:
    """``subject`` if the model allows it here: ``user:<id>``, ``group:<id>#member``, ``user:*``
    where everyone may be allowed, ``project_role:<id>#member`` where roles may be; a SourceError
    naming ``where`` otherwise."""
    if everyone and subject == EVERYONE:
        return subject
    kind, _, name = subject.partition(":")
    try:
        if kind == "user":
            return ids.user_id(name)
        if kind == "group" and name.endswith("#member"):
            return f"{ids.group_id(name.removesuffix('#member'))}#member"
        if roles and kind == "project_role" and name.endswith("#member"):
            return f"{_role(name.removesuffix('#member'))}#member"
    except InvalidArgument:
        pass
    allowed = "'user:<id>', 'group:<id>#member'" + (", 'project_role:<id>#member'" if roles else "") + (" or 'user:*'" if everyone else "")
    raise SourceError(f"{where}: subject {subject!r} is not one of {allowed}")


def _role(name: str) -> str:
    return f"project_role:{ids.group_id(name).removeprefix('group:')}"  # the same spelling rules as a group


def _group(name: str) -> str:
    try:
        return ids.group_id(name)
    except InvalidArgument as exc:
        raise SourceError(f"group {name!r}: {exc}") from exc


def group_tuples(group_members: Mapping[str, Iterable[str]]) -> set[RelationTuple]:
    return {
        RelationTuple(_subject(member, f"members of group {group!r}"), "member", _group(group))
        for group, members in group_members.items()
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
    _refuse_cycles(parent_of, "page")


def _refuse_cycles(parent_of: dict[str, str | None], kind: str) -> None:
    for start in parent_of:
        seen = {start}
        node = parent_of[start]
        while node is not None:
            if node in seen:
                raise SourceError(f"the parents of {kind}:{start} form a cycle through {kind}:{node}")
            seen.add(node)
            node = parent_of[node]


def _parent_name(parent: str | None) -> str:
    return "the space root" if parent is None else f"page:{parent}"


def confluence_tuples(space_key: str, pages: Iterable[Page], permissions: Permissions) -> set[RelationTuple]:
    pages = list(pages)
    check_tree(space_key, pages)
    guard_of = guards(pages, permissions)
    tuples = group_tuples(permissions.group_members) | space_tuples(space_key, permissions)
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


def security_level_id(project_key: str, level: str) -> str:
    """The OpenFGA object of one project's use of a security level. Jira resolves a level's role
    members in the issue's own project, so two projects sharing a security scheme get a level
    object each: a Committer of one project never passes the level in another."""
    return f"security_level:{ids.group_id(f'{project_key}.{level}').removeprefix('group:')}"


def issue_anchors(project_key: str, issues: Iterable[Issue], permissions: JiraPermissions) -> dict[str, str]:
    """Issue id → the object whose ``viewer`` check answers the issue's own once its project is
    visible, as :func:`anchors` does for pages: the project for an issue with no level, its level
    for one whose level admits no reporter or assignee, a sub-task's parent's anchor when the
    sub-task adds nothing to it, and the issue itself otherwise."""
    issues = list(issues)
    check_issue_tree(project_key, issues)
    by_key = {issue.key: issue for issue in issues}
    project = ids.project_id(project_key)

    def own(issue: Issue) -> str | None:
        """What its security level alone asks: nothing, its level object, or the issue itself."""
        if issue.security_level is None:
            return None
        members = permissions.level_members.get(issue.security_level, ())
        if REPORTER in members or ASSIGNEE in members:
            return issue.id  # its reporter or assignee may pass: per issue
        return security_level_id(project_key, issue.security_level)

    def anchor(issue: Issue) -> str:
        level = own(issue)
        if not issue.subtask:
            return level or project
        parent = anchor(by_key[issue.parent_key or ""])  # a parent is never a sub-task
        if level is None:
            return parent
        return level if parent in (project, level) else issue.id

    return {issue.id: anchor(issue) for issue in issues}


def check_issue_tree(project_key: str, issues: Sequence[Issue]) -> None:
    """Each issue once, in this project; a parent that is an issue of this project and no
    sub-task itself for a sub-task; no cycles."""
    parent_of: dict[str, str | None] = {}
    by_key = {issue.key: issue for issue in issues}
    for issue in issues:
        if issue.project_key != project_key:
            raise SourceError(f"{issue.id} belongs to project {issue.project_key}, not {project_key}")
        if issue.key in parent_of:
            raise SourceError(f"{issue.id} is listed twice in project {project_key}")
        parent_of[issue.key] = issue.parent_key
    for issue in issues:
        parent = by_key.get(issue.parent_key) if issue.parent_key else None
        if issue.parent_key is not None and parent is None:
            raise SourceError(f"{issue.id} has parent issue:{issue.parent_key}, which is not an issue of project {project_key}")
        if issue.subtask and (parent is None or parent.subtask):
            raise SourceError(f"sub-task {issue.id} needs a parent that is not a sub-task")
    _refuse_cycles(parent_of, "issue")


def jira_tuples(project_key: str, issues: Iterable[Issue], permissions: JiraPermissions) -> set[RelationTuple]:
    """Browse, roles, security levels and every issue of one project. A sub-task follows its
    parent (and carries the level Jira gives it); every other issue stands on its own."""
    issues = list(issues)
    check_issue_tree(project_key, issues)
    project = ids.project_id(project_key)
    tuples = group_tuples(permissions.group_members)
    tuples |= {
        RelationTuple(_subject(subject, f"browsers of project {project_key}", everyone=True, roles=True), VIEWER, project)
        for subject in permissions.project_browsers.get(project_key, ())
    }
    for role, members in permissions.role_members.items():
        if role.partition(".")[0] == project_key:
            tuples |= {RelationTuple(_subject(m, f"members of role {role!r}"), "member", _role(role)) for m in members}
    for issue in issues:
        tuples |= issue_tuples(issue, permissions)
    return tuples


def issue_tuples(issue: Issue, permissions: JiraPermissions) -> set[RelationTuple]:
    """Project, existence, parent or own-visibility marker, and its security: the level with its
    members (and the reporter and assignee when the level admits them), or the unsecured marker."""
    me = issue.id
    tuples = {RelationTuple(ids.project_id(issue.project_key), "project", me), RelationTuple(EVERYONE, "exists", me)}
    if issue.subtask:
        tuples.add(RelationTuple(ids.issue_id(issue.parent_key or ""), "parent", me))
    else:
        tuples.add(RelationTuple(EVERYONE, "own_visibility", me))
    level = issue.security_level
    if level is None:
        tuples.add(RelationTuple(EVERYONE, "unsecured", me))
        return tuples
    level_object = security_level_id(issue.project_key, level)
    tuples.add(RelationTuple(level_object, "security", me))
    members = permissions.level_members.get(level, ())
    for member in members:
        if member not in (REPORTER, ASSIGNEE):
            tuples.add(RelationTuple(_subject(member, f"members of security level {level!r}", everyone=True, roles=True), "member", level_object))
    for role, person in ((REPORTER, issue.reporter), (ASSIGNEE, issue.assignee)):
        if role in members and person is not None:
            tuples.add(RelationTuple(ids.user_id(person), role, me))
            tuples.add(RelationTuple(EVERYONE, f"level_admits_{role}", me))
    return tuples


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
