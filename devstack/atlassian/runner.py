"""Serve an :class:`~devstack.atlassian.admin.Emulator` over real HTTP on loopback, in a thread of
this process (unit tests) — the devstack runs the same app as a process of its own."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from starlette.types import ASGIApp

from devstack.atlassian.admin import Emulator
from devstack.atlassian.server import create_app

STARTUP_TIMEOUT_S = 10.0


@contextmanager
def serving(emulator: Emulator, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Yield the emulator's root URL (``http://127.0.0.1:<port>``) while it serves."""
    with serving_app(create_app(emulator), host, port) as url:
        yield url


@contextmanager
def serving_app(app: ASGIApp, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve any ASGI app (the emulator, a fake Gemini) on loopback in a thread."""
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="atlassian-emulator", daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the local server did not start on {host}:{port}")
        time.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        thread.join(STARTUP_TIMEOUT_S)
