"""Per-principal limits on tool calls (rate, concurrency, deadline) through a real FastMCP server
in memory, and the request body cap on the ASGI app."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastmcp import Client, FastMCP
from fastmcp.exceptions import ToolError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from core.models import Principal
from core.settings import LimitSettings
from mcp_app.errors import ErrorMapping
from mcp_app.limits import BodyLimit, Limits


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def limited(limits: LimitSettings, caller: list[str], clock: Clock, release: asyncio.Event | None = None) -> FastMCP:
    server = FastMCP("limited", middleware=[ErrorMapping(), Limits(limits, lambda: Principal(user=caller[0]), clock)])

    @server.tool
    async def ping() -> str:
        return "pong"

    @server.tool
    async def slow() -> str:
        if release is not None:
            await release.wait()
        else:
            await asyncio.sleep(5)
        return "done"

    return server


async def test_a_principal_over_its_rate_is_told_when_to_retry_and_others_are_not_held_up() -> None:
    caller, clock = ["alice"], Clock()
    async with Client(limited(LimitSettings(rate_per_s=2, burst=3), caller, clock)) as client:
        for _ in range(3):
            assert (await client.call_tool("ping")).data == "pong"
        with pytest.raises(ToolError, match=r"rate_limited: .*retry after 0\.5 s"):
            await client.call_tool("ping")
        caller[0] = "bob"  # another principal has a budget of its own
        assert (await client.call_tool("ping")).data == "pong"
        caller[0], clock.now = "alice", clock.now + 0.5  # one call's worth refilled
        assert (await client.call_tool("ping")).data == "pong"
        with pytest.raises(ToolError, match="rate_limited"):
            await client.call_tool("ping")


async def test_calls_beyond_the_concurrency_cap_are_refused_until_one_finishes() -> None:
    release = asyncio.Event()
    async with Client(limited(LimitSettings(max_concurrent=2), ["alice"], Clock(), release)) as client:
        running = [asyncio.create_task(client.call_tool("slow")) for _ in range(2)]
        await asyncio.sleep(0.2)
        with pytest.raises(ToolError, match="rate_limited: 2 of your calls are still running"):
            await client.call_tool("ping")
        release.set()
        assert [r.data for r in await asyncio.gather(*running)] == ["done", "done"]
        assert (await client.call_tool("ping")).data == "pong"


async def test_calls_past_the_servers_turns_wait_first_come_first_served() -> None:
    release = asyncio.Event()
    caller = ["alice"]
    server = limited(LimitSettings(max_running=2), caller, Clock(), release)
    async with Client(server) as client:
        running = []
        for user in ("alice", "bob"):  # two principals fill the server's turns
            caller[0] = user
            running.append(asyncio.create_task(client.call_tool("slow")))
            await asyncio.sleep(0.1)
        finished: list[str] = []

        async def ping(user: str) -> None:
            await client.call_tool("ping")
            finished.append(user)

        waiting = []
        for user in ("carol", "dave", "erin"):  # anyone else waits, in the order they came
            caller[0] = user
            waiting.append(asyncio.create_task(ping(user)))
            await asyncio.sleep(0.1)
        assert finished == []
        release.set()
        await asyncio.gather(*running, *waiting)
    assert finished == ["carol", "dave", "erin"]


async def test_a_call_past_its_deadline_is_stopped_and_answers_unavailable() -> None:
    async with Client(limited(LimitSettings(deadline_s=0.2), ["alice"], Clock())) as client:
        with pytest.raises(ToolError, match=r"unavailable: the call took longer than 0\.2 s"):
            await client.call_tool("slow")
        assert (await client.call_tool("ping")).data == "pong"  # the stopped call no longer counts


async def test_a_request_body_over_the_cap_gets_413_before_the_app_reads_it() -> None:
    read: list[int] = []

    async def echo(request: Request) -> PlainTextResponse:
        read.append(len(await request.body()))
        return PlainTextResponse("ok")

    app = BodyLimit(Starlette(routes=[Route("/mcp", echo, methods=["POST"])]), max_bytes=1024)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        assert (await client.post("/mcp", content=b"x" * 1024)).status_code == 200
        assert (await client.post("/mcp", content=b"x" * 1025)).status_code == 413

        async def streamed(chunks: int):  # no Content-Length: counted as it arrives
            for _ in range(chunks):
                yield b"x" * 400

        assert (await client.post("/mcp", content=streamed(3))).status_code == 413
        assert (await client.post("/mcp", content=streamed(2))).status_code == 200
    assert read == [1024, 800]
