"""The demo: sync the Hive space and the HIVE Jira project over REST from the emulator, serve
them over HTTP, and show what three users see."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import socket
import subprocess
import sys
import time

from fastmcp import Client
from fastmcp.exceptions import ToolError
from rich.console import Console
from rich.table import Table

from core.errors import ServiceError
from core.settings import Settings
from devstack.atlassian.hive_jira import FIRST_EPIC

USERS = ("alice", "bob", "carol")
RESTRICTED_PAGE = "page:27362075"  # DesignDocs: committers only
MISSING_PAGE = "page:99999999"
EPIC = f"issue:HIVE-{FIRST_EPIC}"  # the first epic of the emulator's HIVE Jira project (IndexDev Bitmap), open to all
SECURED_PATH = "HIVE/DesignDocs"  # the restricted page, and the epic of the issues it cites (level Security)
QUESTIONS = ("How do I configure HiveServer2 with LDAP authentication?", "correlation optimizer design")
AGENT = {"user": "alice", "agent": "digest-bot", "task": "demo-digest"}


def run_demo(settings: Settings, console: Console, *, start_services: bool = True) -> None:
    from devstack import stack
    from devstack.atlassian.service import sync_configured

    # Without external services the whole stack starts here; with them, still the Confluence
    # emulator when no real site is configured.
    only = None if start_services else ({"confluence"} if settings.confluence.emulated else set())
    for status in stack.up(settings, only=only):
        console.print(f"{status.name}: {status.detail}")
    asyncio.run(sync_configured(settings, console))
    tokens = {user: secrets.token_urlsafe(32) for user in USERS}
    agent_token = secrets.token_urlsafe(32)
    served = {token: user for user, token in tokens.items()} | {agent_token: AGENT}
    server = start_server(settings.model_copy(update={"mcp": settings.mcp.model_copy(update={"tokens": served})}))
    try:
        wait_for_port(settings.mcp.host, settings.mcp.port, server, timeout=120)
        url = f"http://{settings.mcp.host}:{settings.mcp.port}/mcp"
        asyncio.run(show_views(url, tokens, console))
        asyncio.run(show_delegation(url, agent_token, settings, console))
        peak = resident_mib(server.pid, "VmHWM")
        if peak is not None:
            console.print(f"MCP server peak memory (VmHWM): {peak:.0f} MiB")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)


def start_server(settings: Settings) -> subprocess.Popen[bytes]:
    """``wayfinder serve --transport http`` as a child process on exactly ``settings``."""
    env = dict(os.environ) | settings.as_environment()
    with open(settings.data_dir / "mcp-server.log", "ab") as log:  # the child keeps its own copy
        return subprocess.Popen(
            [sys.executable, "-m", "cli", "serve", "--transport", "http"], env=env, stdout=log, stderr=log
        )


def wait_for_port(host: str, port: int, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServiceError(f"the MCP server exited with code {process.returncode}; see mcp-server.log")
        with socket.socket() as probe:
            if probe.connect_ex((host, port)) == 0:
                return
        time.sleep(0.3)
    raise ServiceError(f"the MCP server did not listen on {host}:{port} within {timeout:.0f}s")


def resident_mib(pid: int, field: str) -> float | None:
    """``VmRSS`` (resident now) or ``VmHWM`` (peak) of a process, in MiB."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


async def _call(client: Client, tool: str, **arguments: object) -> dict | str:
    try:
        return (await client.call_tool(tool, arguments)).structured_content
    except ToolError as exc:
        return str(exc)


async def show_views(url: str, tokens: dict[str, str], console: Console) -> None:
    for user in USERS:
        async with Client(url, auth=tokens[user]) as client:
            table = Table(title=f"what {user} sees", show_lines=True)
            table.add_column("call", style="bold")
            table.add_column("result")
            spaces = await _call(client, "list_spaces")
            table.add_row("list_spaces()", _brief(spaces, "spaces", "key"))
            tops = await _call(client, "list_children", id="space:HIVE", limit=5)
            table.add_row("list_children('space:HIVE', limit=5)", _brief(tops, "children", "title"))
            for question in QUESTIONS:
                found = await _call(client, "search", query=question, top_k=3)
                table.add_row(f"search({question!r})", _brief(found, "hits", "title"))
            for page in (RESTRICTED_PAGE, MISSING_PAGE):
                fetched = await _call(client, "fetch", id=page)
                shown = fetched if isinstance(fetched, str) else f"{fetched['title']} ({len(fetched['markdown'])} chars)"
                table.add_row(f"fetch({page!r})", shown)
            # Jira: the project's first epics, one epic's issues, and a path that names both a
            # restricted page and a secured epic (only alice sees either).
            for node in ("project:HIVE", EPIC):
                tree = await _call(client, "get_tree", id=node, depth=1, limit=4)
                children = tree if isinstance(tree, str) else {"children": tree["root"]["children"]}
                table.add_row(f"get_tree({node!r}, depth=1, limit=4)", _brief(children, "children", "title"))
            resolved = await _call(client, "resolve_path", path=SECURED_PATH)
            table.add_row(f"resolve_path({SECURED_PATH!r})", _brief(resolved, "candidates", "title"))
            console.print(table)


async def show_delegation(url: str, token: str, settings: Settings, console: Console) -> None:
    """An agent acting for alice: nothing without a grant, alice's view with one, nothing once revoked."""
    from datetime import timedelta

    from authz import grants
    from authz.client import OpenFGAClient

    agent, user, task = AGENT["agent"], AGENT["user"], AGENT["task"]
    table = Table(title=f"{agent} acting for {user} on task {task!r}", show_lines=True)
    table.add_column("step", style="bold")
    table.add_column("result")
    async with OpenFGAClient(settings.openfga) as store, Client(url, auth=token) as client:
        await grants.revoke(store, user, agent, task)
        table.add_row("no grant: list_spaces()", _brief(await _call(client, "list_spaces"), "spaces", "key"))
        made = await grants.grant(store, user, agent, task, timedelta(hours=1))
        table.add_row(f"grant until {made.expires_at:%H:%M} UTC", "wayfinder grants add alice digest-bot demo-digest --ttl 1h")
        found = await _call(client, "search", query=QUESTIONS[1], top_k=3)
        table.add_row(f"search({QUESTIONS[1]!r})", _brief(found, "hits", "title"))
        await grants.revoke(store, user, agent, task)
        table.add_row("revoked: list_spaces()", _brief(await _call(client, "list_spaces"), "spaces", "key"))
    console.print(table)


def _brief(result: dict | str, key: str, field: str) -> str:
    if isinstance(result, str):
        return result
    items = result[key]
    return "\n".join(f"{item['id']}  {item[field]}" for item in items) if items else "(nothing)"
