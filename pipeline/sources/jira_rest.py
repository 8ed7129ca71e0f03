"""Jira over REST (Cloud and Data Center) with atlassian-python-api: what a sync needs from a
project, as plain records — the project, a listing of every issue without text (key, type,
parent, security level, updated: what date queries cannot see), issues changed since a time with
their text, and who may browse what.

* **Deployment**: the setting, or else ``serverInfo``'s ``deploymentType``.
* **Search**: Cloud through ``/rest/api/3/search/jql`` paged with ``nextPageToken`` (its old
  searches answer 410), Data Center through ``/rest/api/2/search`` paged with ``startAt``. Cloud's
  search carries an issue's first comments only; the rest come from the issue's comment endpoint.
* **Text** is kept as sent — Atlassian Document Format from Cloud, wiki markup from Data Center —
  for the raw store; :mod:`pipeline.transform.jira` turns both into Markdown.
* **JQL dates** are minute-precise and read in the sync account's time zone, which is asked from
  the site (``/rest/api/2/myself``).
* **Permissions**: "Browse projects" holders of the project's permission scheme, the actors of its
  roles, and the members of its security levels (reporter and assignee included), in OpenFGA
  spelling; Jira's groups get ids of their own (``x-jira-<name>``), apart from Confluence's. Reading them needs an administrator; without them the sync stops rather than guess.
  A holder Wayfinder has no relation for (a custom field, the project lead, an application
  role) is passed on as ``holder:<type>``, so the tuple builders refuse it and the sync reports it.
* **Identity**: every user becomes a Wayfinder id through :func:`core.ids.user_name`, once; the
  directory lookup (:meth:`JiraRestSource.user_by_email`) answers the raw name, which its caller
  maps the same way.
* **Restricted comments** (visible to one project role or group) are kept with their
  ``visibility``: a comment is never shown to more people than Jira shows it to (DESIGN.md A14).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from atlassian import Jira

from core.errors import ConfigurationError, SourceError
from core.ids import jira_group_name, safe_name, user_name
from core.models import ASSIGNEE, REPORTER, JiraPermissions
from core.settings import JiraSettings
from pipeline.sources.atlassian_http import AtlassianHttp

log = logging.getLogger("wayfinder.sources.jira")

LIST_FIELDS = "summary,issuetype,parent,security,updated,status,labels,reporter,assignee"
TEXT_FIELDS = f"{LIST_FIELDS},description,comment,issuelinks"
BROWSE = "BROWSE_PROJECTS"


@dataclass(frozen=True)
class RemoteProject:
    key: str
    name: str
    url: str


@dataclass(frozen=True)
class RemoteComment:
    author: str | None
    created: datetime
    body: Any  # as sent: wiki markup (Data Center) or an ADF document (Cloud)
    visibility: tuple[str, str] | None = None  # ("role" | "group", its name) when restricted; None: all who see the issue
    id: str | None = None  # Jira's comment id: a restricted comment's document id


@dataclass(frozen=True)
class RemoteIssue:
    key: str
    project_key: str
    issue_type: str
    hierarchy_level: int
    summary: str
    parent_key: str | None
    updated: datetime
    url: str
    security_level: str | None
    status: str
    labels: tuple[str, ...]
    reporter: str | None
    assignee: str | None
    description: Any = None  # as sent, when the text was asked for: wiki markup, ADF, or None
    comments: tuple[RemoteComment, ...] = ()
    links: tuple[tuple[str, str, str], ...] = ()  # (link type, "outward" or "inward", other key)


class JiraRestSource:
    """One Jira site. Construction does no I/O; every call runs the blocking client in a thread."""

    def __init__(self, settings: JiraSettings, url: str, *, sleep: Callable[[float], None] | None = None) -> None:
        if settings.token is None:
            raise ConfigurationError("WAYFINDER_JIRA__TOKEN is required to read a Jira site")
        self._settings = settings
        self._url = url.rstrip("/")
        self._cloud: bool | None = None if settings.deployment is None else settings.deployment == "cloud"
        token = settings.token.get_secret_value()
        credentials: dict[str, Any] = {"username": settings.username, "password": token} if settings.username else {"token": token}
        # Paths are ours, so the client's own Cloud flag changes nothing we call.
        client = Jira(self._url, timeout=settings.timeout_s, retry_with_header=False, **credentials)
        self._http = AtlassianHttp(
            client, product="Jira", max_attempts=settings.max_attempts, sleep=sleep,
            refused="check WAYFINDER_JIRA__USERNAME and WAYFINDER_JIRA__TOKEN, and that the account may browse the project "
            "and administer its permission schemes",
        )
        self._zone: ZoneInfo | None = None
        self._group_names: dict[str, str] = {}  # subject -> the group's name at the site
        self._without_levels: set[str] = set()  # projects whose permissions showed no security levels

    @property
    def calls(self) -> int:
        """REST calls made, retries included."""
        return self._http.calls

    @property
    def cloud(self) -> bool:
        if self._cloud is None:
            raise AssertionError("the deployment is asked from the site on the first call")  # pragma: no cover
        return self._cloud

    async def _ready(self) -> None:
        """The setting, or else ``serverInfo``'s ``deploymentType`` ("Cloud", "Server", "DataCenter")."""
        if self._cloud is None:
            info = await asyncio.to_thread(self._http.json, "rest/api/2/serverInfo", {})
            if not isinstance(info, dict) or "deploymentType" not in info:
                raise SourceError("could not tell whether Jira is Cloud or Data Center from rest/api/2/serverInfo; set WAYFINDER_JIRA__DEPLOYMENT")
            self._cloud = info["deploymentType"] == "Cloud"
            log.info("Jira at %s is %s", self._url, "Cloud" if self._cloud else "Data Center")

    # -- what a sync asks ---------------------------------------------------------------------

    async def project(self, key: str) -> RemoteProject:
        body = await self._get(f"rest/api/2/project/{key}", {})
        if body is None:
            raise SourceError(f"Jira has no project {key!r}, or the sync account may not browse it")
        return RemoteProject(body["key"], body.get("name", key), f"{self._url}/browse/{body['key']}")

    async def list_issues(self, project_key: str) -> list[RemoteIssue]:
        """Every issue of the project, without text: what a reconcile compares against the store."""
        found: list[RemoteIssue] = []
        async for batch in self._search(f'project = "{project_key}" ORDER BY key ASC', LIST_FIELDS):
            found.extend(batch)
        return found

    async def changed_issues(self, project_key: str, since: datetime | None) -> AsyncIterator[list[RemoteIssue]]:
        """Issues of the project updated at or after ``since`` (all when None), oldest first, with
        their text, comments and links."""
        jql = f'project = "{project_key}"'
        if since is not None:
            jql += f' AND updated >= "{await self.jql_time(since)}"'
        async for batch in self._search(jql + " ORDER BY updated ASC, key ASC", TEXT_FIELDS):
            yield batch

    async def issues_by_key(self, keys: Sequence[str]) -> list[RemoteIssue]:
        """Issues by key, with their text: the changes a date query missed. Unknown keys are skipped."""
        found: list[RemoteIssue] = []
        for start in range(0, len(keys), self._settings.page_size):
            chunk = ", ".join(f'"{key}"' for key in keys[start : start + self._settings.page_size])
            async for batch in self._search(f"key in ({chunk}) ORDER BY key ASC", TEXT_FIELDS):
                found.extend(batch)
        return found

    async def permissions(self, project_key: str) -> JiraPermissions:
        """Browse holders, role members and security level members of one project, in OpenFGA
        spelling; the members of every group they name."""
        project = await self._get(f"rest/api/2/project/{project_key}", {})
        if project is None:
            raise SourceError(f"Jira has no project {project_key!r}, or the sync account may not browse it")
        roles = await self._get(f"rest/api/2/project/{project_key}/role", {}) or {}
        role_of: dict[str, str] = {}  # role id -> "<KEY>.<name>"
        role_members: dict[str, tuple[str, ...]] = {}
        for name, link in sorted(roles.items()):
            role = await self._get(link, {}, absolute=True)
            if role is None:
                continue
            role_id = f"{project_key}.{safe_name(name)}"  # any role name, spaces and accents included
            role_of[str(role["id"])] = role_id
            role_members[role_id] = tuple(sorted(self._actor(actor) for actor in role.get("actors", [])))
        scheme = await self._get(f"rest/api/2/project/{project_key}/permissionscheme", {"expand": "permissions"})
        if scheme is None or "permissions" not in scheme:
            raise SourceError(f"Jira did not list the permission scheme of project {project_key!r}: the sync account must be allowed to read it")
        browse = tuple(sorted({self._holder(p["holder"], role_of) for p in scheme["permissions"] if p.get("permission") == BROWSE}))
        levels: dict[str, list[str]] = {}
        security = await self._get(f"rest/api/2/project/{project_key}/issuesecuritylevelscheme", {})
        if security is None or not security.get("levels"):
            self._without_levels.add(project_key)
        else:
            self._without_levels.discard(project_key)
        if security is not None and security.get("levels"):
            for level in security["levels"]:
                levels[str(level["id"])] = []
            async for rows in self._values(f"rest/api/{3 if self.cloud else 2}/issuesecurityschemes/level/member", {"schemeId": security["id"]}):
                for row in rows:
                    member = self._holder(row["holder"], role_of)
                    if member and str(row["issueSecurityLevelId"]) in levels:
                        levels[str(row["issueSecurityLevelId"])].append(member)
        groups = {self._group_names[s] for s in [*browse, *(m for ms in role_members.values() for m in ms), *(m for ms in levels.values() for m in ms)] if s.startswith("group:")}
        group_members = {name: tuple(sorted(await self.group_members(name))) for name in sorted(groups)}
        return JiraPermissions(
            project_browsers={project_key: browse}, role_members=role_members,
            level_members={level: tuple(sorted(set(members))) for level, members in levels.items()},
            group_members={jira_group_name(name): tuple(f"user:{user_name(member)}" for member in members) for name, members in group_members.items()},
        )

    async def group_members(self, name: str) -> list[str]:
        """The raw names (:meth:`user_key`) of a group's members."""
        members: list[str] = []
        async for rows in self._values("rest/api/2/group/member", {"groupname": name}):
            members.extend(self.user_key(user) for user in rows)
        return members

    async def jql_time(self, when: datetime) -> str:
        """``when`` as a JQL date literal in the sync account's time zone, cut to the minute."""
        if self._zone is None:
            me = await self._get("rest/api/2/myself", {}) or {}
            try:
                self._zone = ZoneInfo(me.get("timeZone") or "UTC")
            except (ZoneInfoNotFoundError, ValueError):
                self._zone = ZoneInfo("UTC")
        return when.astimezone(self._zone).strftime("%Y-%m-%d %H:%M")

    async def user_by_email(self, email: str) -> str | None:
        """The raw name (:meth:`user_key`) of the one active user with this e-mail address, or None
        (no such user, several, or a site that hides e-mail addresses from the account asking).
        Its caller makes it a Wayfinder id with :func:`core.ids.user_name`, as every entry does."""
        await self._ready()
        path, parameter = ("rest/api/3/user/search", "query") if self.cloud else ("rest/api/2/user/search", "username")
        rows = await self._get(path, {parameter: email, "maxResults": 50}) or []
        wanted = email.strip().casefold()
        found = {
            self.user_key(user) for user in rows
            if str(user.get("emailAddress") or "").casefold() == wanted and user.get("active", True)
        }
        return found.pop() if len(found) == 1 else None

    def user_key(self, user: dict[str, Any]) -> str:
        """A Jira user's raw name: ``accountId`` on Cloud, the username on Data Center — the same
        as the Confluence source's. Not yet an id: :func:`core.ids.user_name` makes it one."""
        if self.cloud:
            return str(user["accountId"])
        return str(user.get("name") or user.get("key") or user["accountId"])

    def _user(self, user: dict[str, Any]) -> str:
        return user_name(self.user_key(user))

    # -- the wire -----------------------------------------------------------------------------

    async def _get(self, path: str, params: dict[str, Any], *, absolute: bool = False) -> Any:
        await self._ready()
        return await asyncio.to_thread(self._http.json, path, params, absolute=absolute)

    async def _search(self, jql: str, fields: str) -> AsyncIterator[list[RemoteIssue]]:
        await self._ready()
        size = self._settings.page_size
        if self.cloud:
            token: str | None = None
            while True:
                params = {"jql": jql, "fields": fields, "maxResults": size, **({"nextPageToken": token} if token else {})}
                body = await self._get("rest/api/3/search/jql", params)
                if body is None:
                    raise SourceError("Jira answered 404 for rest/api/3/search/jql")
                yield [self._issue(await self._every_comment(item)) for item in body.get("issues", [])]
                token = body.get("nextPageToken")
                if body.get("isLast", True) or not token:
                    return
        start = 0
        while True:
            body = await self._get("rest/api/2/search", {"jql": jql, "fields": fields, "startAt": start, "maxResults": size})
            if body is None:
                raise SourceError("Jira answered 404 for rest/api/2/search")
            issues = body.get("issues", [])
            yield [self._issue(item) for item in issues]
            start += len(issues)
            if not issues or start >= int(body.get("total", 0)):
                return

    async def _every_comment(self, item: dict[str, Any]) -> dict[str, Any]:
        """An issue from Cloud's search with all its comments: the search carries the first few
        (``total`` counts them all), the comment endpoint the rest, each with its visibility."""
        fields = item.get("fields") or {}
        carried = fields.get("comment")
        if not isinstance(carried, dict) or int(carried.get("total") or 0) <= len(carried.get("comments") or []):
            return item
        comments: list[dict[str, Any]] = []
        while True:
            page = await self._get(f"rest/api/3/issue/{item['key']}/comment", {"startAt": len(comments), "maxResults": 100, "orderBy": "created"})
            if page is None:  # gone since the search: the next listing sees that
                log.warning("issue %s vanished while its comments were read; keeping the %d its search carried", item["key"], len(carried.get("comments") or []))
                return item
            rows = page.get("comments") or []
            comments.extend(rows)
            if not rows or len(comments) >= int(page.get("total") or 0):
                break
        return {**item, "fields": {**fields, "comment": {**carried, "comments": comments, "total": len(comments), "startAt": 0, "maxResults": len(comments)}}}

    async def _values(self, path: str, params: dict[str, Any]) -> AsyncIterator[list[dict[str, Any]]]:
        """The ``values`` of a paged listing (``startAt``, ``isLast``)."""
        start = 0
        while True:
            body = await self._get(path, {**params, "startAt": start, "maxResults": self._settings.page_size})
            if body is None:
                return
            rows = body.get("values", [])
            yield rows
            start += len(rows)
            if body.get("isLast", True) or not rows:
                return

    def _issue(self, item: dict[str, Any]) -> RemoteIssue:
        fields = item.get("fields") or {}
        # An issue's place and level decide who may see it: an answer without them is refused (A10).
        # A site may leave out ``security`` where a project has no levels: only for a project whose
        # permissions (read first) showed none is that read as "no level".
        project_key = str(item.get("key", "")).rpartition("-")[0]
        if "security" not in fields and project_key in self._without_levels:
            fields = {**fields, "security": None}
        missing = [name for name in ("issuetype", "security", "updated") if name not in fields]
        if missing:
            raise SourceError(f"Jira sent issue {item.get('key', '?')} without {', '.join(missing)}: refusing to guess who may see it")
        try:
            kind = fields["issuetype"]
            level = int(kind.get("hierarchyLevel", -1 if kind.get("subtask") else 0))
            comments = (fields.get("comment") or {}).get("comments", [])
            return RemoteIssue(
                key=item["key"],
                project_key=item["key"].rpartition("-")[0],
                issue_type=kind["name"],
                hierarchy_level=level,
                summary=fields.get("summary") or "",
                parent_key=(fields.get("parent") or {}).get("key"),
                updated=_parse_time(fields["updated"]),
                url=f"{self._url}/browse/{item['key']}",
                security_level=str(fields["security"]["id"]) if fields.get("security") else None,
                status=(fields.get("status") or {}).get("name", ""),
                labels=tuple(fields.get("labels") or ()),
                reporter=self._user(fields["reporter"]) if fields.get("reporter") else None,
                assignee=self._user(fields["assignee"]) if fields.get("assignee") else None,
                description=fields.get("description"),
                comments=tuple(
                    RemoteComment(
                        self.user_key(c["author"]) if c.get("author") else None, _parse_time(c["created"]), c.get("body"), _visibility(c),
                        str(c["id"]) if c.get("id") is not None else None,
                    )
                    for c in comments
                ),
                links=tuple(
                    (link["type"]["name"], direction, link[f"{direction}Issue"]["key"])
                    for link in fields.get("issuelinks") or ()
                    for direction in ("outward", "inward")
                    if f"{direction}Issue" in link
                ),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SourceError(f"Jira sent an issue without {exc!s} (issue {item.get('key', '?')})") from exc

    def _actor(self, actor: dict[str, Any]) -> str:
        if actor.get("type") == "atlassian-group-role-actor":
            return self._group((actor.get("actorGroup") or {}).get("name") or actor["name"])
        user = actor.get("actorUser") or {}
        return f"user:{self._user({'accountId': user.get('accountId', actor.get('name')), 'name': actor.get('name')})}"

    def _holder(self, holder: dict[str, Any], role_of: dict[str, str]) -> str:
        """A permission or level holder in OpenFGA spelling, :data:`REPORTER` or :data:`ASSIGNEE`;
        ``holder:<type>`` for one Wayfinder has no relation for, which the tuple builders refuse
        and the sync reports (never silently dropped, never guessed)."""
        kind, parameter = holder.get("type"), str(holder.get("parameter") or holder.get("value") or "")
        if kind == "anyone":
            return "user:*"
        if kind == "group" and parameter:
            return self._group(parameter)
        if kind == "user" and parameter:
            return f"user:{self._user({'accountId': parameter, 'name': parameter})}"
        if kind == "projectRole" and parameter in role_of:
            return f"project_role:{role_of[parameter]}#member"
        if kind == "reporter":
            return REPORTER
        if kind == "assignee":
            return ASSIGNEE
        return f"holder:{kind or 'unknown'}"

    def _group(self, name: str) -> str:
        """A group as a subject, apart from Confluence's groups; its name kept to read its members."""
        subject = f"group:{jira_group_name(name)}#member"
        self._group_names[subject] = name
        return subject


def comment_audience(project_key: str, visibility: Sequence[str]) -> str | None:
    """Who reads a restricted comment besides seeing its issue, in OpenFGA spelling, as
    :meth:`JiraRestSource.permissions` spells roles and groups; None for a restriction of a
    kind Jira does not document (read by nobody)."""
    kind, name = visibility
    if kind == "role" and name:
        return f"project_role:{project_key}.{safe_name(name)}#member"
    if kind == "group" and name:
        return f"group:{jira_group_name(name)}#member"
    return None


def _visibility(comment: dict[str, Any]) -> tuple[str, str] | None:
    """A comment's restriction as (type, name): Data Center's ``{"type", "value"}`` and Cloud's
    (which adds ``identifier``); any other restriction than none is kept, never read as none."""
    shown = comment.get("visibility")
    if not shown:
        return None
    return str(shown.get("type") or "unknown"), str(shown.get("value") or shown.get("identifier") or "")


def _parse_time(text: str) -> datetime:
    """Jira's ``2024-01-02T03:04:05.000+0000`` (or ISO with a colon in the offset, or ``Z``)."""
    text = text.replace("Z", "+00:00")
    if len(text) > 5 and text[-5] in "+-" and text[-3] != ":":
        text = text[:-2] + ":" + text[-2:]
    when = datetime.fromisoformat(text)
    return when if when.tzinfo else when.replace(tzinfo=UTC)
