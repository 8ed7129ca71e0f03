"""The stdio transport acts for the one configured user, and refuses to start without one."""

from __future__ import annotations

import os
import subprocess
import sys

from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from core.settings import Settings
from tests.conftest import REPO


def environment(settings: Settings, principal: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAYFINDER_")}
    env |= {
        "WAYFINDER_DATA_DIR": str(settings.data_dir),
        "WAYFINDER_CORPUS_DIR": str(settings.corpus_dir),
        "WAYFINDER_OPENFGA__HTTP_PORT": str(settings.openfga.http_port),
        "WAYFINDER_OPENFGA__STORE_NAME": settings.openfga.store_name,
        "WAYFINDER_NEO4J__BOLT_PORT": str(settings.neo4j.bolt_port),
        "WAYFINDER_NEO4J__PASSWORD": settings.neo4j.password.get_secret_value(),
        "WAYFINDER_LIGHTRAG__WORKSPACE": settings.lightrag.workspace,
    }
    if principal:
        env["WAYFINDER_MCP__STDIO_PRINCIPAL"] = principal
    return env


def stdio_client(settings: Settings, principal: str) -> Client:
    transport = StdioTransport(
        command=sys.executable,
        args=["-m", "cli", "serve", "--transport", "stdio"],
        env=environment(settings, principal),
        cwd=str(REPO),
    )
    return Client(transport)


async def test_stdio_serves_the_configured_user_only(indexed, services: Settings):
    async with stdio_client(services, "alice") as alice:
        spaces = (await alice.call_tool("list_spaces", {})).structured_content["spaces"]
        page = (await alice.call_tool("fetch", {"id": "page:27362075"})).structured_content
    assert [s["id"] for s in spaces] == ["space:HIVE"] and page["title"] == "DesignDocs"
    async with stdio_client(services, "carol") as carol:
        assert (await carol.call_tool("list_spaces", {})).structured_content["spaces"] == []


def test_stdio_without_a_principal_refuses_to_start(services: Settings):
    run = subprocess.run(
        [sys.executable, "-m", "cli", "serve", "--transport", "stdio"],
        env=environment(services, None), cwd=REPO, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 1
    assert "WAYFINDER_MCP__STDIO_PRINCIPAL" in run.stderr
