"""What a Confluence Cloud site answers that a Data Center one does not: the REST v2 API
(``/wiki/api/v2``: spaces by key and id, space permissions, pages with their storage body and
labels, folders, ancestors (folders among them), direct children, attachments; paged by opaque
cursors in ``_links.next``), the
Cloud-only v1 group reads by id (``group/by-id``, ``group/{groupId}/membersByGroupId``), and a 410
for each v1 read Atlassian has removed from Cloud (:func:`removed`).

Shapes follow Atlassian's published v2 specification (developer.atlassian.com/cloud/confluence/
rest/v2: "Get spaces", "Get space permissions assignments", "Get page by id", "Get all ancestors of
page", "Get direct children of a page", "Get attachments for page") and the v1 "Get group members
by groupId". Every read is what the caller may see, as on the v1 paths.
"""

from __future__ import annotations

import base64
import binascii
import re
import urllib.parse
from collections.abc import Awaitable, Callable, Sequence

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from devstack.atlassian import wire
from devstack.atlassian.datacenter import CLOUD_VERSION, manifest
from devstack.atlassian.site import Page, Site, Space, User

V2_DEFAULT_LIMIT = 25
V2_MAX_LIMIT = 250
ATTACHMENTS_DEFAULT_LIMIT = 50

# The v1 reads Atlassian has removed from Cloud (the v1 deprecation, CHANGE-864 / RFC-19), each
# with what replaces it. Through the OAuth gateway they answer 410 since August 2026
# (sooperset/mcp-atlassian#1598, markdown-confluence#796); a tenant host still answers them to
# basic-auth callers for now, which :attr:`Emulator.cloud_v1_answered` models for peers that rely
# on it. CQL search, restrictions, labels, the current user and user lookups stay.
_REMOVED = [
    (re.compile(r"^/rest/api/space/?$"), "GET /wiki/api/v2/spaces"),
    (re.compile(r"^/rest/api/space/[^/]+/?$"), "GET /wiki/api/v2/spaces?keys={key}"),
    (re.compile(r"^/rest/api/content/?$"), "GET /wiki/api/v2/pages"),
    (re.compile(r"^/rest/api/content/\d+/?$"), "GET /wiki/api/v2/pages/{id}"),
    (re.compile(r"^/rest/api/content/\d+/child/attachment/?$"), "GET /wiki/api/v2/pages/{id}/attachments"),
    (re.compile(r"^/rest/api/content/\d+/child/page/?$"), "GET /wiki/api/v2/pages/{id}/direct-children"),  # mcp-atlassian#1303
]
# Group reads by name answer 410 to every caller (atlassian-python-api#1594, #1599).
_REMOVED_FOR_ALL = [
    (re.compile(r"^/rest/api/group/member/?$"), "GET /wiki/rest/api/group/{groupId}/membersByGroupId"),
    (re.compile(r"^/rest/api/group/[^/]+/member/?$"), "GET /wiki/rest/api/group/{groupId}/membersByGroupId"),
]


def removed(path: str) -> tuple[str, bool] | None:
    """For a v1 read Cloud has removed (``path`` without ``/wiki``): what replaces it, and whether
    it is gone for basic-auth callers of the tenant host too; None for a read Cloud keeps."""
    for pattern, instead in _REMOVED_FOR_ALL:
        if pattern.match(path):
            return instead, True
    return next(((instead, False) for pattern, instead in _REMOVED if pattern.match(path)), None)


def gone() -> Response:
    """Cloud's answer to a removed endpoint, as Atlassian sends it (quoted in
    Spenhouet/confluence-markdown-exporter#207: ``successful`` is true there)."""
    body = {
        "statusCode": 410,
        "data": {"authorized": True, "valid": True, "errors": [], "successful": True},
        "message": "com.atlassian.confluence.api.service.exceptions.pagesmodes.GoneException: This deprecated endpoint has been removed.",
    }
    return JSONResponse(body, 410, media_type="application/json;charset=UTF-8")


Handler = Callable[[Request, User, "wire.Links"], Awaitable[Response]]


class _NotFound(Exception):
    pass


def confluence_v2_routes(site: Site) -> list[tuple[str, Handler]]:
    """(path, handler) pairs for the server to mount under ``/wiki`` only."""

    def endpoint(handler: Handler) -> Handler:
        async def run(request: Request, account: User, links: wire.Links) -> Response:
            try:
                return await handler(request, account, links)
            except _NotFound:
                return _v2_error(404, "NOT_FOUND", "Not Found")
            except _BadCursor:
                return _v2_error(400, "INVALID_REQUEST_PARAMETER", "The cursor or limit is not valid")

        return run

    def page_of(account: User, page_id: str, kind: str = "page") -> Page:
        page = site.pages.get(page_id)
        if page is None or page.kind != kind or not site.readable(account, page):
            raise _NotFound  # the pages routes know no folder, the folders route no page
        return page

    def space_by_id(account: User, space_id: str) -> Space:
        found = next((s for s in site.spaces.values() if str(s.id) == space_id), None)
        if found is None or not site.space_readable(account, found):
            raise _NotFound
        return found

    async def spaces(request: Request, account: User, links: wire.Links) -> Response:
        keys = _listed(request, "keys")
        ids = _listed(request, "ids")
        found = [
            s for s in sorted(site.spaces.values(), key=lambda s: s.id)
            if site.space_readable(account, s) and (not keys or s.key in keys) and (not ids or str(s.id) in ids)
        ]
        return _paged(request, links, [_space(site, s) for s in found])

    async def space(request: Request, account: User, links: wire.Links) -> Response:
        return JSONResponse(_space(site, space_by_id(account, request.path_params["id"])))

    async def space_pages(request: Request, account: User, links: wire.Links) -> Response:
        found = space_by_id(account, request.path_params["id"])
        if request.query_params.get("status", "current") != "current":
            return _paged(request, links, [])  # no page here is trashed, archived or a draft
        pages = [p for p in sorted(site.pages.values(), key=lambda p: p.id) if p.space_key == found.key and p.kind == "page" and site.readable(account, p)]
        return _paged(request, links, [_page(site, p, links) for p in pages])

    async def space_permissions(request: Request, account: User, links: wire.Links) -> Response:
        found = space_by_id(account, request.path_params["id"])
        rows = [("user", u) for u in sorted(found.readers_users)] + [("group", wire.group_id(g)) for g in sorted(found.readers_groups)]
        return _paged(
            request, links,
            [
                {"id": str(found.id * 1000 + n), "principal": {"type": kind, "id": principal}, "operation": {"key": "read", "targetType": "space"}}
                for n, (kind, principal) in enumerate(rows, start=1)
            ],
        )  # fmt: skip

    async def page(request: Request, account: User, links: wire.Links) -> Response:
        found = page_of(account, request.path_params["id"])
        body = _page(site, found, links)
        chosen = request.query_params.get("body-format")
        # Storage and view are emulated; ADF is not: a client asking for it gets no body, never a wrong one.
        representations = {"storage": found.body, "view": wire.view_html(found.body)}
        body["body"] = {chosen: {"representation": chosen, "value": representations[chosen]}} if chosen in representations else {}
        if request.query_params.get("include-labels") == "true":
            labels = [wire.label_json(name) for name in found.labels]
            body["labels"] = {"results": [{k: v for k, v in label.items() if k != "label"} for label in labels], "meta": {"hasMore": False, "cursor": ""}, "_links": {}}
        return JSONResponse(body)

    async def folder(request: Request, account: User, links: wire.Links) -> Response:
        found = page_of(account, request.path_params["id"], "folder")
        return JSONResponse({**_page(site, found, links), "type": "folder"})

    async def ancestors(request: Request, account: User, links: wire.Links) -> Response:
        found = page_of(account, request.path_params["id"])
        # Root first, as Atlassian documents it. A reader of a page reads its every ancestor: view
        # restrictions are inherited down the tree.
        # No cursor: the nearest ``limit`` ancestors; a client asks again from the first for more.
        try:
            limit = int(request.query_params.get("limit", V2_DEFAULT_LIMIT))
        except ValueError as exc:
            raise _BadCursor from exc
        if not 1 <= limit <= V2_MAX_LIMIT:
            raise _BadCursor
        chain = site.ancestors(found)[-limit:]
        return JSONResponse({"results": [{"id": a.id, "type": a.kind} for a in chain], "_links": {"base": links.base}})

    async def direct_children(request: Request, account: User, links: wire.Links) -> Response:
        parent = page_of(account, request.path_params["id"])
        kids = [kid for kid in site.children(parent.id) if site.readable(account, kid)]
        return _paged(
            request, links,
            [
                {"id": kid.id, "status": "current", "title": kid.title, "type": kid.kind, "spaceId": str(site.spaces[kid.space_key].id), "childPosition": kid.position}
                for kid in kids
            ],
        )  # fmt: skip

    async def attachments(request: Request, account: User, links: wire.Links) -> Response:
        found = page_of(account, request.path_params["id"])
        return _paged(request, links, [_attachment(site, a, links) for a in site.attachments_of(found.id)], default=ATTACHMENTS_DEFAULT_LIMIT)

    async def labels(request: Request, account: User, links: wire.Links) -> Response:
        found = page_of(account, request.path_params["id"])
        return _paged(request, links, [{k: v for k, v in wire.label_json(name).items() if k != "label"} for name in found.labels])

    async def group_by_id(request: Request, account: User, links: wire.Links) -> Response:
        name = _group_named(site, request.query_params.get("id", ""))
        if name is None:
            return JSONResponse(wire.error(404, "Group not found"), 404)
        return JSONResponse(wire.group_json(name))

    async def members_by_group_id(request: Request, account: User, links: wire.Links) -> Response:
        name = _group_named(site, request.path_params["id"])
        if name is None:
            return JSONResponse(wire.error(404, "Group not found"), 404)
        members = sorted(site.groups[name])
        start, limit = _v1_window(request)
        window = [wire.user(site, m) for m in members[start : start + limit]]
        path = f"/rest/api/group/{request.path_params['id']}/membersByGroupId"
        following = {"next": f"{path}?{urllib.parse.urlencode({'start': start + limit, 'limit': limit})}"} if start + limit < len(members) else {}
        return JSONResponse({**wire.paged(window, start, limit, None), "_links": links.block({"self": f"{links.base}{path}", **following})})

    async def system_info(request: Request, account: User, links: wire.Links) -> Response:
        # Cloud only: a Data Center site answers 404, which is how a client tells them apart.
        return JSONResponse({"cloudId": "00000000-0000-4000-8000-000000000001", "commitHash": "emulated", "baseUrl": links.base, "edition": "standard", "siteTitle": "Confluence", "defaultLocale": "en_GB", "defaultTimeZone": "UTC"})

    return [
        ("/rest/api/settings/systemInfo", system_info),
        ("/rest/applinks/1.0/manifest", manifest(CLOUD_VERSION)),
        ("/api/v2/spaces", endpoint(spaces)),
        ("/api/v2/spaces/{id}", endpoint(space)),
        ("/api/v2/spaces/{id}/permissions", endpoint(space_permissions)),
        ("/api/v2/spaces/{id}/pages", endpoint(space_pages)),
        ("/api/v2/pages/{id}", endpoint(page)),
        ("/api/v2/pages/{id}/ancestors", endpoint(ancestors)),
        ("/api/v2/folders/{id}", endpoint(folder)),
        ("/api/v2/pages/{id}/direct-children", endpoint(direct_children)),
        ("/api/v2/pages/{id}/children", endpoint(direct_children)),
        ("/api/v2/pages/{id}/attachments", endpoint(attachments)),
        ("/api/v2/pages/{id}/labels", endpoint(labels)),
        ("/rest/api/group/by-id", endpoint(group_by_id)),
        ("/rest/api/group/{id}/membersByGroupId", endpoint(members_by_group_id)),
    ]


class _BadCursor(ValueError):
    pass


def _group_named(site: Site, group_id: str) -> str | None:
    return next((name for name in site.groups if wire.group_id(name) == group_id), None)


def _listed(request: Request, name: str) -> set[str]:
    return {part.strip() for value in request.query_params.getlist(name) for part in value.split(",") if part.strip()}


def _space(site: Site, space: Space) -> dict[str, object]:
    home = next((p for p in sorted(site.pages.values(), key=lambda p: (p.position, p.id)) if p.space_key == space.key and p.parent_id is None), None)
    return {
        "id": str(space.id),
        "key": space.key,
        "name": space.name,
        "type": "global",
        "status": "current",
        "homepageId": home.id if home else None,
        "description": None,
        "_links": {"webui": f"/spaces/{space.key}"},
    }


def _page(site: Site, page: Page, links: wire.Links) -> dict[str, object]:
    parent = site.pages.get(page.parent_id or "")
    return {
        "id": page.id,
        "status": "current",
        "title": page.title,
        "spaceId": str(site.spaces[page.space_key].id),
        "parentId": parent.id if parent else None,
        "parentType": parent.kind if parent else None,
        "position": page.position,
        "authorId": page.created.by,
        "ownerId": page.created.by,
        "createdAt": wire.timestamp(page.created.when),
        "version": {"createdAt": wire.timestamp(page.version.when), "message": page.version.message, "number": page.version.number, "minorEdit": False, "authorId": page.version.by},
        "_links": {
            "webui": f"/spaces/{page.space_key}/pages/{page.id}/{urllib.parse.quote_plus(page.title)}",
            "editui": f"/pages/resumedraft.action?draftId={page.id}",
            "tinyui": f"/x/{page.id}",
            "base": links.base,
        },
    }


def _attachment(site: Site, attachment, links: wire.Links) -> dict[str, object]:
    v1 = wire.attachment_json(site, attachment, links)
    return {
        "id": attachment.id,
        "status": "current",
        "title": attachment.filename,
        "createdAt": wire.timestamp(attachment.created),
        "pageId": attachment.page_id,
        "mediaType": attachment.media_type,
        "mediaTypeDescription": "",
        "comment": attachment.comment,
        "fileId": attachment.id.removeprefix("att"),
        "fileSize": len(attachment.data),
        "webuiLink": v1["_links"]["webui"],  # type: ignore[index]
        "downloadLink": v1["_links"]["download"],  # type: ignore[index]
        "version": {"number": 1, "createdAt": wire.timestamp(attachment.created), "message": "", "minorEdit": False, "authorId": attachment.by},
        "_links": {"download": v1["_links"]["download"], "webui": v1["_links"]["webui"]},  # type: ignore[index]
    }


def _paged(request: Request, links: wire.Links, rows: Sequence[dict[str, object]], default: int = V2_DEFAULT_LIMIT) -> Response:
    """One page of ``rows`` with v2's cursor: ``_links.next`` is the same request with ``cursor``,
    relative to the site's root (``/wiki/api/v2/…``), and ``_links.base`` the site's URL."""
    try:
        start = _cursor_start(request.query_params.get("cursor"))
        limit = int(request.query_params.get("limit", default))
    except ValueError as exc:
        raise _BadCursor from exc
    if limit < 1 or limit > V2_MAX_LIMIT:
        raise _BadCursor
    window = list(rows[start : start + limit])
    block: dict[str, str] = {"base": links.base}
    if start + limit < len(rows):
        params = [(k, v) for k, v in request.query_params.multi_items() if k != "cursor"] + [("cursor", _cursor(start + limit))]
        block["next"] = f"{links.context}{request.url.path.removeprefix(links.context)}?{urllib.parse.urlencode(params)}"
    return JSONResponse({"results": window, "_links": block})


def _cursor(start: int) -> str:
    return base64.urlsafe_b64encode(f"v2:{start}".encode()).decode()


def _cursor_start(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        text = base64.urlsafe_b64decode(cursor.encode()).decode()
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise ValueError(cursor) from exc
    if not text.startswith("v2:"):
        raise ValueError(cursor)
    return int(text.removeprefix("v2:"))


def _v1_window(request: Request) -> tuple[int, int]:
    try:
        start, limit = int(request.query_params.get("start", 0)), int(request.query_params.get("limit", 200))
    except ValueError as exc:
        raise _BadCursor from exc
    return max(start, 0), min(max(limit, 1), 1000)


def _v2_error(status: int, code: str, title: str) -> Response:
    return JSONResponse({"errors": [{"status": status, "code": code, "title": title, "detail": None}]}, status)
