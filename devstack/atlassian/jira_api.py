"""The emulator's Jira REST API: v2 (Data Center; ``/rest/api/2/search`` paged with ``startAt``)
and v3 (Cloud; ``/rest/api/3/search/jql`` paged with ``nextPageToken``), issues by key with
``fields``/``expand``, projects, project roles and their actors, permission schemes, issue
security schemes, levels and level members, group members, fields, the current user and server
info.

Descriptions and comments are wiki markup in v2 and Atlassian Document Format in v3. Every read
is what the caller may see: an issue they may not browse answers 404 exactly like one that does
not exist; a project they may not browse is absent; a comment restricted to a role or group they
are not in is left out of every listing (and its count), and one they see carries its
``visibility`` (``{"type": "role", "value": "Developers"}``; v3 adds ``identifier``: the role's
name, or the group's id). Permission schemes and security level members
are shown to site administrators only, as Jira requires the "Administer Jira" permission.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from devstack.atlassian import jql, wire
from devstack.atlassian.jira import ISSUE_TYPES, LINK_TYPES, SUBTASK, Comment, Issue, Jira, Project
from devstack.atlassian.query import QueryError
from devstack.atlassian.site import User

DEFAULT_RESULTS = 50
MAX_RESULTS = 100
BROWSE = "BROWSE_PROJECTS"
NOT_FOUND = "Issue does not exist or you do not have permission to see it."
MAX_COMMENTS = 5000  # the comment endpoint's default and largest page on Data Center
CLOUD_COMMENTS = 100  # on Cloud (clamped there, as its v3 reference gives the default)
SEARCH_COMMENTS = 20  # comments Cloud's search/jql carries per issue
UNBOUNDED = "Unbounded JQL queries are not allowed here. Please add a search restriction to your query."
# The system fields an issue carries here, as /rest/api/2/field lists them.
FIELDS = [
    "summary", "description", "issuetype", "parent", "subtasks", "issuelinks", "labels", "status", "assignee", "reporter",
    "security", "created", "updated", "comment", "attachment", "project",
]

Handler = Callable[[Request, User, "wire.Links"], Awaitable[Response]]


def jira_routes(jira: Jira) -> list[tuple[str, Handler]]:
    """(path, handler) pairs, for the server to mount at each context path with its
    authentication, faults and request counting."""

    async def search_v2(request: Request, account: User, links: wire.Links) -> Response:
        params = await _params(request)
        try:
            issues = _search(jira, account, params.get("jql", ""))
            start, limit = int(params.get("startAt", 0)), min(int(params.get("maxResults", DEFAULT_RESULTS)), MAX_RESULTS)
        except QueryError as exc:
            return _error(400, str(exc))
        except ValueError:
            return _error(400, "startAt and maxResults must be integers")
        if start < 0 or limit < 0:
            return _error(400, "startAt and maxResults must not be negative")
        window = [_issue_json(jira, account, i, links, params, version=2) for i in issues[start : start + limit]]
        return JSONResponse({"expand": "schema,names", "startAt": start, "maxResults": limit, "total": len(issues), "issues": window})

    async def search_v3(request: Request, account: User, links: wire.Links) -> Response:
        params = await _params(request)
        try:
            issues = _search(jira, account, params.get("jql", ""), bounded=True)
            start = _token_start(params.get("nextPageToken"))
            limit = min(int(params.get("maxResults", DEFAULT_RESULTS)), MAX_RESULTS)
        except QueryError as exc:
            return _error(400, str(exc))
        except ValueError:
            return _error(400, "maxResults must be an integer and nextPageToken one this server gave")
        if limit < 1 or start < 0:
            return _error(400, "maxResults must be at least 1")  # a page of none would never end
        # Without ``fields`` Cloud sends ids alone; a ``comment`` field carries the first
        # SEARCH_COMMENTS comments (its ``total`` counts them all: the rest are the comment endpoint's).
        wanted = {**params, "fields": params.get("fields") or "id"}
        window = [_issue_json(jira, account, i, links, wanted, version=3, comments=SEARCH_COMMENTS) for i in issues[start : start + limit]]
        body: dict[str, Any] = {"issues": window, "isLast": start + limit >= len(issues)}
        if not body["isLast"]:
            body["nextPageToken"] = base64.urlsafe_b64encode(f"jql:{start + limit}".encode()).decode()
        return JSONResponse(body)

    def issue_by_key(version: int) -> Handler:
        async def handler(request: Request, account: User, links: wire.Links) -> Response:
            issue = _visible(jira, account, request.path_params["key"])
            if issue is None:
                return _error(404, NOT_FOUND)
            return JSONResponse(_issue_json(jira, account, issue, links, dict(request.query_params), version=version))

        return handler

    def comments(version: int) -> Handler:
        async def handler(request: Request, account: User, links: wire.Links) -> Response:
            issue = _visible(jira, account, request.path_params["key"])
            if issue is None:
                return _error(404, NOT_FOUND)
            cap = CLOUD_COMMENTS if _cloud(links) else MAX_COMMENTS
            try:
                start = int(request.query_params.get("startAt", 0))
                limit = min(int(request.query_params.get("maxResults", cap)), cap)
            except ValueError:
                return _error(400, "startAt and maxResults must be integers")
            if start < 0 or limit < 0:
                return _error(400, "startAt and maxResults must not be negative")
            return JSONResponse(_comments(jira, account, issue, version=version, start=start, limit=limit))

        return handler

    async def projects(request: Request, account: User, links: wire.Links) -> Response:
        return JSONResponse([_project_json(p, links) for p in jira.projects.values() if jira.can_browse(account, p)])

    async def project(request: Request, account: User, links: wire.Links) -> Response:
        found = _browsable(jira, account, request.path_params["key"])
        if found is None:
            return _error(404, f"No project could be found with key '{request.path_params['key']}'.")
        return JSONResponse(_project_json(found, links))

    async def roles(request: Request, account: User, links: wire.Links) -> Response:
        found = _browsable(jira, account, request.path_params["key"])
        if found is None:
            return _error(404, f"No project could be found with key '{request.path_params['key']}'.")
        return JSONResponse({r.name: f"{links.base}/rest/api/2/project/{found.id}/role/{r.id}" for r in found.roles.values()})

    async def role(request: Request, account: User, links: wire.Links) -> Response:
        found = _browsable(jira, account, request.path_params["key"])
        chosen = next((r for r in found.roles.values() if str(r.id) == request.path_params["id"]), None) if found else None
        if found is None or chosen is None:
            return _error(404, "The project role could not be found.")
        actors = [
            {"id": n, "displayName": wire.user(jira.site, u)["displayName"], "type": "atlassian-user-role-actor", "actorUser": {"accountId": u}}
            | ({} if _cloud(links) else {"name": _username(jira, u)})
            for n, u in enumerate(sorted(chosen.users), start=1)
        ] + [
            {"id": 1000 + n, "displayName": g, "type": "atlassian-group-role-actor", "name": g, "actorGroup": {"name": g, "displayName": g}}
            for n, g in enumerate(sorted(chosen.groups), start=1)
        ]
        return JSONResponse({"self": f"{links.base}/rest/api/2/project/{found.id}/role/{chosen.id}", "name": chosen.name, "id": chosen.id, "actors": actors})

    async def project_permission_scheme(request: Request, account: User, links: wire.Links) -> Response:
        found = _administered(jira, account, request.path_params["key"])
        if found is None:
            return _error(404, f"No project could be found with key '{request.path_params['key']}'.")
        return JSONResponse(_permission_scheme(jira, found, links, expand=set(_expand(request))))

    async def permission_scheme(request: Request, account: User, links: wire.Links) -> Response:
        found = next((p for p in jira.projects.values() if str(p.permission_scheme_id) == request.path_params["id"]), None)
        if found is None or not account.site_admin:
            return _error(404, "The permission scheme does not exist.")
        return JSONResponse(_permission_scheme(jira, found, links, expand=set(_expand(request))))

    async def project_security_scheme(request: Request, account: User, links: wire.Links) -> Response:
        found = _administered(jira, account, request.path_params["key"])
        if found is None:
            return _error(404, f"No project could be found with key '{request.path_params['key']}'.")
        return JSONResponse(_security_scheme(found, links))

    async def security_scheme(request: Request, account: User, links: wire.Links) -> Response:
        found = next((p for p in jira.projects.values() if str(p.security_scheme_id) == request.path_params["id"]), None)
        if found is None or not account.site_admin:
            return _error(404, "The issue security scheme does not exist.")
        return JSONResponse(_security_scheme(found, links))

    async def level_members(request: Request, account: User, links: wire.Links) -> Response:
        params = request.query_params
        schemes = set(params.getlist("schemeId"))
        wanted_levels = set(params.getlist("levelId"))
        if not account.site_admin:
            return _error(403, "You are not authorized to perform this action. Administrator privileges are required.")
        rows = []
        for found in jira.projects.values():
            if schemes and str(found.security_scheme_id) not in schemes:
                continue
            for level in found.levels.values():
                if wanted_levels and level.id not in wanted_levels:
                    continue
                holders = (
                    [{"type": "user", "parameter": _user_ref(jira, u, links), "value": _user_ref(jira, u, links)} for u in sorted(level.users)]
                    + [{"type": "group", "parameter": g, "value": g} for g in sorted(level.groups)]
                    + [{"type": "projectRole", "parameter": str(found.roles[r].id), "value": str(found.roles[r].id)} for r in sorted(level.roles)]
                    + ([{"type": "reporter"}] if level.reporter else [])
                    + ([{"type": "assignee"}] if level.assignee else [])
                )
                rows += [
                    {"id": f"{level.id}-{n}", "issueSecurityLevelId": level.id, "issueSecuritySchemeId": str(found.security_scheme_id), "holder": holder}
                    for n, holder in enumerate(holders)
                ]
        try:
            start, limit = int(params.get("startAt", 0)), min(int(params.get("maxResults", DEFAULT_RESULTS)), MAX_RESULTS)
        except ValueError:
            return _error(400, "startAt and maxResults must be integers")
        window = rows[start : start + limit]
        return JSONResponse({"self": "", "maxResults": limit, "startAt": start, "total": len(rows), "isLast": start + limit >= len(rows), "values": window})

    async def group_members(request: Request, account: User, links: wire.Links) -> Response:
        name = request.query_params.get("groupname", "")
        if name not in jira.site.groups:
            return _error(404, f"Group '{name}' does not exist.")
        members = sorted(jira.site.groups[name])
        try:
            start, limit = int(request.query_params.get("startAt", 0)), min(int(request.query_params.get("maxResults", DEFAULT_RESULTS)), MAX_RESULTS)
        except ValueError:
            return _error(400, "startAt and maxResults must be integers")
        window = [_person(jira, member, links) for member in members[start : start + limit]]
        return JSONResponse({"self": "", "maxResults": limit, "startAt": start, "total": len(members), "isLast": start + limit >= len(members), "values": window})

    def user_search(parameter: str) -> Handler:
        """Users whose username, e-mail address or display name starts with the query (Data Center
        takes it as ``username``, Cloud as ``query``), as Jira's user picker finds them."""

        async def handler(request: Request, account: User, links: wire.Links) -> Response:
            wanted = request.query_params.get(parameter, "").strip().casefold()
            if not wanted:
                return _error(400, f"The '{parameter}' query parameter is required.")
            try:
                limit = min(int(request.query_params.get("maxResults", DEFAULT_RESULTS)), MAX_RESULTS)
            except ValueError:
                return _error(400, "maxResults must be an integer")
            found = [
                u for u in sorted(jira.site.users.values(), key=lambda u: u.username)
                if any(field.casefold().startswith(wanted) for field in (u.username, u.email, u.display_name))
            ]
            return JSONResponse([_user_json(u, links) for u in found[:limit]])

        return handler

    async def fields(request: Request, account: User, links: wire.Links) -> Response:
        return JSONResponse([{"id": f, "key": f, "name": f.capitalize(), "custom": False, "navigable": True, "searchable": True} for f in FIELDS])

    async def myself(request: Request, account: User, links: wire.Links) -> Response:
        return JSONResponse(_user_json(account, links))

    async def server_info(request: Request, account: User, links: wire.Links) -> Response:
        cloud = links.context == ""
        return JSONResponse({"baseUrl": links.base, "version": "1001.0.0" if cloud else "9.12.0", "deploymentType": "Cloud" if cloud else "Server"})

    routes: list[tuple[str, Handler]] = [
        ("/rest/api/2/search", search_v2),
        ("/rest/api/3/search/jql", search_v3),
        ("/rest/api/2/issue/{key}", issue_by_key(2)),
        ("/rest/api/3/issue/{key}", issue_by_key(3)),
        ("/rest/api/2/issue/{key}/comment", comments(2)),
        ("/rest/api/3/issue/{key}/comment", comments(3)),
        ("/rest/api/2/field", fields),
        ("/rest/api/2/group/member", group_members),
        ("/rest/api/2/myself", myself),
        ("/rest/api/2/user/search", user_search("username")),
        ("/rest/api/3/user/search", user_search("query")),
        ("/rest/api/2/serverInfo", server_info),
        ("/rest/api/2/project", projects),
        ("/rest/api/2/project/{key}", project),
        ("/rest/api/2/project/{key}/role", roles),
        ("/rest/api/2/project/{key}/role/{id}", role),
        ("/rest/api/2/project/{key}/permissionscheme", project_permission_scheme),
        ("/rest/api/2/permissionscheme/{id}", permission_scheme),
        ("/rest/api/2/project/{key}/issuesecuritylevelscheme", project_security_scheme),
        ("/rest/api/2/issuesecurityschemes/{id}", security_scheme),
    ]
    for version in (2, 3):  # the level members listing is Cloud's; served under both versions
        routes.append((f"/rest/api/{version}/issuesecurityschemes/level/member", level_members))
    return routes


# -- reading -------------------------------------------------------------------------------------


async def _params(request: Request) -> dict[str, Any]:
    """Query parameters, or the JSON body of a POST search (lists joined as Jira's GET takes them)."""
    if request.method == "POST":
        try:
            body = await request.json()
        except ValueError:
            body = {}
        return {k: ",".join(v) if isinstance(v, list) else v for k, v in (body or {}).items()}
    return dict(request.query_params)


def _search(jira: Jira, account: User, text: str, *, bounded: bool = False) -> list[Issue]:
    """The issues ``text`` finds for ``account``; ``bounded``: refuse a query without a clause,
    as Cloud's ``search/jql`` does."""
    query = jql.parse(text, jira, account.time_zone)
    if bounded and not query.restricted:
        raise QueryError(UNBOUNDED)
    found = [issue for issue in jira.visible_issues(account) if query.matches(issue)]
    found.sort(key=jql.order_key("key"))
    for name, descending in reversed(query.order or [("key", True)]):  # Jira's default: newest key first
        found.sort(key=jql.order_key(name), reverse=descending)
    return found


def _token_start(token: str | None) -> int:
    if not token:
        return 0
    try:
        return int(base64.urlsafe_b64decode(token.encode()).decode().removeprefix("jql:"))
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise ValueError("bad token") from exc


def _visible(jira: Jira, account: User, key: str) -> Issue | None:
    issue = jira.issues.get(key.upper()) or next((i for i in jira.issues.values() if i.id == key), None)
    return issue if issue is not None and jira.readable(account, issue) else None


def _browsable(jira: Jira, account: User, key: str) -> Project | None:
    found = jira.projects.get(key.upper()) or next((p for p in jira.projects.values() if p.id == key), None)
    return found if found is not None and jira.can_browse(account, found) else None


def _administered(jira: Jira, account: User, key: str) -> Project | None:
    found = _browsable(jira, account, key)
    return found if found is not None and account.site_admin else None


def _cloud(links: wire.Links) -> bool:
    """Jira Cloud sits at the site's root; a Data Center site here under ``/jira``."""
    return links.context == ""


def _username(jira: Jira, account_id: str) -> str:
    found = jira.site.users.get(account_id)
    return found.username if found else account_id


def _user_ref(jira: Jira, account_id: str, links: wire.Links) -> str:
    """How a permission holder names a user: by account id on Cloud, by username on Data Center."""
    return account_id if _cloud(links) else _username(jira, account_id)


def _expand(request: Request) -> list[str]:
    return [part.strip() for part in ",".join(request.query_params.getlist("expand")).split(",") if part.strip()]


# -- JSON shapes ---------------------------------------------------------------------------------


def _error(status: int, message: str) -> Response:
    return JSONResponse({"errorMessages": [message], "errors": {}}, status)


def _user_json(user: User, links: wire.Links) -> dict[str, Any]:
    """Both spellings: Cloud's ``accountId`` and Data Center's ``name``/``key``."""
    return {
        "self": f"{links.base}/rest/api/2/user?accountId={user.account_id}", "accountId": user.account_id, "name": user.username,
        "key": user.account_id, "emailAddress": user.email, "displayName": user.display_name, "active": True,
        "timeZone": user.time_zone, "accountType": "atlassian",
    }


def _person(jira: Jira, account_id: str | None, links: wire.Links) -> dict[str, Any] | None:
    if account_id is None:
        return None
    found = jira.site.users.get(account_id)
    return _user_json(found, links) if found else {"accountId": account_id, "displayName": "Unknown user", "active": False}


def _project_json(project: Project, links: wire.Links) -> dict[str, Any]:
    return {"self": f"{links.base}/rest/api/2/project/{project.id}", "id": project.id, "key": project.key, "name": project.name, "projectTypeKey": "software"}


def _issuetype(name: str) -> dict[str, Any]:
    return {"id": str(10_000 + sorted(ISSUE_TYPES).index(name)), "name": name, "subtask": ISSUE_TYPES[name] == SUBTASK, "hierarchyLevel": ISSUE_TYPES[name]}


def _status(name: str) -> dict[str, Any]:
    category = {"Open": "new", "In Progress": "indeterminate", "Resolved": "done", "Closed": "done"}.get(name, "new")
    return {"name": name, "statusCategory": {"key": category, "name": category.capitalize()}}


def _brief(jira: Jira, issue: Issue, links: wire.Links) -> dict[str, Any]:
    return {
        "id": issue.id, "key": issue.key, "self": f"{links.base}/rest/api/2/issue/{issue.id}",
        "fields": {"summary": issue.summary, "issuetype": _issuetype(issue.issue_type), "status": _status(issue.status)},
    }


def _text(markup: str, version: int) -> Any:
    return markup if version == 2 else adf(markup)


def _comments(jira: Jira, account: User, issue: Issue, version: int, start: int = 0, limit: int = MAX_COMMENTS) -> dict[str, Any]:
    """The comments ``account`` may read, from ``start``, at most ``limit``; ``total`` counts them all."""
    rows = [
        {"id": c.id, "author": _person(jira, c.author, wire.Links("", "")), "body": _text(c.body, version),
         "created": _jira_time(c.created), "updated": _jira_time(c.created)}
        | ({"visibility": _visibility(c, version)} if c.visibility else {})
        for c in issue.comments
        if jira.comment_readable(account, issue, c)
    ]
    return {"comments": rows[start : start + limit], "maxResults": limit, "total": len(rows), "startAt": start}


def _visibility(comment: Comment, version: int) -> dict[str, str]:
    """Jira's ``visibility`` object; Cloud (v3) adds an ``identifier``: a role's name, a group's id."""
    kind, name = comment.visibility or ("", "")
    shown = {"type": kind, "value": name}
    if version == 3:
        shown["identifier"] = name if kind == "role" else wire.group_id(name)
    return shown


def _issue_json(
    jira: Jira, account: User, issue: Issue, links: wire.Links, params: dict[str, Any], *, version: int, comments: int = MAX_COMMENTS
) -> dict[str, Any]:
    """An issue with the ``fields`` asked for (``*all``, ``*navigable`` or a list; all by default)."""
    level = jira.level_of(issue)
    parent = jira.issues.get(issue.parent_key or "")
    every: dict[str, Any] = {
        "summary": issue.summary,
        "description": _text(issue.description, version) if issue.description else None,
        "issuetype": _issuetype(issue.issue_type),
        "parent": _brief(jira, parent, links) if parent and jira.readable(account, parent) else None,
        "subtasks": [_brief(jira, s, links) for s in jira.subtasks(issue.key)],
        "issuelinks": [
            {"id": f"{issue.id}-{n}", "type": {"name": kind, "inward": LINK_TYPES[kind][0], "outward": LINK_TYPES[kind][1]},
             f"{direction}Issue": _brief(jira, jira.issues[other], links)}
            for n, (kind, direction, other) in enumerate(jira.links_of(issue.key))
            if jira.readable(account, jira.issues[other])  # Jira hides links to issues the caller cannot see
        ],
        "labels": list(issue.labels),
        "status": _status(issue.status),
        "assignee": _person(jira, issue.assignee, links),
        "reporter": _person(jira, issue.reporter, links),
        "security": {"id": level.id, "name": level.name} if level else None,
        "created": _jira_time(issue.created),
        "updated": _jira_time(issue.updated),
        "comment": _comments(jira, account, issue, version, limit=comments),
        "attachment": [],
        "project": _project_json(jira.projects[issue.project_key], links),
    }
    wanted = str(params.get("fields", "*all") or "*all").split(",")
    names = set(every) if any(w.strip() in ("*all", "*navigable") for w in wanted) else {w.strip() for w in wanted}
    if names <= {"id"}:
        return {"id": issue.id}
    return {"id": issue.id, "key": issue.key, "self": f"{links.base}/rest/api/{version}/issue/{issue.id}", "fields": {k: v for k, v in every.items() if k in names}}


def _permission_scheme(jira: Jira, project: Project, links: wire.Links, *, expand: set[str]) -> dict[str, Any]:
    scheme: dict[str, Any] = {"id": project.permission_scheme_id, "name": f"{project.key} permission scheme", "self": f"{links.base}/rest/api/2/permissionscheme/{project.permission_scheme_id}"}
    if "permissions" in expand or "all" in expand:
        holders = (
            [{"type": "user", "parameter": _user_ref(jira, u, links)} for u in sorted(project.browse_users)]
            + [{"type": "group", "parameter": g} for g in sorted(project.browse_groups)]
            + [{"type": "projectRole", "parameter": str(project.roles[r].id)} for r in sorted(project.browse_roles)]
            + ([{"type": "anyone"}] if project.browse_anyone else [])
            + ([{"type": "reporter"}] if project.browse_reporter else [])
            + ([{"type": "assignee"}] if project.browse_assignee else [])
        )
        scheme["permissions"] = [{"id": n, "holder": holder, "permission": BROWSE} for n, holder in enumerate(holders, start=1)]
    return scheme


def _security_scheme(project: Project, links: wire.Links) -> dict[str, Any]:
    return {
        "self": f"{links.base}/rest/api/2/issuesecurityschemes/{project.security_scheme_id}", "id": project.security_scheme_id,
        "name": f"{project.key} security", "levels": [{"id": level.id, "name": level.name, "description": ""} for level in project.levels.values()],
    }


def _jira_time(when: Any) -> str:
    """Jira's form: ``2024-01-02T03:04:05.000+0000``."""
    return wire.timestamp(when).removesuffix("Z") + "+0000"


_HEADING = re.compile(r"^h([1-6])\.\s+(.*)$")
_WIKI_LINK = re.compile(r"\[([^|\]]+)\|([^\]]+)\]")


def adf(markup: str) -> dict[str, Any]:
    """Wiki markup as Atlassian Document Format, as Cloud would store the same text: headings
    (``h2. ``), code blocks (``{code}``), quotes (``{quote}``), bullet lists (``* ``), paragraphs,
    and links (``[text|url]``) as text with a link mark."""
    lines = re.sub(r"\{quote\}", "\n{quote}\n", markup).splitlines()
    return {"type": "doc", "version": 1, "content": _adf_blocks(lines)}


def _adf_blocks(lines: list[str]) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    at = 0
    while at < len(lines):
        line = lines[at].strip()
        if line.startswith("{code"):
            end = next((n for n in range(at + 1, len(lines)) if lines[n].strip().startswith("{code")), len(lines))
            content.append({"type": "codeBlock", "content": [{"type": "text", "text": "\n".join(lines[at + 1 : end])}]})
            at = end + 1
        elif line == "{quote}":
            end = next((n for n in range(at + 1, len(lines)) if lines[n].strip() == "{quote}"), len(lines))
            content.append({"type": "blockquote", "content": _adf_blocks(lines[at + 1 : end])})
            at = end + 1
        elif heading := _HEADING.match(line):
            content.append({"type": "heading", "attrs": {"level": int(heading[1])}, "content": _adf_inline(heading[2])})
            at += 1
        elif line.startswith("* "):
            items = []
            while at < len(lines) and lines[at].strip().startswith("* "):
                items.append({"type": "listItem", "content": [{"type": "paragraph", "content": _adf_inline(lines[at].strip()[2:])}]})
                at += 1
            content.append({"type": "bulletList", "content": items})
        elif line:
            block = []
            while at < len(lines) and lines[at].strip() and not lines[at].strip().startswith(("{code", "{quote}", "* ")) and not _HEADING.match(lines[at].strip()):
                block.append(lines[at].strip())
                at += 1
            content.append({"type": "paragraph", "content": _adf_inline(" ".join(block))})
        else:
            at += 1
    return content


def _adf_inline(text: str) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = []
    at = 0
    for link in _WIKI_LINK.finditer(text):
        if link.start() > at:
            nodes.append({"type": "text", "text": text[at : link.start()]})
        nodes.append({"type": "text", "text": link[1], "marks": [{"type": "link", "attrs": {"href": link[2]}}]})
        at = link.end()
    if at < len(text):
        nodes.append({"type": "text", "text": text[at:]})
    return nodes
