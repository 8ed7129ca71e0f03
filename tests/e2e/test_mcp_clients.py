"""Wayfinder's HTTP server against the official MCP conformance suite, and the MCP Inspector CLI
as a real client over HTTP and stdio (both from npm, pinned in devstack/mcp-clients, run on the
Node.js 22 installed beside them).

The suite cannot send a bearer token, so its server sits behind an ASGI layer that adds alice's
token to requests that carry none: the token check, the Host/Origin checks and the gate all run
as in production. Scenarios that test the suite's own fixture tools, prompts and resources
(``tools-call-image``, ``prompts-get-simple``, …) do not apply to a server with other tools."""

from __future__ import annotations

import asyncio
import json
import sys
from functools import partial
from pathlib import Path

import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from core.settings import Settings
from devstack.peers import mcp_clients, node_environment
from devstack.serving import serving
from mcp_app.auth import StaticTokens, http_identity
from mcp_app.server import create_server, open_services
from tests.conftest import REPO
from tests.e2e.test_mcp_http import modern_call
from tests.e2e.test_stdio import environment

pytestmark = pytest.mark.timeout(300)

TOKENS = {user: f"clients-token-of-{user}".ljust(40, "x") for user in ("alice", "bob")}
DESIGN_DOCS = "page:27362075"  # committers only: alice may read it, bob may not
EXPECTED_FAILURES = Path(__file__).with_name("conformance-expected-failures.yml")
TOOLS_LIST_BUDGET = 2000  # o200k tokens: what every agent pays for the tool definitions, each session
STATEFUL = "2025-11-25"  # the initialize handshake (2025-06-18 clients run the same lifecycle)
STATELESS = "2026-07-28"  # per-request _meta, server/discover
SCENARIOS = [
    *[(STATEFUL, name) for name in (
        "server-initialize", "ping", "logging-set-level", "server-session-lifecycle", "tools-list",
        "tools-call-error", "dns-rebinding-protection", "resources-list", "prompts-list",
        "server-sse-multiple-streams",
    )],
    *[(STATELESS, name) for name in (
        "server-stateless", "tools-list", "tools-call-error", "dns-rebinding-protection",
        "http-header-validation", "caching", "sep-2164-resource-not-found", "resources-list",
        "prompts-list", "server-sse-multiple-streams",
    )],
]


class WithBearer:
    """Adds ``Authorization: Bearer <token>`` to HTTP requests that have no such header."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.header = app, (b"authorization", f"Bearer {token}".encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not any(name == b"authorization" for name, _ in scope["headers"]):
            scope = dict(scope, headers=[*scope["headers"], self.header])
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def clients(settings: Settings) -> Path:
    return mcp_clients(settings)


@pytest.fixture(scope="module")
async def url(indexed, services: Settings):
    """The server (one per process: it holds the index open); requests without a token are
    alice's, the Inspector's carry their own."""
    server = create_server(
        partial(open_services, services),
        http_identity,
        auth=StaticTokens({token: user for user, token in TOKENS.items()}),
        observe=lambda *_: None,
    )
    async with serving(server, services.mcp.host, 0, wrap=partial(WithBearer, token=TOKENS["alice"])) as served:
        yield served


async def run(argv: list[str], *, cwd: Path, env: dict[str, str], stdin: bytes | None = None) -> tuple[int, str, str]:
    """Run a client without blocking the event loop the server under test runs in: its exit
    code, standard output and standard error."""
    process = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(stdin), timeout=240)
    return process.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace")


@pytest.mark.parametrize(("revision", "scenario"), SCENARIOS, ids=[f"{r}-{s}" for r, s in SCENARIOS])
async def test_conformance_scenario(clients: Path, url: str, tmp_path: Path, revision: str, scenario: str):
    argv = [
        str(clients / "node_modules" / ".bin" / "conformance"), "server", "--url", url,
        "--scenario", scenario, "--spec-version", revision, "--expected-failures", str(EXPECTED_FAILURES),
        "--output-dir", str(tmp_path),
    ]
    code, output, errors = await run(argv, cwd=tmp_path, env=node_environment(clients))
    assert code == 0, output[-6000:] + errors[-2000:]
    (checks_file,) = tmp_path.glob(f"server-{scenario}-*/checks.json")
    statuses = [check["status"] for check in json.loads(checks_file.read_text())]
    assert "SUCCESS" in statuses, output[-3000:]  # the scenario ran against this revision


async def inspector(
    clients: Path, target: str, *options: str, tool: str, server_args: tuple[str, ...] = (), env: dict[str, str] | None = None, **args: str
) -> dict:
    """One ``tools/call`` made by the Inspector's CLI to ``target`` (a URL, or a command run with
    ``server_args``); its printed result. The CLI is started directly (the
    ``mcp-inspector-cli`` launcher drops the ``--`` that keeps a server's own flags away from the
    CLI's), from a folder whose parent holds a package.json (the CLI reads its version from
    ``../package.json`` relative to the working directory)."""
    modules = clients / "node_modules"
    cli = modules / "@modelcontextprotocol" / "inspector-cli" / "build" / "index.js"
    argv = [str(modules / ".bin" / "node"), str(cli), target, *options, "--method", "tools/call", "--tool-name", tool]
    argv += ["--tool-arg", *(f"{key}={value}" for key, value in args.items())] if args else []
    argv += ["--", *server_args] if server_args else []
    code, output, errors = await run(argv, cwd=modules, env=node_environment(clients) | (env or {}))
    assert code == 0, output[-3000:] + errors[-3000:]
    return json.loads(output)


async def test_inspector_over_http_reads_as_the_tokens_user(clients: Path, url: str):
    def http(user: str) -> list[str]:
        return [url, "--transport", "http", "--header", f"Authorization: Bearer {TOKENS[user]}"]

    alice = await inspector(clients, *http("alice"), tool="fetch", id=DESIGN_DOCS, max_tokens="200")
    assert alice["structuredContent"]["title"] == "DesignDocs" and alice["structuredContent"]["next_cursor"]
    bob = await inspector(clients, *http("bob"), tool="fetch", id=DESIGN_DOCS)
    assert bob["isError"] and bob["content"][0]["text"].startswith("not_found:")
    found = await inspector(clients, *http("bob"), tool="search", query="HiveServer2 LDAP authentication")
    assert found["structuredContent"]["hits"] and DESIGN_DOCS not in json.dumps(found)


async def test_inspector_over_stdio_reads_as_the_configured_user(clients: Path, indexed, services: Settings):
    serve = ("-m", "cli", "serve", "--transport", "stdio")
    stdio_env = environment(services, "alice") | {"PYTHONPATH": str(REPO)}
    stdio_env = {key: value for key, value in stdio_env.items() if key.startswith(("WAYFINDER_", "PYTHON"))}
    alice = await inspector(clients, sys.executable, tool="list_spaces", server_args=serve, env=stdio_env)
    assert [space["id"] for space in alice["structuredContent"]["spaces"]] == ["space:HIVE"]
    page = await inspector(clients, sys.executable, tool="fetch", server_args=serve, env=stdio_env | {"WAYFINDER_MCP__STDIO_PRINCIPAL": "bob"}, id=DESIGN_DOCS)
    assert page["isError"] and page["content"][0]["text"].startswith("not_found:")


async def test_tools_list_fits_an_agents_context(clients: Path, url: str):
    """The whole tools/list answer as it crosses the wire, counted with OpenAI's o200k_base
    encoding (js-tiktoken), stays within the budget."""
    listed = await modern_call(url, "tools/list", {}, TOKENS["alice"])
    assert listed.status_code == 200 and len(listed.json()["result"]["tools"]) == 10
    modules = clients / "node_modules"
    code, output, errors = await run(
        [str(modules / ".bin" / "node"), str(clients / "count-tokens.mjs")], cwd=clients, env=node_environment(clients), stdin=listed.content
    )
    assert code == 0, errors[-2000:]
    assert 0 < int(output) <= TOOLS_LIST_BUDGET, f"tools/list is {int(output)} tokens"
