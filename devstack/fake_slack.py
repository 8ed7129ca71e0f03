"""A local stand-in for Slack, for tests: the real slack_sdk clients talk to it through their
``base_url``. It serves the Web API methods the bot calls — ``auth.test``, ``users.info``,
``conversations.members`` (paged), ``chat.postMessage``, ``chat.postEphemeral``,
``apps.connections.open`` — with Slack's envelope (``{"ok": …}``, errors as ``{"ok": false,
"error": …}``, tokens checked), a Socket Mode WebSocket that delivers queued event envelopes and
records their acknowledgements, and :func:`signed` to deliver an event to an HTTP endpoint as
Slack signs it. Every post is recorded.
"""

from __future__ import annotations

import asyncio
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
BOT_USER = "UBOT"
#: members per conversations.members page, whatever is asked: paging is always exercised
PAGE = 2


@dataclass(frozen=True)
class Post:
    kind: str  # message | ephemeral
    channel: str
    text: str
    user: str | None  # ephemeral: the one who sees it
    thread_ts: str | None


def person(user_id: str, email: str | None, **extra: Any) -> dict[str, Any]:
    """A ``users.info`` user."""
    profile = {"email": email} if email else {}
    return {"id": user_id, "team_id": TEAM, "name": user_id.lower(), "deleted": False, "is_bot": False, "profile": profile} | extra


@dataclass
class FakeSlack:
    bot_token: str
    app_token: str = "xapp-test"
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    channels: dict[str, list[str]] = field(default_factory=dict)  # channel -> member ids
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
        return handler(args)

    def _auth_test(self, args: dict[str, Any]) -> JSONResponse:
        return _ok(user_id=BOT_USER, bot_id="BBOT", team_id=TEAM, user="wayfinder", team="Test", url="https://test.slack.invalid/")

    def _users_info(self, args: dict[str, Any]) -> JSONResponse:
        found = self.users.get(args.get("user", ""))
        return _ok(user=found) if found else _fail("user_not_found")

    def _conversations_members(self, args: dict[str, Any]) -> JSONResponse:
        members = self.channels.get(args.get("channel", ""))
        if members is None:
            return _fail("channel_not_found")
        start = int(args.get("cursor") or 0)
        window = members[start : start + PAGE]
        following = str(start + PAGE) if start + PAGE < len(members) else ""
        return _ok(members=window, response_metadata={"next_cursor": following})

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


def _ok(**fields: Any) -> JSONResponse:
    return JSONResponse({"ok": True, **fields})


def _fail(error: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error": error})
