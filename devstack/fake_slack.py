"""A local stand-in for Slack, for tests: the real slack_sdk clients talk to it through their
``base_url``. It serves the Web API methods the bot calls — ``auth.test``, ``users.info``,
``users.list`` and ``conversations.members`` (both paged by cursor), ``conversations.info``,
``chat.postMessage``, ``chat.postEphemeral``, ``apps.connections.open`` — with Slack's envelope
(``{"ok": …}``, errors as ``{"ok": false, "error": …}``, tokens checked), a Socket Mode WebSocket
that delivers queued event envelopes and records their acknowledgements, and :func:`signed` to
deliver an event to an HTTP endpoint as Slack signs it. Every post is recorded.

Conversations come in Slack's kinds (:data:`KINDS`), shaped as ``conversations.info`` shapes
them: a public channel (any full member of the workspace may open it and read its history), a
private channel, a DM, a group DM, and a channel shared with another organisation through Slack
Connect. A conversation without a kind is a private channel, or a DM when its id starts with
``D``. ``users.list`` lists every account of the workspace, as Slack does: deleted ones, guests,
bots, the bot's own user and Slackbot; people of other organisations (:func:`stranger`) only
``users.info`` knows.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.signature import SignatureVerifier
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

TEAM = "T0WAYFIND"
#: the team of another organisation, whose people reach the workspace through Slack Connect
PARTNER_TEAM = "T0PARTNER"
BOT_USER = "UBOT"
#: entries per conversations.members and users.list page, whatever is asked: paging is always exercised
PAGE = 2
KINDS = ("public", "private", "im", "mpim", "shared")
#: methods whose answers are paged by cursor
_PAGED = {"conversations.members", "users.list"}
_CREATED = 1700000000  # when every conversation was created


@dataclass(frozen=True)
class Post:
    kind: str  # message | ephemeral
    channel: str
    text: str
    user: str | None  # ephemeral: the one who sees it
    thread_ts: str | None


def person(user_id: str, email: str | None, **extra: Any) -> dict[str, Any]:
    """A ``users.info`` user: a full member of the workspace unless ``extra`` says otherwise."""
    profile = {"email": email} if email else {}
    return {
        "id": user_id, "team_id": TEAM, "name": user_id.lower(), "deleted": False, "is_bot": False, "is_app_user": False,
        "is_restricted": False, "is_ultra_restricted": False, "profile": profile,
    } | extra


def guest(user_id: str, email: str | None, *, single_channel: bool = False) -> dict[str, Any]:
    """A guest: multi-channel (``is_restricted``) or single-channel (both flags)."""
    return person(user_id, email, is_restricted=True, is_ultra_restricted=single_channel)


def stranger(user_id: str, email: str | None) -> dict[str, Any]:
    """A person of another organisation, as Slack shows one met in a Slack Connect channel."""
    return person(user_id, email, team_id=PARTNER_TEAM, is_stranger=True)


def _builtin_users() -> dict[str, dict[str, Any]]:
    """The accounts every workspace has: the bot's own user and Slackbot (who is no bot)."""
    bot = person(BOT_USER, None, name="wayfinder", is_bot=True) | {"profile": {"bot_id": "BBOT"}}
    return {BOT_USER: bot, "USLACKBOT": person("USLACKBOT", None, name="slackbot")}


@dataclass
class FakeSlack:
    bot_token: str
    app_token: str = "xapp-test"
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    channels: dict[str, list[str]] = field(default_factory=dict)  # channel -> member ids
    kinds: dict[str, str] = field(default_factory=dict)  # channel -> one of KINDS
    failing: set[str] = field(default_factory=set)  # methods that answer Slack's internal_error
    posts: list[Post] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)  # methods called, in order
    acks: list[str] = field(default_factory=list)  # envelope ids acknowledged over Socket Mode
    _outbox: list[dict[str, Any]] = field(default_factory=list)
    _posted: asyncio.Event = field(default_factory=asyncio.Event)
    base_url: str = ""  # set once served: the WebSocket URL is built from it

    def app(self) -> Starlette:
        return Starlette(
            routes=[Route("/api/{method}", self._api, methods=["GET", "POST"]), WebSocketRoute("/socket", self._socket)]
        )

    async def wait_for_posts(self, count: int, timeout_s: float = 60) -> list[Post]:
        """The first ``count`` posts, once there are that many."""
        async with asyncio.timeout(timeout_s):
            while len(self.posts) < count:
                self._posted.clear()
                await self._posted.wait()
        return self.posts[:count]

    def deliver(self, event: dict[str, Any]) -> str:
        """Queue an Events API callback for the Socket Mode connection; returns its envelope id."""
        envelope_id = uuid.uuid4().hex
        payload = callback(event)
        self._outbox.append({"envelope_id": envelope_id, "type": "events_api", "accepts_response_payload": False, "payload": payload})
        return envelope_id

    # -- the Web API ------------------------------------------------------------------------------

    async def _api(self, request: Request) -> JSONResponse:
        method = request.path_params["method"]
        self.calls.append(method)
        args: dict[str, Any] = dict(request.query_params)
        if request.method == "POST":
            if request.headers.get("content-type", "").startswith("application/json"):
                args |= await request.json()
            else:
                args |= dict(await request.form())
        token = request.headers.get("authorization", "").removeprefix("Bearer ") or args.get("token", "")
        wanted = self.app_token if method == "apps.connections.open" else self.bot_token
        if token != wanted:
            return _fail("invalid_auth")
        handler = getattr(self, "_" + method.replace(".", "_"), None)
        if handler is None:
            return _fail("unknown_method")
        if method in self.failing:
            return _fail("internal_error")
        if method in _PAGED and _offset(args.get("cursor")) is None:
            return _fail("invalid_cursor")
        return handler(args)

    def _auth_test(self, args: dict[str, Any]) -> JSONResponse:
        return _ok(user_id=BOT_USER, bot_id="BBOT", team_id=TEAM, user="wayfinder", team="Test", url="https://test.slack.invalid/")

    def _users_info(self, args: dict[str, Any]) -> JSONResponse:
        found = self._accounts().get(args.get("user", ""))
        return _ok(user=found) if found else _fail("user_not_found")

    def _users_list(self, args: dict[str, Any]) -> JSONResponse:
        # the workspace's own accounts: people of other organisations are met in shared channels only
        listed = [user for user in self._accounts().values() if user.get("team_id") == TEAM]
        window, following = _page(listed, args)
        return _ok(members=window, cache_ts=int(time.time()), response_metadata={"next_cursor": following})

    def _conversations_members(self, args: dict[str, Any]) -> JSONResponse:
        members = self.channels.get(args.get("channel", ""))
        if members is None:
            return _fail("channel_not_found")
        window, following = _page(members, args)
        return _ok(members=window, response_metadata={"next_cursor": following})

    def _conversations_info(self, args: dict[str, Any]) -> JSONResponse:
        channel = args.get("channel", "")
        if channel not in self.channels:
            return _fail("channel_not_found")
        return _ok(channel=self._conversation(channel, _true(args.get("include_num_members"))))

    def _conversation(self, channel: str, num_members: bool) -> dict[str, Any]:
        """The channel object of ``conversations.info``, with the fields Slack gives its kind."""
        members = self.channels[channel]
        kind = self.kinds.get(channel) or ("im" if channel.startswith("D") else "private")
        if kind not in KINDS:
            raise ValueError(f"{channel}: no kind of conversation is called {kind!r} (one of {KINDS})")
        if kind == "im":  # a DM's object names the other person and holds no channel flags
            other = next((m for m in members if m != BOT_USER), BOT_USER)
            return {
                "id": channel, "created": _CREATED, "is_archived": False, "is_im": True, "is_org_shared": False,
                "context_team_id": TEAM, "updated": _CREATED * 1000, "user": other, "is_user_deleted": False, "priority": 0,
            }
        shared = kind == "shared"
        found: dict[str, Any] = {
            "id": channel, "name": _name(channel, kind, members), "is_channel": kind != "mpim", "is_group": False,
            "is_im": False, "is_mpim": kind == "mpim", "is_private": kind in ("private", "mpim"), "created": _CREATED,
            "is_archived": False, "is_general": False, "unlinked": 0, "is_shared": shared, "is_org_shared": False,
            "is_ext_shared": shared, "is_pending_ext_shared": False, "pending_shared": [], "context_team_id": TEAM,
            "updated": _CREATED * 1000, "parent_conversation": None, "creator": members[0] if members else BOT_USER,
            "shared_team_ids": [TEAM, PARTNER_TEAM] if shared else [TEAM], "pending_connected_team_ids": [],
            "is_member": BOT_USER in members, "topic": {"value": "", "creator": "", "last_set": 0},
            "purpose": {"value": "", "creator": "", "last_set": 0},
        }
        if shared:
            found["connected_team_ids"] = [TEAM, PARTNER_TEAM]
        if num_members:
            found["num_members"] = len(members)
        return found

    def _accounts(self) -> dict[str, dict[str, Any]]:
        return _builtin_users() | self.users

    def _chat_postMessage(self, args: dict[str, Any]) -> JSONResponse:  # noqa: N802 (Slack's method name)
        return self._post("message", args)

    def _chat_postEphemeral(self, args: dict[str, Any]) -> JSONResponse:  # noqa: N802
        return self._post("ephemeral", args)

    def _apps_connections_open(self, args: dict[str, Any]) -> JSONResponse:
        return _ok(url=self.base_url.replace("http://", "ws://", 1) + "/socket")

    def _post(self, kind: str, args: dict[str, Any]) -> JSONResponse:
        channel = args.get("channel", "")
        if channel not in self.channels:
            return _fail("channel_not_found")
        user = args.get("user") if kind == "ephemeral" else None
        if kind == "ephemeral" and user not in self.channels[channel]:
            return _fail("user_not_in_channel")
        self.posts.append(Post(kind, channel, args.get("text", ""), user, args.get("thread_ts") or None))
        self._posted.set()
        ts = f"{time.time():.6f}"
        return _ok(channel=channel, ts=ts, message_ts=ts)

    # -- Socket Mode ------------------------------------------------------------------------------

    async def _socket(self, socket: WebSocket) -> None:
        await socket.accept()
        await socket.send_text(json.dumps({"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A0TEST"}}))
        receiving = asyncio.create_task(self._receive_acks(socket))
        try:
            while not receiving.done():
                while self._outbox:
                    await socket.send_text(json.dumps(self._outbox.pop(0)))
                await asyncio.sleep(0.05)
        except WebSocketDisconnect:
            pass
        finally:
            receiving.cancel()

    async def _receive_acks(self, socket: WebSocket) -> None:
        try:
            while True:
                message = json.loads(await socket.receive_text())
                if "envelope_id" in message:
                    self.acks.append(message["envelope_id"])
        except (WebSocketDisconnect, RuntimeError):
            return


def callback(event: dict[str, Any]) -> dict[str, Any]:
    """An Events API ``event_callback`` around ``event``."""
    return {
        "token": "unused", "team_id": TEAM, "api_app_id": "A0TEST", "type": "event_callback", "event": event,
        "event_id": "Ev" + uuid.uuid4().hex[:10].upper(), "event_time": int(time.time()), "authorizations": [
            {"team_id": TEAM, "user_id": BOT_USER, "is_bot": True}
        ],
    }


def signed(secret: str, body: dict[str, Any], *, at: int | None = None) -> tuple[bytes, dict[str, str]]:
    """``body`` as Slack sends it to a request URL: the JSON bytes and the signature headers."""
    raw = json.dumps(body).encode()
    timestamp = str(at if at is not None else int(time.time()))
    signature = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=raw)
    return raw, {"Content-Type": "application/json", "X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": signature}


def _page(entries: list[Any], args: dict[str, Any]) -> tuple[list[Any], str]:
    """One page of ``entries`` from the request's cursor, and the cursor of the next ("" at the end)."""
    start = _offset(args.get("cursor")) or 0
    following = _cursor(start + PAGE) if start + PAGE < len(entries) else ""
    return entries[start : start + PAGE], following


def _cursor(offset: int) -> str:
    """An opaque cursor, as Slack's are (base64 of where the next page starts)."""
    return base64.b64encode(f"offset:{offset}".encode()).decode()


def _offset(cursor: str | None) -> int | None:
    """Where a cursor's page starts: 0 without one, None for a cursor the fake did not hand out."""
    if not cursor:
        return 0
    try:
        kind, _, offset = base64.b64decode(cursor, validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return int(offset) if kind == "offset" and offset.isdigit() else None


def _true(value: Any) -> bool:
    """A boolean argument as the SDKs send one (``1``/``0``, ``true``/``false``, JSON)."""
    return value is True or str(value).lower() in ("1", "true")


def _name(channel: str, kind: str, members: list[str]) -> str:
    if kind == "mpim":  # Slack names a group DM after its members
        return "mpdm-" + "--".join(m.lower() for m in members) + "-1"
    return channel.lower()


def _ok(**fields: Any) -> JSONResponse:
    return JSONResponse({"ok": True, **fields})


def _fail(error: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error": error})
