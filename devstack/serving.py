"""Serve an MCP server (or any ASGI app) over HTTP inside the current event loop (leak suite, benchmarks,
tests), so the caller can compose it with its own authorizer and stop it deterministically."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import uvicorn
from fastmcp import FastMCP
from starlette.types import ASGIApp

from core.errors import ServiceError
from core.settings import MCPSettings
from mcp_app.server import http_guard

START_DEADLINE_S = 120


@asynccontextmanager
async def serving(
    server: FastMCP, host: str, port: int, *, wrap: Callable[[ASGIApp], ASGIApp] | None = None
) -> AsyncIterator[str]:
    """Run ``server`` at ``http://host:port/mcp`` (the URL is yielded) until the block ends, with
    the Host and Origin checks of ``wayfinder serve``; ``wrap`` puts an ASGI layer in front of the
    whole app (a test's). Port 0 takes a free port."""
    app: ASGIApp = server.http_app(path="/mcp", **http_guard(MCPSettings()))
    async with serving_asgi(wrap(app) if wrap else app, host, port, lifespan="on") as base:
        yield f"{base}/mcp"


@asynccontextmanager
async def serving_asgi(app: ASGIApp, host: str, port: int, *, lifespan: str = "off") -> AsyncIterator[str]:
    """Run any ASGI app in this event loop until the block ends; yields ``http://host:port``."""
    config = uvicorn.Config(app, host=host, port=port, lifespan=lifespan, log_level="warning")
    uv = uvicorn.Server(config)
    task = asyncio.create_task(uv.serve())
    try:
        for _ in range(int(START_DEADLINE_S / 0.05)):
            if uv.started or task.done():
                break
            await asyncio.sleep(0.05)
        if not uv.started:
            raise ServiceError(f"the local server did not start on {host}:{port}")
        bound = uv.servers[0].sockets[0].getsockname()[1] if port == 0 else port
        yield f"http://{host}:{bound}"
    finally:
        uv.should_exit = True
        await task
