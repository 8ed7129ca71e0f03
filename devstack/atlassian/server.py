"""The emulator's HTTP face: Confluence REST v1 at Cloud (``/wiki/rest/api``) and Data Center
(``/rest/api``) paths, attachment downloads, Jira REST v2 and v3 (:mod:`devstack.atlassian.jira_api`,
at the root and under ``/jira``), and an admin API under ``/_emulator`` for tests and benchmarks
(changes to the site, injected faults, a count of the requests served).

Requests are authenticated as Confluence does: basic (username, email or account id with the
user's API token) or a bearer personal access token. Every read is what that user may see: a page
they may not view answers 404 exactly like a page that does not exist.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from devstack.atlassian import cloud, cql, datacenter, wire
from devstack.atlassian.admin import Emulator, admin_routes
from devstack.atlassian.jira_api import jira_routes
from devstack.atlassian.site import Page, Site, User

MAX_LIMIT = 100  # Confluence caps ``limit`` on content and search listings
DEFAULT_LIMIT = 25
# Cloud's context path, a Data Center site's (cwiki.apache.org serves Confluence at /confluence),
# and the root: clients that drop the context path when they follow ``_links.next`` land there.
CLOUD = "/wiki"
_CONTEXTS = (CLOUD, "/confluence", "")
# Jira: at the root (Cloud, and Data Center sites of their own) or under /jira.
_JIRA_CONTEXTS = ("/jira", "")


Handler = Callable[[Request, User, "wire.Links"], Awaitable[Response]]


def create_app(emulator: Emulator) -> Starlette:
    site = emulator.site

    def api(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            context = next((c for c in (*_CONTEXTS, *_JIRA_CONTEXTS) if c and request.url.path.startswith(c + "/")), "")
            path = request.url.path.removeprefix(context)
            emulator.requests[_route_name(path)] += 1
            fault = emulator.take_fault(request.url.path)
            if fault is not None and fault.kind != "drop":
                if fault.kind == "slow":
                    await asyncio.sleep(fault.delay_s)
                else:
                    headers = {"Retry-After": str(fault.retry_after_s)} if fault.kind == "429" else {}
                    status = int(fault.kind)
                    return _error(status, "Injected fault", headers=headers)
            account = _authenticate(site, request)
            if account is None:
                return _error(401, "This request requires authentication", headers={"WWW-Authenticate": 'Basic realm="Protected"'})
            removal = _removed_from_cloud(context, path)
            if removal is not None:
                emulator.removed[_route_name(path)] += 1
                instead, for_all = removal
                basic = request.headers.get("authorization", "").lower().startswith("basic ")
                if for_all or not (basic and emulator.cloud_v1_answered):
                    return cloud.gone() if context == CLOUD else _jira_gone(instead)
            links = wire.Links(f"{request.url.scheme}://{request.url.netloc}{context}", context)
            try:
                response = await handler(request, account, links)
            except cql.CqlError as exc:
                response = _error(400, str(exc))
            except _BadRequest as exc:
                response = _error(400, str(exc))
            if fault is not None and fault.kind == "drop":
                return _dropped(response)
            return response

        return endpoint

    async def content_by_id(request: Request, account: User, links: wire.Links) -> Response:
        page = _visible_page(site, account, request.path_params["id"])
        if page is None:
            return _no_content(request.path_params["id"])
        return JSONResponse(wire.page_json(site, page, links, _expand(request)))

    async def content_list(request: Request, account: User, links: wire.Links) -> Response:
        params = request.query_params
        if params.get("type", "page") != "page":
            pages: list[Page] = []
        else:
            pages = [
                page
                for page in sorted(site.visible_pages(account), key=_id_order)
                if page.kind == "page" and params.get("spaceKey") in (None, page.space_key) and params.get("title") in (None, page.title)
            ]
        return _paged_pages(site, request, links, pages, "/rest/api/content")

    async def content_search(request: Request, account: User, links: wire.Links) -> Response:
        pages, _, _ = _search(site, account, request)
        return _paged_pages(site, request, links, pages, "/rest/api/content/search", cqlQuery=request.query_params.get("cql", ""))

    async def site_search(request: Request, account: User, links: wire.Links) -> Response:
        pages, query, scores = _search(site, account, request)
        start, limit = _window(request)
        window = pages[start : start + limit]
        expand = _expand(request, prefix="content.")
        results = [
            {
                "content": wire.page_json(site, page, links, expand),
                "title": page.title,
                "excerpt": _excerpt(page, query.text_terms),
                "url": f"/spaces/{page.space_key}/pages/{page.id}/{urllib.parse.quote_plus(page.title)}",
                "resultGlobalContainer": {"title": site.spaces[page.space_key].name, "displayUrl": f"/spaces/{page.space_key}"},
                "breadcrumbs": [],
                "entityType": "content",
                "iconCssClass": "aui-icon content-type-page",
                "lastModified": wire.timestamp(page.version.when),
                "friendlyLastModified": page.version.when.strftime("%b %d, %Y"),
                "score": round(scores.get(page.id, 0.0), 4),
            }
            for page in window
        ]
        return JSONResponse(
            {
                **wire.paged(results, start, limit, None),
                "totalSize": len(pages),
                "cqlQuery": request.query_params.get("cql", ""),
                "searchDuration": 1,
                "_links": _links(links, request, "/rest/api/search", start, limit, len(pages)),
            }
        )

    async def child_pages(request: Request, account: User, links: wire.Links) -> Response:
        parent = _visible_page(site, account, request.path_params["id"])
        if parent is None:
            return _no_content(request.path_params["id"])
        kids = [kid for kid in site.children(parent.id) if site.readable(account, kid)]
        return _paged_pages(site, request, links, kids, f"/rest/api/content/{parent.id}/child/page")

    async def child_attachments(request: Request, account: User, links: wire.Links) -> Response:
        page = _visible_page(site, account, request.path_params["id"])
        if page is None:
            return _no_content(request.path_params["id"])
        attached = [a for a in site.attachments_of(page.id) if request.query_params.get("filename") in (None, a.filename)]
        start, limit = _window(request)
        window = [wire.attachment_json(site, a, links) for a in attached[start : start + limit]]
        path = f"/rest/api/content/{page.id}/child/attachment"
        return JSONResponse({**wire.paged(window, start, limit, None), "_links": _links(links, request, path, start, limit, len(attached))})

    async def labels(request: Request, account: User, links: wire.Links) -> Response:
        page = _visible_page(site, account, request.path_params["id"])
        if page is None:
            return _no_content(request.path_params["id"])
        start, limit = _window(request, default=200, cap=1000)
        found = [wire.label_json(name) for name in page.labels]
        path = f"/rest/api/content/{page.id}/label"
        return JSONResponse({**wire.paged(found[start : start + limit], start, limit, None), "_links": _links(links, request, path, start, limit, len(found))})

    async def restrictions(request: Request, account: User, links: wire.Links) -> Response:
        page = _visible_page(site, account, request.path_params["id"])
        if page is None:
            return _no_content(request.path_params["id"])
        operation = request.path_params.get("operation")
        if operation is not None:
            if operation not in ("read", "update"):
                raise _BadRequest(f"Unknown operation: {operation}")
            return JSONResponse(wire.restriction_json(site, page, operation, links))
        return JSONResponse(
            {
                "read": wire.restriction_json(site, page, "read", links),
                "update": wire.restriction_json(site, page, "update", links),
                "_links": links.block({"self": f"{links.base}/rest/api/content/{page.id}/restriction/byOperation"}),
            }
        )

    async def properties(request: Request, account: User, links: wire.Links) -> Response:
        # Content properties (emoji titles, page width) are not emulated: every page has none.
        if _visible_page(site, account, request.path_params["id"]) is None:
            return _no_content(request.path_params["id"])
        start, limit = _window(request)
        return JSONResponse({**wire.paged([], start, limit, None), "_links": _links(links, request, request.url.path, start, limit, 0)})

    async def spaces(request: Request, account: User, links: wire.Links) -> Response:
        keys = request.query_params.getlist("spaceKey")
        found = [s for s in site.spaces.values() if site.space_readable(account, s) and (not keys or s.key in keys)]
        start, limit = _window(request)
        window = [wire.space_json(s, links) for s in found[start : start + limit]]
        return JSONResponse({**wire.paged(window, start, limit, None), "_links": _links(links, request, "/rest/api/space", start, limit, len(found))})

    async def space(request: Request, account: User, links: wire.Links) -> Response:
        found = site.spaces.get(request.path_params["key"])
        if found is None or not site.space_readable(account, found):
            return _error(404, f"No space with key : {request.path_params['key']}")
        return JSONResponse(wire.space_json(found, links))

    async def groups(request: Request, account: User, links: wire.Links) -> Response:
        names = sorted(site.groups)
        start, limit = _window(request, default=200, cap=1000)
        window = [wire.group_json(name) for name in names[start : start + limit]]
        return JSONResponse({**wire.paged(window, start, limit, None), "_links": _links(links, request, "/rest/api/group", start, limit, len(names))})

    async def group_members(request: Request, account: User, links: wire.Links) -> Response:
        name = request.path_params.get("name") or request.query_params.get("name")
        if name is None and "groupId" in request.query_params:
            name = next((g for g in site.groups if wire.group_json(g)["id"] == request.query_params["groupId"]), None)
        if name not in site.groups:
            return _error(404, f"Group not found: {name}")
        members = sorted(site.groups[name])
        start, limit = _window(request, default=200, cap=1000)
        window = [wire.user(site, m) for m in members[start : start + limit]]
        path = request.url.path.removeprefix(links.context)
        return JSONResponse({**wire.paged(window, start, limit, None), "_links": _links(links, request, path, start, limit, len(members))})

    async def user_lookup(request: Request, account: User, links: wire.Links) -> Response:
        params = request.query_params
        wanted = params.get("accountId") or params.get("key") or params.get("username")
        found = site.users.get(wanted or "") or (site.user_by_login(wanted) if wanted else None)
        if found is None:
            return _error(404, f"No user found with {wanted}")
        return JSONResponse(wire.user_json(found))

    async def current_user(request: Request, account: User, links: wire.Links) -> Response:
        return JSONResponse(wire.user_json(account))

    async def download(request: Request, account: User, links: wire.Links) -> Response:
        page = _visible_page(site, account, request.path_params["page"])
        filename = urllib.parse.unquote(request.path_params["filename"])
        attachment = next((a for a in site.attachments_of(page.id) if a.filename == filename), None) if page else None
        if attachment is None:
            return _error(404, "Attachment not found")
        return Response(attachment.data, media_type=attachment.media_type)

    routes = [
        ("/rest/api/content", content_list),
        ("/rest/api/content/search", content_search),
        ("/rest/api/search", site_search),
        ("/rest/api/content/{id}", content_by_id),
        ("/rest/api/content/{id}/child/page", child_pages),
        ("/rest/api/content/{id}/child/attachment", child_attachments),
        ("/rest/api/content/{id}/label", labels),
        ("/rest/api/content/{id}/property", properties),
        ("/rest/api/content/{id}/restriction/byOperation", restrictions),
        ("/rest/api/content/{id}/restriction/byOperation/{operation}", restrictions),
        ("/rest/api/space", spaces),
        ("/rest/api/space/{key}", space),
        ("/rest/api/group", groups),
        ("/rest/api/group/member", group_members),
        ("/rest/api/group/{name}/member", group_members),
        ("/rest/api/user", user_lookup),
        ("/rest/api/user/current", current_user),
        ("/download/attachments/{page}/{filename}", download),
    ]
    jira = [Route(context + path, api(handler), methods=["GET", "POST"]) for context in _JIRA_CONTEXTS for path, handler in jira_routes(site.jira)]
    only_cloud = [Route(CLOUD + path, api(handler)) for path, handler in cloud.confluence_v2_routes(site)]
    only_cloud.append(Route("/rest/api/3/search", api(_removed_here), methods=["GET", "POST"]))  # Jira Cloud's old v3 search
    only_dc = [
        Route(context + path, api(handler), methods=methods)
        for context in _CONTEXTS if context != CLOUD
        for path, handler, methods in datacenter.space_permission_routes(site, emulator.data_center)
    ]  # fmt: skip
    return Starlette(
        routes=only_cloud + only_dc + [Route(context + path, api(handler)) for context in _CONTEXTS for path, handler in routes] + jira + admin_routes(emulator)
    )


class _BadRequest(ValueError):
    pass


def _authenticate(site: Site, request: Request) -> User | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer":
        return site.user_by_token(value.strip())
    if scheme.lower() == "basic":
        try:
            login, _, secret = base64.b64decode(value.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        found = site.user_by_login(login)
        return found if found is not None and found.token == secret else None
    return None


def _removed_from_cloud(context: str, path: str) -> tuple[str, bool] | None:
    """What replaces a read Atlassian removed from Cloud, and whether it is gone for every caller:
    Confluence's v1 reads under ``/wiki``, and Jira's old search at the Cloud Jira's root (gone
    for all since CHANGE-2046)."""
    if context == CLOUD:
        return cloud.removed(path)
    if context == "" and re.match(r"^/rest/api/[23]/search/?$", path):
        return "/rest/api/3/search/jql", True
    return None


async def _removed_here(request: Request, account: User, links: wire.Links) -> Response:
    raise AssertionError("answered 410 before it is reached")  # pragma: no cover


def _jira_gone(instead: str) -> Response:
    message = f"The requested API has been removed. Please migrate to the {instead} API. A full migration guideline is available at https://developer.atlassian.com/changelog/#CHANGE-2046"
    return JSONResponse({"errorMessages": [message], "errors": {}}, 410)


def _visible_page(site: Site, account: User, page_id: str) -> Page | None:
    page = site.pages.get(page_id)
    return page if page is not None and site.readable(account, page) else None


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    # Clients key on this exact content type to read ``message`` (one treats any other 401 as bare).
    return JSONResponse(wire.error(status, message), status, headers=headers, media_type="application/json;charset=UTF-8")


def _no_content(page_id: str) -> Response:
    return _error(404, f"No content found with id: ContentId{{id={page_id}}}")


def _search(site: Site, account: User, request: Request) -> tuple[list[Page], cql.Query, dict[str, float]]:
    """The pages a CQL query finds for ``account``, in its ``ORDER BY`` or else by relevance to
    its words (then by id), with their relevance."""
    text = request.query_params.get("cql")
    if not text:
        raise _BadRequest("cql is a required parameter")
    query = cql.parse(text, site, account.time_zone)
    pages = [page for page in site.visible_pages(account) if query.matches(page)]
    pages.sort(key=_id_order)
    scores = cql.relevance(site, pages, query.text_terms) if query.text_terms else {}
    if not query.order and scores:
        pages.sort(key=lambda page: -scores[page.id])
    for name, descending in reversed(query.order):
        pages.sort(key=cql.order_key(site, name), reverse=descending)
    return pages, query, scores


def _paged_pages(site: Site, request: Request, links: wire.Links, pages: list[Page], path: str, **extra: object) -> Response:
    start, limit = _window(request)
    expand = _expand(request)
    window = [wire.page_json(site, page, links, expand) for page in pages[start : start + limit]]
    return JSONResponse({**wire.paged(window, start, limit, None, **extra), "_links": _links(links, request, path, start, limit, len(pages))})


def _links(links: wire.Links, request: Request, path: str, start: int, limit: int, total: int) -> dict[str, str]:
    extra = {"next": _next(request, path, start, limit)} if start + limit < total else {}
    return links.block({"self": f"{links.base}{path}", **extra})


def _next(request: Request, path: str, start: int, limit: int) -> str:
    """The next page's link: relative to ``_links.base``, so without the context path. Cloud
    pages searches with an opaque cursor as well."""
    params = [(k, v) for k, v in request.query_params.multi_items() if k not in ("start", "limit", "next", "cursor")]
    if request.url.path.startswith("/wiki/") and path.endswith("search"):
        params = [("next", "true"), ("cursor", _cursor(start + limit))] + params
    params += [("limit", str(limit)), ("start", str(start + limit))]
    return f"{path}?{urllib.parse.urlencode(params)}"


def _cursor(start: int) -> str:
    return base64.urlsafe_b64encode(f"_sa_{start}".encode()).decode()


def _window(request: Request, default: int = DEFAULT_LIMIT, cap: int = MAX_LIMIT) -> tuple[int, int]:
    cursor = request.query_params.get("cursor")
    cloud_search = request.url.path.startswith(CLOUD + "/") and request.url.path.endswith("/search")
    try:
        if cursor is not None:  # Cloud's cursor wins over start, as it does there
            start = int(base64.urlsafe_b64decode(cursor.encode()).decode().removeprefix("_sa_"))
        elif cloud_search:
            start = 0  # Cloud's searches page by cursor alone: ``start`` is echoed, never used
        else:
            start = int(request.query_params.get("start", 0))
        limit = int(request.query_params.get("limit", default))
    except (ValueError, binascii.Error) as exc:
        raise _BadRequest("start and limit must be integers, and a cursor one this server gave") from exc
    if start < 0 or limit < 0:
        raise _BadRequest("start and limit must not be negative")
    return start, min(limit or default, cap)


def _expand(request: Request, prefix: str = "") -> set[str]:
    raw = ",".join(request.query_params.getlist("expand"))
    return {part.strip().removeprefix(prefix) for part in raw.split(",") if part.strip() and part.strip().startswith(prefix)}


def _id_order(page: Page) -> tuple[int, str]:
    return (int(page.id), page.id) if page.id.isdigit() else (0, page.id)


def _excerpt(page: Page, terms: list[str]) -> str:
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", wire.view_html(page.body))).strip()
    lowered = text.lower()
    at = min((lowered.find(term) for term in terms if term in lowered), default=0)
    return text[max(0, at - 60) : at + 200]


def _route_name(path: str) -> str:
    """Request counts are kept per kind of call: ids collapse to a placeholder, the API's version
    (``/rest/api/2/…``) does not."""
    return re.sub(r"(?<!/api)/(?:\d+|att\d+)(?=/|$)", "/{id}", path)


def _dropped(response: Response) -> Response:
    body = bytes(response.body) if hasattr(response, "body") else b""

    async def half_then_gone() -> AsyncIterator[bytes]:
        yield body[: max(1, len(body) // 2)]
        raise ConnectionResetError("connection dropped by an injected fault")

    return StreamingResponse(half_then_gone(), status_code=response.status_code, media_type=response.media_type)

