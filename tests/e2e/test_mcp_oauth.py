"""The MCP server as an OAuth resource server over real HTTP, on the real stack: JWTs signed by a
provider whose key set is served over HTTP, the protected-resource metadata (RFC 9728) at the path
the MCP authorization spec gives, and a 401 with a ``WWW-Authenticate`` challenge naming it for
every token it must refuse."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from fastmcp import Client

from core.settings import MCPSettings, OAuthSettings, Settings
from devstack.serving import serving
from mcp_app.auth import http_auth, http_identity
from mcp_app.server import create_server, open_services
from tests import tokens
from tests.e2e.mcp import call_with, strings_in
from tests.tokens import ISSUER, OTHER_KEY

HOST, PORT = "127.0.0.1", 29766
RESOURCE = f"http://{HOST}:{PORT}/mcp"
METADATA = f"http://{HOST}:{PORT}/.well-known/oauth-protected-resource/mcp"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}},
}


@pytest.fixture(scope="module")
def jwks_uri() -> Iterator[str]:
    """The provider's key set, over HTTP on loopback."""
    body = json.dumps(tokens.jwks()).encode()

    class KeySet(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200 if self.path == "/jwks.json" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body if self.path == "/jwks.json" else b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((HOST, 0), KeySet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{HOST}:{server.server_address[1]}/jwks.json"
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


@pytest.fixture(scope="module")
async def oauth_url(indexed, services: Settings, jwks_uri: str):
    oauth = OAuthSettings(issuer=ISSUER, jwks_uri=jwks_uri, tool_scopes={"fetch": ["wayfinder:read"]})
    mcp = MCPSettings(host=HOST, port=PORT, oauth=oauth)
    server = create_server(
        partial(open_services, services), http_identity, auth=http_auth(mcp), observe=lambda *_: None, tool_scopes=oauth.tool_scopes
    )
    async with serving(server, HOST, PORT) as url:
        yield url


async def test_a_provider_token_for_this_server_reads_as_its_user(oauth_url: str) -> None:
    spaces = await call_with(oauth_url, tokens.mint(RESOURCE), "list_spaces")
    assert isinstance(spaces, dict) and "space:HIVE" in set(strings_in(spaces))


async def test_a_tool_with_a_scope_is_seen_and_called_only_with_that_scope(oauth_url: str) -> None:
    fetch = {"id": "page:27362075"}  # DesignDocs, which alice may read
    for scope, shown in ((None, False), ("openid", False), ("openid wayfinder:read", True)):
        token = tokens.mint(RESOURCE, scope=scope)
        async with Client(oauth_url, auth=token) as client:
            names = {tool.name for tool in await client.list_tools()}
            assert ("fetch" in names) is shown and "search" in names, scope
        answer = await call_with(oauth_url, token, "fetch", **fetch)
        if shown:
            assert isinstance(answer, dict) and answer["id"] == fetch["id"], scope
        else:  # the same answer as for a tool that does not exist
            assert answer == "invalid_argument: no tool named 'fetch'; see tools/list", scope


async def test_the_metadata_names_this_resource_and_its_authorization_server(oauth_url: str) -> None:
    async with httpx.AsyncClient() as client:
        metadata = (await client.get(METADATA)).raise_for_status().json()
    assert metadata["resource"] == RESOURCE
    assert metadata["authorization_servers"] == [ISSUER]


@pytest.mark.parametrize(
    ("why", "token"),
    [
        ("no token", lambda: None),
        ("expired", lambda: tokens.mint(RESOURCE, exp=1)),
        ("another audience", lambda: tokens.mint("https://other-service.example.com/mcp")),
        ("another issuer", lambda: tokens.mint(RESOURCE, iss="https://evil.example.com/")),
        ("another key under the provider's kid", lambda: tokens.mint(RESOURCE, key=OTHER_KEY)),
        ("unsigned, alg=none", lambda: tokens.forged(RESOURCE, "none")),
        ("HS256 keyed with the public key", lambda: tokens.forged(RESOURCE, "HS256")),
    ],
)
async def test_a_refused_token_gets_401_a_challenge_and_no_data(oauth_url: str, why: str, token: Any) -> None:
    presented = token()
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if presented is not None:
        headers["Authorization"] = f"Bearer {presented}"
    async with httpx.AsyncClient() as client:
        response = await client.post(oauth_url, json=INITIALIZE, headers=headers)
    assert response.status_code == 401, why
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and f'resource_metadata="{METADATA}"' in challenge, why
    assert "serverInfo" not in response.text and "HIVE" not in response.text
