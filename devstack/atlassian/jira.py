"""The Jira half of an emulated Atlassian site: projects, project roles, issue security levels,
issues with their hierarchy (epic → standard issue → sub-task), comments and links.

Users and groups are the site's (one directory for Confluence and Jira, as on Atlassian Cloud).
Visibility follows Jira: a user sees an issue when the project's "Browse projects" permission
names them (directly, through a group, a project role, everyone, or — for the issues they
reported or are assigned — the reporter or assignee holder) and, when the issue has a security
level, the level names them (user, group, role, or the issue's reporter or assignee). A sub-task
always has its parent's level. Administrators get no exemption: the account a sync runs under
sees what it is granted. A comment may be restricted to a project role or a group; only their
members see it, in every listing. Edits, comments and moves between epics change an issue's
``updated``; role and group membership changes do not.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from devstack.atlassian.site import Site, User

from devstack.atlassian.site import SiteError

# Jira's hierarchy levels, as ``issuetype.hierarchyLevel`` reports them.
EPIC, STANDARD, SUBTASK = 1, 0, -1
ISSUE_TYPES = {"Epic": EPIC, "Story": STANDARD, "Task": STANDARD, "Bug": STANDARD, "Sub-task": SUBTASK}
LINK_TYPES = {"Blocks": ("is blocked by", "blocks"), "Relates": ("relates to", "relates to"), "Duplicate": ("is duplicated by", "duplicates")}


@dataclass
class Role:
    id: int
    name: str
    users: set[str] = field(default_factory=set)  # account ids
    groups: set[str] = field(default_factory=set)


@dataclass
class SecurityLevel:
    id: str
    name: str
    users: set[str] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    roles: set[str] = field(default_factory=set)  # role names of the issue's project
    reporter: bool = False
    assignee: bool = False


@dataclass
class Project:
    id: str
    key: str
    name: str
    lead: str  # account id
    roles: dict[str, Role] = field(default_factory=dict)  # by name
    browse_users: set[str] = field(default_factory=set)
    browse_groups: set[str] = field(default_factory=set)
    browse_roles: set[str] = field(default_factory=set)
    browse_anyone: bool = False
    browse_reporter: bool = False  # "Browse projects" granted to each issue's reporter ...
    browse_assignee: bool = False  # ... and assignee, for that issue alone
    levels: dict[str, SecurityLevel] = field(default_factory=dict)  # its issue security scheme, by level id
    permission_scheme_id: int = 0
    security_scheme_id: int = 0


@dataclass
class Comment:
    id: str
    author: str
    body: str  # wiki markup
    created: datetime
    visibility: tuple[str, str] | None = None  # ("role", role name) or ("group", group name); None: all who see the issue


@dataclass
class Issue:
    id: str
    key: str
    project_key: str
    issue_type: str
    summary: str
    description: str  # wiki markup
    parent_key: str | None  # the epic of a standard issue, the parent of a sub-task
    created: datetime
    updated: datetime
    reporter: str
    assignee: str | None = None
    status: str = "Open"
    labels: list[str] = field(default_factory=list)
    security_level: str | None = None  # level id; a sub-task's is always its parent's
    comments: list[Comment] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)  # (link type, outward issue key)

    @property
    def hierarchy_level(self) -> int:
        return ISSUE_TYPES[self.issue_type]

    @property
    def number(self) -> int:
        return int(self.key.rpartition("-")[2])


class Jira:
    """The projects and issues of one site."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.projects: dict[str, Project] = {}  # by key
        self.issues: dict[str, Issue] = {}  # by key
        self._ids = itertools.count(10_000)

    # -- reading ---------------------------------------------------------------------------

    def level_of(self, issue: Issue) -> SecurityLevel | None:
        """The issue's security level (a sub-task's is its parent's)."""
        holder = self.issues.get(issue.parent_key or "") if issue.hierarchy_level == SUBTASK else issue
        if holder is None or holder.security_level is None:
            return None
        return self.projects[holder.project_key].levels.get(holder.security_level)

    def in_role(self, user: User, project: Project, role_name: str) -> bool:
        role = project.roles.get(role_name)
        return role is not None and (user.account_id in role.users or bool(self.site.groups_of(user.account_id) & role.groups))

    def can_browse(self, user: User, project: Project) -> bool:
        """The project-wide "Browse projects": holders other than an issue's reporter or assignee."""
        return (
            project.browse_anyone
            or user.account_id in project.browse_users
            or bool(self.site.groups_of(user.account_id) & project.browse_groups)
            or any(self.in_role(user, project, role) for role in project.browse_roles)
        )

    def readable(self, user: User, issue: Issue) -> bool:
        """Browse on the project and, if the issue has a security level, a place in the level. A
        sub-task is readable exactly when its parent is."""
        if issue.hierarchy_level == SUBTASK:
            parent = self.issues.get(issue.parent_key or "")
            return parent is not None and self.readable(user, parent)
        project = self.projects[issue.project_key]
        browses = (
            self.can_browse(user, project)
            or (project.browse_reporter and issue.reporter == user.account_id)
            or (project.browse_assignee and issue.assignee == user.account_id)
        )
        if not browses:
            return False
        if issue.security_level is None:
            return True
        level = project.levels.get(issue.security_level)
        return level is not None and (
            user.account_id in level.users
            or bool(self.site.groups_of(user.account_id) & level.groups)
            or any(self.in_role(user, project, role) for role in level.roles)
            or (level.reporter and issue.reporter == user.account_id)
            or (level.assignee and issue.assignee == user.account_id)
        )

    def comment_readable(self, user: User, issue: Issue, comment: Comment) -> bool:
        """A comment is read with its issue, and a restricted one by its role's or group's members only."""
        if comment.visibility is None:
            return True
        kind, name = comment.visibility
        if kind == "role":
            return self.in_role(user, self.projects[issue.project_key], name)
        return user.account_id in self.site.groups.get(name, set())

    def visible_issues(self, user: User) -> list[Issue]:
        return [issue for issue in self.issues.values() if self.readable(user, issue)]

    def children(self, key: str) -> list[Issue]:
        return sorted((i for i in self.issues.values() if i.parent_key == key), key=lambda i: i.number)

    def subtasks(self, key: str) -> list[Issue]:
        return [i for i in self.children(key) if i.hierarchy_level == SUBTASK]

    def links_of(self, key: str) -> Iterator[tuple[str, str, str]]:
        """(link type, "outward" or "inward", other issue key) for every link touching ``key``."""
        for issue in self.issues.values():
            for kind, target in issue.links:
                if issue.key == key:
                    yield kind, "outward", target
                elif target == key:
                    yield kind, "inward", issue.key

    # -- changing ----------------------------------------------------------------------------

    def add_project(self, key: str, name: str, *, lead: str, roles: dict[str, tuple[set[str], set[str]]] = {}) -> Project:
        if key in self.projects:
            raise SiteError(f"project {key} already exists", 409)
        self.site.require_user(lead)
        number = len(self.projects) + 1
        project = Project(str(10_000 + number), key, name, lead, permission_scheme_id=number, security_scheme_id=number)
        for role_id, (role_name, (users, groups)) in enumerate(roles.items(), start=10_002):
            project.roles[role_name] = Role(role_id, role_name, set(users), set(groups))
        self.projects[key] = project
        return project

    def set_browse(
        self, key: str, *, users: set[str] = frozenset(), groups: set[str] = frozenset(), roles: set[str] = frozenset(), anyone: bool = False,
        reporter: bool = False, assignee: bool = False,
    ) -> None:
        project = self._project(key)
        self._check_roles(project, roles)
        project.browse_users, project.browse_groups, project.browse_roles, project.browse_anyone = set(users), set(groups), set(roles), anyone
        project.browse_reporter, project.browse_assignee = reporter, assignee

    def add_level(self, key: str, level: SecurityLevel) -> None:
        project = self._project(key)
        self._check_roles(project, level.roles)
        project.levels[level.id] = level

    def set_role_members(self, key: str, role_name: str, *, users: set[str], groups: set[str]) -> None:
        """Replace a role's members. Not an issue change: no issue's ``updated`` moves."""
        project = self._project(key)
        self._check_roles(project, {role_name})
        for account_id in users:
            self.site.require_user(account_id)
        project.roles[role_name].users, project.roles[role_name].groups = set(users), set(groups)

    def create_issue(
        self, project_key: str, issue_type: str, summary: str, *, by: str, description: str = "", parent_key: str | None = None,
        key: str | None = None, at: datetime | None = None, assignee: str | None = None, labels: list[str] = (),
        security_level: str | None = None, status: str = "Open",
    ) -> Issue:
        project = self._project(project_key)
        self.site.require_user(by)
        if issue_type not in ISSUE_TYPES:
            raise SiteError(f"unknown issue type {issue_type!r}; use one of {sorted(ISSUE_TYPES)}")
        key = key or f"{project_key}-{max((i.number for i in self.issues.values() if i.project_key == project_key), default=0) + 1}"
        if key in self.issues:
            raise SiteError(f"issue {key} already exists", 409)
        if not key.startswith(f"{project_key}-"):
            raise SiteError(f"issue key {key} is not of project {project_key}")
        self._check_parent(project_key, ISSUE_TYPES[issue_type], parent_key)
        if security_level is not None and security_level not in project.levels:
            raise SiteError(f"project {project_key} has no security level {security_level}")
        when = at or self.site.clock()
        issue = Issue(
            str(next(self._ids)), key, project_key, issue_type, summary, description, parent_key, when, when, by, assignee,
            status, list(labels), None if ISSUE_TYPES[issue_type] == SUBTASK else security_level,
        )
        self.issues[key] = issue
        return issue

    def edit_issue(self, key: str, *, by: str, summary: str | None = None, description: str | None = None, at: datetime | None = None) -> Issue:
        issue = self._issue(key)
        self.site.require_user(by)
        if summary is not None:
            issue.summary = summary
        if description is not None:
            issue.description = description
        issue.updated = at or self.site.clock()
        return issue

    def add_comment(self, key: str, body: str, *, by: str, at: datetime | None = None, visibility: tuple[str, str] | None = None) -> Comment:
        issue = self._issue(key)
        self.site.require_user(by)
        if visibility is not None:
            kind, name = visibility
            if kind == "role":
                self._check_roles(self.projects[issue.project_key], {name})
            elif kind == "group":
                self.site.require_group(name)
            else:
                raise SiteError(f"a comment is restricted to a role or a group, not {kind!r}")
        when = at or self.site.clock()
        comment = Comment(str(next(self._ids)), by, body, when, visibility)
        issue.comments.append(comment)
        issue.updated = when
        return comment

    def move_issue(self, key: str, parent_key: str | None, *, at: datetime | None = None) -> Issue:
        """Put a standard issue under another epic (or none), or a sub-task under another parent."""
        issue = self._issue(key)
        self._check_parent(issue.project_key, issue.hierarchy_level, parent_key)
        issue.parent_key = parent_key
        issue.updated = at or self.site.clock()
        return issue

    def set_security_level(self, key: str, level_id: str | None, *, at: datetime | None = None) -> Issue:
        issue = self._issue(key)
        if issue.hierarchy_level == SUBTASK:
            raise SiteError(f"{key} is a sub-task: it has its parent's security level")
        if level_id is not None and level_id not in self.projects[issue.project_key].levels:
            raise SiteError(f"project {issue.project_key} has no security level {level_id}")
        issue.security_level = level_id
        issue.updated = at or self.site.clock()
        return issue

    def link(self, kind: str, outward: str, inward: str) -> None:
        if kind not in LINK_TYPES:
            raise SiteError(f"unknown link type {kind!r}; use one of {sorted(LINK_TYPES)}")
        self._issue(outward).links.append((kind, self._issue(inward).key))

    def delete_issue(self, key: str) -> list[str]:
        """Delete an issue with its sub-tasks (as Jira does); its stories lose their epic. Returns
        the keys deleted."""
        self._issue(key)  # an unknown key is a 404
        gone = [key, *(s.key for s in self.subtasks(key))]
        for child in self.children(key):
            if child.hierarchy_level != SUBTASK:
                child.parent_key = None
        for other in self.issues.values():
            other.links = [(kind, target) for kind, target in other.links if target not in gone]
        for dead in gone:
            del self.issues[dead]
        return gone

    def _project(self, key: str) -> Project:
        if key not in self.projects:
            raise SiteError(f"no project {key}", 404)
        return self.projects[key]

    def _issue(self, key: str) -> Issue:
        if key not in self.issues:
            raise SiteError(f"no issue {key}", 404)
        return self.issues[key]

    def _check_roles(self, project: Project, roles: set[str]) -> None:
        unknown = set(roles) - set(project.roles)
        if unknown:
            raise SiteError(f"project {project.key} has no role {sorted(unknown)[0]!r}")

    def _check_parent(self, project_key: str, level: int, parent_key: str | None) -> None:
        if parent_key is None:
            if level == SUBTASK:
                raise SiteError("a sub-task needs a parent")
            return
        parent = self._issue(parent_key)
        if parent.project_key != project_key:
            raise SiteError(f"parent {parent_key} is in project {parent.project_key}, not {project_key}")
        if parent.hierarchy_level != level + 1:
            raise SiteError(f"a {_level_name(level)} cannot sit under a {_level_name(parent.hierarchy_level)} ({parent_key})")


def _level_name(level: int) -> str:
    return {EPIC: "epic", STANDARD: "standard issue", SUBTASK: "sub-task"}.get(level, str(level))
