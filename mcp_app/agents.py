"""What an agent that signs for its users (the Slack bot) asks of OpenFGA, through this server:
it holds no OpenFGA credential of its own (DESIGN.md A2, A12).

- ``POST /agent/grant`` ``{"ttl": "8h"}``: the grant that lets the agent act for the token's user
  on the token's task. Written here, with the server's key, for that agent, user and task alone,
  and for no longer than the agent's ``max_grant_ttl``: the agent cannot grant itself anything
  wider than acting for a user who asked it something, and cannot touch any other tuple.
- ``POST /agent/audience`` ``{"readers": [...], "objects": [...]}``: may every reader (a directory
  name, mapped by :func:`core.ids.user_name` as every entry maps names) view every object?
  Asked only about objects the token's principal itself may view through its grant, so the
  agent learns nothing about objects its asker cannot see.

Both take only tokens an agent issuer signed (``WAYFINDER_MCP__OAUTH__AGENT_ISSUERS``): ``sub`` the
user, ``act.sub`` the agent, ``task`` the conversation. Answers are JSON; a refusal is
``{"error": "..."}`` with 400, 401 or 503, never an internal detail.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from authz import grants
from authz.base import Authorizer, TupleStore
from authz.gate import Gate
from core import ids
from core.errors import AuthorizationUnavailable, InvalidArgument, Unauthenticated
from core.models import Principal

log = logging.getLogger("wayfinder.mcp")

GRANT_PATH = "/agent/grant"
AUDIENCE_PATH = "/agent/audience"
#: readers one audience question may name (a public channel's are its whole workspace)
MAX_READERS = 5000
#: objects one audience question may name (an answer cites a few hits and their links)
MAX_OBJECTS = 100
#: readers whose rights are checked at once
CONCURRENT_READERS = 8

#: a verified agent token → its principal and the longest grant its agent may hold; None: refused
AgentPrincipal = Callable[[str], Awaitable[tuple[Principal, timedelta] | None]]


async def all_see(authorizer: Authorizer, asker: Principal, readers: Sequence[str], objects: Sequence[str], deadline_s: float) -> bool:
    """May every one of ``readers`` (directory names) view every one of ``objects``? False unless
    ``asker`` may view them all first. Each reader is one BatchCheck, at most CONCURRENT_READERS at once."""
    wanted = set(objects)
    if await Gate(authorizer, asker, deadline_s).visible(objects) != wanted:
        return False
    users = {ids.user_name(reader) for reader in readers}
    limit = asyncio.Semaphore(CONCURRENT_READERS)

    async def sees(user: str) -> bool:
        async with limit:
            return await Gate(authorizer, Principal(user=user), deadline_s).visible(objects) == wanted

    return all(await asyncio.gather(*(sees(user) for user in sorted(users))))


def routes(
    principal_of: AgentPrincipal, backends: Callable[[], tuple[Authorizer, TupleStore, float]]
) -> list[tuple[str, Callable[[Request], Awaitable[JSONResponse]]]]:
    """The two endpoints, as (path, handler). ``principal_of`` verifies an agent's token;
    ``backends`` gives the server's OpenFGA client (as authorizer and store) and its deadline."""

    async def grant(request: Request) -> JSONResponse:
        async def act(principal: Principal, longest: timedelta, body: dict[str, Any]) -> JSONResponse:
            ttl = grants.parse_ttl(_field(body, "ttl", str))
            if ttl > longest:
                raise InvalidArgument(f"a grant of {body['ttl']} is longer than this agent may hold ({_span(longest)})")
            _, store, _ = backends()
            assert principal.agent is not None and principal.task is not None
            made = await grants.grant(store, principal.user, principal.agent, principal.task, ttl)
            return JSONResponse({"user": made.user, "agent": made.agent, "task": made.task, "expires_at": made.expires_at.isoformat()})

        return await _answer(request, principal_of, act)

    async def audience(request: Request) -> JSONResponse:
        async def act(principal: Principal, _: timedelta, body: dict[str, Any]) -> JSONResponse:
            readers, objects = _names(body, "readers", MAX_READERS), _names(body, "objects", MAX_OBJECTS)
            authorizer, _, deadline_s = backends()
            return JSONResponse({"all_may_see": await all_see(authorizer, principal, readers, objects, deadline_s)})

        return await _answer(request, principal_of, act)

    return [(GRANT_PATH, grant), (AUDIENCE_PATH, audience)]


async def _answer(
    request: Request, principal_of: AgentPrincipal, act: Callable[[Principal, timedelta, dict[str, Any]], Awaitable[JSONResponse]]
) -> JSONResponse:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    found = await principal_of(token.strip()) if scheme.lower() == "bearer" and token.strip() else None
    if found is None:
        return JSONResponse({"error": "unauthenticated: a token an agent signed for its user is required"}, status_code=401)
    try:
        body = json.loads(await request.body())
        if not isinstance(body, dict):
            raise InvalidArgument("the body is a JSON object")
        return await act(*found, body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return JSONResponse({"error": "invalid_argument: the body is not JSON"}, status_code=400)
    except InvalidArgument as exc:
        return JSONResponse({"error": f"invalid_argument: {exc}"}, status_code=400)
    except Unauthenticated as exc:  # the grant is gone (revoked, expired) or was never written
        return JSONResponse({"error": f"unauthenticated: {exc}"}, status_code=401)
    except AuthorizationUnavailable as exc:
        log.warning("agent endpoint: authorization unavailable: %s", exc)
        return JSONResponse({"error": "authorization_unavailable: permissions cannot be checked right now"}, status_code=503)
    except Exception:  # OpenFGA refused a write or went away: logged here, never returned
        log.exception("agent endpoint %s failed", request.url.path)
        return JSONResponse({"error": "unavailable: the service cannot answer right now"}, status_code=503)


def _field(body: dict[str, Any], name: str, kind: type) -> Any:
    value = body.get(name)
    if not isinstance(value, kind):
        raise InvalidArgument(f"{name!r} is required, a {kind.__name__}")
    return value


def _names(body: dict[str, Any], name: str, most: int) -> list[str]:
    values = _field(body, name, list)
    if not values or len(values) > most or not all(isinstance(v, str) and 0 < len(v) <= ids.MAX_ID_CHARS for v in values):
        raise InvalidArgument(f"{name!r} is a list of 1 to {most} non-empty strings")
    return values


def _span(ttl: timedelta) -> str:
    seconds = int(ttl.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
