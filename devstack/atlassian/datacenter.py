"""How a Confluence Data Center site lists a space's permissions, which depends on its release:

* **9.1 and later**: ``GET /rest/api/space/{key}/permissions`` (CONFSERVER-100505; the DC REST
  reference's ``SpacePermission``): a bare array of ``{"operation": {"targetType", "operationKey"},
  "subject": {"type": "user", "userKey"} | {"type": "group", "name"}, "spaceKey", "spaceId"}``.
  Users come by user key only: a client looks their username up.
* **before 9.0**: the remote API's JSON-RPC only, ``POST /rpc/json-rpc/confluenceservice-v2/
  getSpacePermissionSets`` with ``["KEY"]``: ``[{"type": "VIEWSPACE", "spacePermissions":
  [{"type", "userName", "groupName"}]}]``; a permission naming neither is the anonymous one.

Both need the Administer permission of the space (here: a site administrator). Neither release
lists permissions under the space's ``expand=permissions``: that was Cloud's, and Cloud removed it
with the v1 space reads. Every face answers ``GET /rest/applinks/1.0/manifest`` with its version,
as clients read it to tell a release (XML unless JSON is asked for).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from devstack.atlassian import wire
from devstack.atlassian.site import Site, Space, User

CLOUD_VERSION = "1000.0.0"  # what a Cloud site's application links manifest reports

Handler = Callable[[Request, User, "wire.Links"], Awaitable[Response]]


def release(version: str) -> tuple[int, int]:
    major, minor, *_ = (int(part) for part in (version.split(".") + ["0"])[:2])
    return major, minor


def space_permission_routes(site: Site, version: str) -> list[tuple[str, Handler, list[str]]]:
    """(path, handler, methods) of a Data Center site of ``version``."""

    def administered(account: User, key: str) -> Space | None:
        found = site.spaces.get(key)
        return found if found is not None and site.space_readable(account, found) and account.site_admin else None

    async def rest(request: Request, account: User, links: wire.Links) -> Response:
        found = administered(account, request.path_params["key"])
        if found is None:
            return JSONResponse(wire.error(404, f"No space with key : {request.path_params['key']}"), 404)
        subjects = [{"type": "user", "userKey": u} for u in sorted(found.readers_users)] + [{"type": "group", "name": g} for g in sorted(found.readers_groups)]
        return JSONResponse(
            [{"operation": {"targetType": "space", "operationKey": "read"}, "subject": subject, "spaceKey": found.key, "spaceId": found.id} for subject in subjects]
        )

    async def json_rpc(request: Request, account: User, links: wire.Links) -> Response:
        try:
            arguments = json.loads(await request.body() or b"[]")
            key = arguments[0] if isinstance(arguments, list) and arguments and isinstance(arguments[0], str) else None
        except ValueError:
            key = None
        if key is None:
            return _rpc_error("getSpacePermissionSets takes the space key as its one argument")
        found = administered(account, key)
        if found is None:
            return _rpc_error(f"No space found for space key: {key}" if key not in site.spaces else "You're not allowed to view that space's permissions")
        permissions: list[dict[str, Any]] = [
            {"type": "VIEWSPACE", "userName": site.users[u].username if u in site.users else u, "groupName": None} for u in sorted(found.readers_users)
        ] + [{"type": "VIEWSPACE", "userName": None, "groupName": g} for g in sorted(found.readers_groups)]
        return JSONResponse([{"type": "VIEWSPACE", "spacePermissions": permissions}])

    routes: list[tuple[str, Handler, list[str]]] = [("/rest/applinks/1.0/manifest", manifest(version), ["GET"])]
    if release(version) >= (9, 1):
        routes.append(("/rest/api/space/{key}/permissions", rest, ["GET"]))
    elif release(version) < (9, 0):  # the remote APIs are gone from 9.0
        routes.append(("/rpc/json-rpc/confluenceservice-v2/getSpacePermissionSets", json_rpc, ["POST"]))
    return routes


def manifest(version: str) -> Handler:
    async def handler(request: Request, account: User, links: wire.Links) -> Response:
        body = {"id": "emulated-confluence", "name": "Confluence", "typeId": "confluence", "version": version, "buildNumber": 9000, "url": links.base}
        if "json" in request.headers.get("accept", ""):
            return JSONResponse(body)
        fields = "".join(f"<{k}>{v}</{k}>" for k, v in body.items())
        return Response(f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><manifest>{fields}</manifest>', media_type="application/xml")

    return handler


def _rpc_error(message: str) -> Response:
    # JSON-RPC reports a failed call in the body of a 200 answer.
    return JSONResponse({"error": {"code": 500, "message": message, "data": None}})
