"""The emulator's controls, for tests and benchmarks: changes to the site as its users would make
them, injected faults, and a count of the REST calls served. Served under ``/_emulator`` and
guarded by the emulator's admin token (bearer); the emulator binds to loopback only.
"""

from __future__ import annotations

import base64
import binascii
import collections
import hmac
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from devstack.atlassian.site import Site, SiteError


@dataclass
class Fault:
    """One injected failure: answer the next ``times`` requests whose path matches ``path`` with
    ``kind`` — "429" (with ``Retry-After``), "500", "503", "slow" (wait ``delay_s``, then answer)
    or "drop" (send half the body, then close the connection)."""

    kind: str
    path: str = ".*"
    times: int = 1
    retry_after_s: int = 1
    delay_s: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in ("429", "500", "503", "slow", "drop"):
            raise SiteError(f"unknown fault kind {self.kind!r}; use 429, 500, 503, slow or drop")
        re.compile(self.path)


@dataclass
class Emulator:
    """The emulated site, the faults waiting to be served, and a count of REST calls by kind."""

    site: Site
    admin_token: str
    faults: list[Fault] = field(default_factory=list)
    requests: collections.Counter[str] = field(default_factory=collections.Counter)
    # The Data Center release the ``/confluence`` face answers as: space permissions are JSON-RPC
    # before 9.0 and REST from 9.1 (the ``/wiki`` face is always Cloud).
    data_center: str = "9.2.0"
    # Cloud's removed v1 reads answer 410 to every caller, as through the OAuth gateway; True
    # answers them to basic-auth callers as tenant hosts still do (peers such as mcp-atlassian
    # read pages that way). Removed group-by-name reads and Jira's old search answer 410 either way.
    cloud_v1_answered: bool = False
    removed: collections.Counter[str] = field(default_factory=collections.Counter)  # Cloud reads answered 410

    def take_fault(self, path: str) -> Fault | None:
        for fault in self.faults:
            if re.search(fault.path, path):
                fault.times -= 1
                if fault.times <= 0:
                    self.faults.remove(fault)
                return fault
        return None


AdminHandler = Callable[[Request, dict[str, Any]], Awaitable[object]]


def admin_routes(emulator: Emulator) -> list[Route]:
    site = emulator.site

    def admin(handler: AdminHandler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
            if not hmac.compare_digest(given.encode(), emulator.admin_token.encode()):
                return JSONResponse({"error": "the admin API needs the emulator's admin token"}, 401)
            try:
                payload = await request.json() if await request.body() else {}
                if not isinstance(payload, dict):
                    raise SiteError("the request body must be a JSON object")
                result = await handler(request, payload)
            except SiteError as exc:
                return JSONResponse({"error": str(exc)}, exc.status)
            except (ValueError, KeyError, TypeError) as exc:
                return JSONResponse({"error": f"bad request: {exc}"}, 400)
            return JSONResponse(result)

        return endpoint

    def account(login: str) -> str:
        found = site.user_by_login(login)
        if found is None:
            raise SiteError(f"no user {login}", 404)
        return found.account_id

    async def create(request: Request, body: dict[str, Any]) -> object:
        page = site.create_page(
            body["space"], body["title"], body.get("body", ""), parent_id=body.get("parent_id"), by=account(body["by"]), labels=body.get("labels", [])
        )
        return {"id": page.id, "version": page.version.number}

    async def edit(request: Request, body: dict[str, Any]) -> object:
        page = site.edit_page(
            request.path_params["id"], by=account(body["by"]), body=body.get("body"), title=body.get("title"), message=body.get("message", "")
        )
        return {"id": page.id, "version": page.version.number}

    async def move(request: Request, body: dict[str, Any]) -> object:
        page = site.move_page(request.path_params["id"], body.get("parent_id"), by=account(body["by"]), space_key=body.get("space"))
        return {"id": page.id, "version": page.version.number, "space": page.space_key}

    async def delete(request: Request, body: dict[str, Any]) -> object:
        return {"moved_children": site.delete_page(request.path_params["id"])}

    async def restrict(request: Request, body: dict[str, Any]) -> object:
        page = site.set_read_restrictions(
            request.path_params["id"], users={account(login) for login in body.get("users", [])}, groups=set(body.get("groups", []))
        )
        return {"id": page.id, "version": page.version.number}

    async def add_member(request: Request, body: dict[str, Any]) -> object:
        site.add_member(request.path_params["group"], account(request.path_params["login"]))
        return {"group": request.path_params["group"], "members": len(site.groups[request.path_params["group"]])}

    async def remove_member(request: Request, body: dict[str, Any]) -> object:
        site.remove_member(request.path_params["group"], account(request.path_params["login"]))
        return {"group": request.path_params["group"], "members": len(site.groups[request.path_params["group"]])}

    async def attach(request: Request, body: dict[str, Any]) -> object:
        try:
            data = base64.b64decode(body["data_base64"], validate=True)
        except binascii.Error as exc:
            raise SiteError("data_base64 is not base64") from exc
        attachment = site.add_attachment(request.path_params["id"], body["filename"], body.get("media_type", "application/octet-stream"), data, by=account(body["by"]))
        return {"id": attachment.id, "page_version": site.pages[attachment.page_id].version.number}

    # -- Jira ----------------------------------------------------------------------------------

    def issue_state(key: str) -> dict[str, object]:
        issue = site.jira.issues[key]
        return {"key": issue.key, "parent": issue.parent_key, "security_level": issue.security_level, "updated": issue.updated.isoformat()}

    async def create_issue(request: Request, body: dict[str, Any]) -> object:
        issue = site.jira.create_issue(
            body["project"], body["type"], body["summary"], by=account(body["by"]), description=body.get("description", ""),
            parent_key=body.get("parent"), security_level=body.get("security_level"), labels=body.get("labels", []),
        )
        return issue_state(issue.key)

    async def edit_issue(request: Request, body: dict[str, Any]) -> object:
        issue = site.jira.edit_issue(request.path_params["key"], by=account(body["by"]), summary=body.get("summary"), description=body.get("description"))
        return issue_state(issue.key)

    async def comment_issue(request: Request, body: dict[str, Any]) -> object:
        visibility = body.get("visibility")  # {"type": "role" | "group", "value": name}, as Jira's REST takes it
        restricted = (visibility["type"], visibility["value"]) if visibility else None
        site.jira.add_comment(request.path_params["key"], body["body"], by=account(body["by"]), visibility=restricted)
        return issue_state(request.path_params["key"])

    async def move_issue(request: Request, body: dict[str, Any]) -> object:
        return issue_state(site.jira.move_issue(request.path_params["key"], body.get("parent")).key)

    async def secure_issue(request: Request, body: dict[str, Any]) -> object:
        return issue_state(site.jira.set_security_level(request.path_params["key"], body.get("security_level")).key)

    async def delete_issue(request: Request, body: dict[str, Any]) -> object:
        return {"deleted": site.jira.delete_issue(request.path_params["key"])}

    async def set_role(request: Request, body: dict[str, Any]) -> object:
        site.jira.set_role_members(
            request.path_params["project"], request.path_params["role"],
            users={account(login) for login in body.get("users", [])}, groups=set(body.get("groups", [])),
        )
        return {"project": request.path_params["project"], "role": request.path_params["role"]}

    async def add_fault(request: Request, body: dict[str, Any]) -> object:
        emulator.faults.append(Fault(**body))
        return {"faults": len(emulator.faults)}

    async def clear_faults(request: Request, body: dict[str, Any]) -> object:
        emulator.faults.clear()
        return {"faults": 0}

    async def request_counts(request: Request, body: dict[str, Any]) -> object:
        return dict(emulator.requests)

    async def removed_counts(request: Request, body: dict[str, Any]) -> object:
        return dict(emulator.removed)

    async def reset_counts(request: Request, body: dict[str, Any]) -> object:
        emulator.requests.clear()
        return {}

    return [
        Route("/_emulator/pages", admin(create), methods=["POST"]),
        Route("/_emulator/pages/{id}", admin(edit), methods=["PUT"]),
        Route("/_emulator/pages/{id}", admin(delete), methods=["DELETE"]),
        Route("/_emulator/pages/{id}/move", admin(move), methods=["POST"]),
        Route("/_emulator/pages/{id}/restrictions", admin(restrict), methods=["PUT"]),
        Route("/_emulator/pages/{id}/attachments", admin(attach), methods=["POST"]),
        Route("/_emulator/groups/{group}/members/{login}", admin(add_member), methods=["PUT"]),
        Route("/_emulator/groups/{group}/members/{login}", admin(remove_member), methods=["DELETE"]),
        Route("/_emulator/jira/issues", admin(create_issue), methods=["POST"]),
        Route("/_emulator/jira/issues/{key}", admin(edit_issue), methods=["PUT"]),
        Route("/_emulator/jira/issues/{key}", admin(delete_issue), methods=["DELETE"]),
        Route("/_emulator/jira/issues/{key}/comments", admin(comment_issue), methods=["POST"]),
        Route("/_emulator/jira/issues/{key}/move", admin(move_issue), methods=["POST"]),
        Route("/_emulator/jira/issues/{key}/security", admin(secure_issue), methods=["PUT"]),
        Route("/_emulator/jira/projects/{project}/roles/{role}", admin(set_role), methods=["PUT"]),
        Route("/_emulator/faults", admin(add_fault), methods=["POST"]),
        Route("/_emulator/faults", admin(clear_faults), methods=["DELETE"]),
        Route("/_emulator/requests", admin(request_counts), methods=["GET"]),
        Route("/_emulator/requests", admin(reset_counts), methods=["DELETE"]),
        Route("/_emulator/removed", admin(removed_counts), methods=["GET"]),
    ]
