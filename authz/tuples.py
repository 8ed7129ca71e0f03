"""Every OpenFGA tuple Wayfinder writes, and every question the gate asks, is built here.

The builders enforce what the model cannot: a page is listed once and has exactly one parent (or
is a root), its parent is a page of the same space, there are no cycles, and subjects are spelled
the way the model allows. A source whose tree breaks one of these gets a SourceError naming the
pages involved, before anything is written. From the checked tree each page gets exactly one guard
(its nearest restricting ancestor) or the unguarded marker.

A subject the model cannot hold (Browse granted to each issue's reporter, a holder type it has no
relation for, a misspelt subject) is one grant, not a reason to stop every other permission
change (DESIGN.md A13): it is left out and recorded in ``refused``. Leaving a grant out only ever
narrows its object — every relation here is a positive grant, and whether a page or level
restricts at all is decided from the source's list, not from the grants that survived — so a
refusal fails that one grant closed and the rest of the update still reaches OpenFGA.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
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
SOURCE_TYPES = frozenset({"group", "space", "page", "project_role", "project", "security_level", "issue", "comment"})

@dataclass(frozen=True)
class Unexpressed:
    """A grant the model cannot hold, left out: ``subject`` is not written as ``relation`` of
    ``object``, so the object is at most as visible as the source says (fail closed)."""

    object: str
    relation: str
    subject: str
    why: str

    def __str__(self) -> str:
        return f"{self.object} {self.relation}: {self.subject!r} left out ({self.why})"


Refusals = list[Unexpressed]


def _subject(subject: str, obj: str, relation: str, refused: Refusals, *, everyone: bool = False, roles: bool = False) -> str | None:
    """``subject`` if the model allows it as ``relation`` of ``obj``: ``user:<id>``,
    ``group:<id>#member``, ``user:*`` where everyone may be allowed, ``project_role:<id>#member``
    where roles may be; otherwise None, with the refusal recorded."""
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
    why = _PER_ISSUE.get(subject) or f"not one of {allowed}"
    refused.append(Unexpressed(obj, relation, subject, why))
    return None


# Jira grants whose holder is decided per issue, which a project-wide relation cannot say.
_PER_ISSUE = {
    REPORTER: "granted to each issue's reporter, which no project-wide grant can express",
    ASSIGNEE: "granted to each issue's assignee, which no project-wide grant can express",
}


def _tuples(subjects: Iterable[str], relation: str, obj: str, refused: Refusals, **allowed: bool) -> set[RelationTuple]:
    """``relation`` of ``obj`` for each subject the model can hold; the others are refused."""
    found = (_subject(subject, obj, relation, refused, **allowed) for subject in subjects)
    return {RelationTuple(subject, relation, obj) for subject in found if subject is not None}


def _role(name: str) -> str:
    return f"project_role:{ids.group_id(name).removeprefix('group:')}"  # the same spelling rules as a group


def group_tuples(group_members: Mapping[str, Iterable[str]], refused: Refusals | None = None) -> set[RelationTuple]:
    """Each group's members; a group whose name the model cannot hold gets none (its grants
    elsewhere are refused as subjects too)."""
    refused = [] if refused is None else refused
    tuples: set[RelationTuple] = set()
    for group, members in group_members.items():
        try:
            tuples |= _tuples(members, "member", ids.group_id(group), refused)
        except InvalidArgument as exc:
            refused.append(Unexpressed(f"group:{group}", "member", "(all members)", str(exc)))
    return tuples


def space_tuples(space_key: str, permissions: Permissions, refused: Refusals | None = None) -> set[RelationTuple]:
    """Who may view the space. ``user:*`` (every signed-in user) only when the source lists it."""
    viewers = permissions.space_viewers.get(space_key, ())
    return _tuples(viewers, VIEWER, ids.space_id(space_key), [] if refused is None else refused, everyone=True)


def page_tuples(page: Page, permissions: Permissions, guard: str | None, refused: Refusals | None = None) -> set[RelationTuple]:
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
    if restriction:  # restricted, whatever survives of its subjects: a refused one narrows it
        tuples |= _tuples(restriction, "restricted_viewer", page.id, [] if refused is None else refused)
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


def confluence_tuples(space_key: str, pages: Iterable[Page], permissions: Permissions, refused: Refusals | None = None) -> set[RelationTuple]:
    """The space's tuples; grants the model cannot hold are left out and added to ``refused``."""
    refused = [] if refused is None else refused
    pages = list(pages)
    check_tree(space_key, pages)
    guard_of = guards(pages, permissions)
    tuples = group_tuples(permissions.group_members, refused) | space_tuples(space_key, permissions, refused)
    for page in pages:
        tuples |= page_tuples(page, permissions, guard_of[page.page_id], refused)
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


def issue_anchors(project_key: str, issues: Iterable[Issue], permissions: JiraPermissions, hidden: Set[str] = frozenset()) -> dict[str, str]:
    """Issue id → the object whose ``viewer`` check answers the issue's own once its project is
    visible, as :func:`anchors` does for pages: the project for an issue with no level, its level
    for one whose level admits no reporter or assignee, a sub-task's parent's anchor when the
    sub-task adds nothing to it, and the issue itself otherwise.

    A restricted comment's readers are its issue's who are in its audience, so comments whose
    issues share an anchor and that share an audience share their readers: the first of them
    (not ``hidden``) answers for all, and a project with hundreds of review notes to one role
    costs the pre-filter one check, not hundreds."""
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

    found = {issue.id: anchor(issue) for issue in issues}
    first: dict[tuple[str, str], str] = {}
    for issue in issues:
        for comment in issue.comments:
            shared = (found[issue.id], comment.audience)
            found[comment.id] = comment.id if comment.id in hidden else first.setdefault(shared, comment.id)
    return found


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


def jira_tuples(project_key: str, issues: Iterable[Issue], permissions: JiraPermissions, refused: Refusals | None = None) -> set[RelationTuple]:
    """Browse, roles, security levels and every issue of one project. A sub-task follows its
    parent (and carries the level Jira gives it); every other issue stands on its own. Grants
    the model cannot hold are left out and added to ``refused``."""
    refused = [] if refused is None else refused
    issues = list(issues)
    check_issue_tree(project_key, issues)
    project = ids.project_id(project_key)
    tuples = group_tuples(permissions.group_members, refused)
    tuples |= _tuples(permissions.project_browsers.get(project_key, ()), VIEWER, project, refused, everyone=True, roles=True)
    for role, members in permissions.role_members.items():
        if role.partition(".")[0] != project_key:
            continue
        try:
            tuples |= _tuples(members, "member", _role(role), refused)
        except InvalidArgument as exc:
            refused.append(Unexpressed(f"project_role:{role}", "member", "(all members)", str(exc)))
    for issue in issues:
        tuples |= issue_tuples(issue, permissions, refused) | comment_tuples(issue, refused)
    return tuples


def issue_tuples(issue: Issue, permissions: JiraPermissions, refused: Refusals | None = None) -> set[RelationTuple]:
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
    others = [member for member in members if member not in (REPORTER, ASSIGNEE)]
    tuples |= _tuples(others, "member", level_object, [] if refused is None else refused, everyone=True, roles=True)
    for role, person in ((REPORTER, issue.reporter), (ASSIGNEE, issue.assignee)):
        if role in members and person is not None:
            subject = _subject(f"user:{person}", me, role, [] if refused is None else refused)  # an id made by ids.user_name
            if subject is not None:
                tuples |= {RelationTuple(subject, role, me), RelationTuple(EVERYONE, f"level_admits_{role}", me)}
    return tuples


def comment_tuples(issue: Issue, refused: Refusals | None = None) -> set[RelationTuple]:
    """Each restricted comment of ``issue``: its issue and its audience (a role or a group). An
    audience the model cannot hold is refused, and the comment is read by nobody."""
    refused = [] if refused is None else refused
    tuples: set[RelationTuple] = set()
    for comment in issue.comments:
        tuples.add(RelationTuple(issue.id, "issue", comment.id))
        if comment.audience.startswith("user:"):  # Jira restricts a comment to a role or a group, never one person
            refused.append(Unexpressed(comment.id, "audience", comment.audience, "a comment's audience is a role or a group"))
            continue
        audience = _subject(comment.audience, comment.id, "audience", refused, roles=True)
        if audience is not None:
            tuples.add(RelationTuple(audience, "audience", comment.id))
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
