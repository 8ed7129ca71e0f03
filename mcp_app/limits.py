"""What keeps one caller from starving the rest: per-principal rate and concurrency limits and a
deadline on every tool call (:class:`Limits`), and a cap on the size of an HTTP request body
(:class:`BodyLimit`). A refused call gets ``rate_limited`` with a retry hint; a call past its
deadline gets ``unavailable`` and stops working."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastmcp.exceptions import ToolError
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.models import Principal
from core.settings import LimitSettings


#: principals whose budgets are kept before idle ones are forgotten
MAX_TRACKED = 10_000


@dataclass
class _Budget:
    """One principal's token bucket and calls in flight."""

    tokens: float
    refilled: float
    running: int = 0


class Limits(Middleware):
    """Per-principal limits on tool calls, and turns: at most ``max_running`` calls run at once,
    the others wait first come, first served. ``principal`` names the caller of the call being
    served (the same function the tools use); a caller it cannot name is left to the tool, which
    refuses it."""

    def __init__(self, limits: LimitSettings, principal: Callable[[], Principal], clock: Callable[[], float] = time.monotonic) -> None:
        self._limits, self._principal, self._clock = limits, principal, clock
        self._budgets: dict[Principal, _Budget] = {}
        self._turns: asyncio.Semaphore | None = None  # made on first use, in the server's event loop

    def _budget(self, who: Principal) -> _Budget:
        now = self._clock()
        budget = self._budgets.get(who)
        if budget is None:
            budget = self._budgets[who] = _Budget(tokens=float(self._limits.burst), refilled=now)
            if len(self._budgets) > MAX_TRACKED:  # forget idle callers whose buckets are full again
                for idle in [p for p, b in self._budgets.items() if not b.running and self._refill(b, now) >= self._limits.burst]:
                    del self._budgets[idle]
        self._refill(budget, now)
        return budget

    def _refill(self, budget: _Budget, now: float) -> float:
        budget.tokens = min(float(self._limits.burst), budget.tokens + (now - budget.refilled) * self._limits.rate_per_s)
        budget.refilled = now
        return budget.tokens

    async def on_call_tool(self, context: MiddlewareContext[Any], call_next: CallNext[Any, Any]) -> Any:
        limits = self._limits
        try:
            who = self._principal()
        except Exception:  # unauthenticated: the tool answers that, within the deadline
            async with asyncio.timeout(limits.deadline_s):
                return await call_next(context)
        budget = self._budget(who)
        if budget.tokens < 1:
            wait = math.ceil((1 - budget.tokens) / limits.rate_per_s * 10) / 10
            raise ToolError(f"rate_limited: more than {limits.rate_per_s:g} calls a second; retry after {wait:.1f} s")
        if budget.running >= limits.max_concurrent:
            raise ToolError(f"rate_limited: {budget.running} of your calls are still running; retry when one has finished")
        budget.tokens -= 1
        budget.running += 1
        if self._turns is None:
            self._turns = asyncio.Semaphore(limits.max_running)
        try:
            async with asyncio.timeout(limits.deadline_s), self._turns:
                return await call_next(context)
        except TimeoutError:
            raise ToolError(f"unavailable: the call took longer than {limits.deadline_s:g} s and was stopped; retry, or ask for less") from None
        finally:
            budget.running -= 1


class BodyLimit:
    """ASGI middleware: an HTTP request whose body is larger than ``max_bytes`` gets 413 before the
    app sees it: by its Content-Length, or, for a body sent in chunks without one, once the chunks
    received pass the cap (they are held until the body is complete, then handed on)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self._app, self._max = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length")
        if declared is not None:
            if not declared.isdigit() or int(declared) > self._max:
                await self._refuse(send)
                return
            await self._app(scope, receive, send)
            return
        if b"transfer-encoding" not in headers:  # no body
            await self._app(scope, receive, send)
            return
        held: list[Message] = []
        size = 0
        while True:
            message = await receive()
            held.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self._max:
                await self._refuse(send)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return held.pop(0) if held else await receive()

        await self._app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        body = f"request body larger than {self._max} bytes".encode()
        await send({"type": "http.response.start", "status": 413, "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
