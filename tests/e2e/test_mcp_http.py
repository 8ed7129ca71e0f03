"""A real MCP client over streamable HTTP against the server on the real stack (OpenFGA, Neo4j,
LightRAG), with bearer tokens. What each user gets back is checked against the Hive permissions."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from functools import partial
from typing import Any

import httpx
import pytest
from fastmcp import Client

from authz.gate import Gate
from core.settings import MCPSettings, Settings
from devstack.serving import serving
from evals.agent import WAYFINDER, run_episode, tool_definitions
from core.providers.gemini import declarations
from mcp_app.auth import StaticTokens, http_identity
from mcp_app.server import create_server, open_services
from tests.conftest import HiveSlice
from tests.e2e.mcp import call_with, strings_in

TOKENS = {user: f"e2e-token-of-{user}".ljust(40, "x") for user in ("alice", "bob", "carol")}
DESIGN_DOCS = "27362075"
DESIGN_DOCS_CHILD = "34019487"  # Correlation Optimizer
DESIGN_QUERIES = ["correlation optimizer", "Hive on Tez design", "column statistics in Hive", "DesignDocs proposals"]
OPEN_QUERIES = ["HiveServer2 LDAP authentication", "schema tool metastore"]
TYPED_ID = re.compile(r"^(page|space):[A-Za-z0-9]+$")


@pytest.fixture(scope="module")
async def mcp_url(indexed, services: Settings):
    observed: list[tuple[str, Gate, dict[str, Any]]] = []
    server = create_server(
        partial(open_services, services),
        http_identity,
        auth=StaticTokens({token: user for user, token in TOKENS.items()}),
        observe=lambda tool, gate, result: observed.append((tool, gate, result)),
    )
    async with serving(server, services.mcp.host, services.mcp.port) as url:
        yield url, observed


@pytest.fixture(scope="module")
async def restricted(hive_slice: HiveSlice) -> set[str]:
    """Ids of the DesignDocs subtree (committers only) in the indexed slice."""
    return {f"page:{DESIGN_DOCS}"} | {f"page:{page.id}" for page in hive_slice.site.descendants(DESIGN_DOCS)}


async def call(url: str, user: str, tool: str, **args: Any) -> dict[str, Any] | str:
    return await call_with(url, TOKENS[user], tool, **args)


def ids_in(value: Any) -> Iterator[str]:
    return (found for found in strings_in(value) if TYPED_ID.match(found))


async def walk_tree(url: str, user: str) -> set[str]:
    """Every page reachable through list_children from the space root."""
    seen: set[str] = set()
    frontier = ["space:HIVE"]
    while frontier:
        node = frontier.pop()
        cursor = None
        while True:
            args = {"id": node, "limit": 7} | ({"cursor": cursor} if cursor else {})
            result = await call(url, user, "list_children", **args)
            assert isinstance(result, dict), result
            for child in result["children"]:
                seen.add(child["id"])
                frontier.append(child["id"])
            cursor = result["next_cursor"]
            if not cursor:
                break
    return seen


async def test_bob_never_sees_the_restricted_subtree(mcp_url, restricted):
    url, _ = mcp_url
    bob_tree, alice_tree = await walk_tree(url, "bob"), await walk_tree(url, "alice")
    assert restricted <= alice_tree  # the control: the subtree exists and is reachable
    assert not bob_tree & restricted and len(bob_tree) > 5
    spaces = await call(url, "bob", "list_spaces")
    assert [s["id"] for s in spaces["spaces"]] == ["space:HIVE"]
    alice_found = set()
    for query in DESIGN_QUERIES:
        bob = await call(url, "bob", "search", query=query, top_k=10, response_format="detailed")
        alice = await call(url, "alice", "search", query=query, top_k=10, response_format="detailed")
        assert not set(ids_in(bob)) & restricted, query
        alice_found |= set(ids_in(alice)) & restricted
    assert alice_found  # alice does find the design documents bob must not see
    for page in sorted(restricted)[:10]:
        assert (await call(url, "bob", "fetch", id=page)).startswith("not_found:")
        assert (await call(url, "alice", "fetch", id=page))["id"] == page


async def test_entities_from_restricted_pages_are_not_shown_to_bob(mcp_url, restricted):
    url, _ = mcp_url
    alice_restricted_entities = 0
    for query in DESIGN_QUERIES:
        bob = await call(url, "bob", "search", query=query, top_k=10, response_format="detailed")
        alice = await call(url, "alice", "search", query=query, top_k=10, response_format="detailed")
        for item in bob["entities"] + bob["relations"]:
            assert item["evidence"] and not set(item["evidence"]) & restricted, item["name"]
        alice_restricted_entities += sum(
            bool(set(item["evidence"]) & restricted) for item in alice["entities"] + alice["relations"]
        )
    assert alice_restricted_entities > 0


async def test_explore_walks_only_what_each_user_may_see(mcp_url, restricted):
    """The Correlation Optimizer page is under DesignDocs: alice explores its entity, bob gets
    what a name found nowhere gets. From open entities, two hops out, bob meets nothing a
    restricted page supports; alice, from the same ones, does."""
    url, _ = mcp_url
    design = await call(url, "alice", "explore", entity="correlation optimizer", limit=10)
    assert design["entity"]["name"] == "Correlation Optimizer" and set(design["entity"]["evidence"]) <= restricted
    assert design["entities"] and design["relations"] and design["notice"]
    hidden = await call(url, "bob", "explore", entity="Correlation Optimizer")
    assert hidden == await call(url, "bob", "explore", entity="Nosuchentity Anywhere") and hidden.startswith("not_found:")
    alice_restricted = 0
    for name in ("HiveServer2", "Beeline", "Kerberos", "LDAP", "hive.metastore.uris", "Derby", "ZooKeeper", "MapReduce"):
        bob = await call(url, "bob", "explore", entity=name, hops=2, limit=50)
        alice = await call(url, "alice", "explore", entity=name, hops=2, limit=50)
        if isinstance(bob, str):
            assert bob.startswith("not_found:"), bob
            continue
        assert bob["entities"], name
        assert not set(ids_in(bob)) & restricted, name
        alice_restricted += sum(bool(set(item["evidence"]) & restricted) for item in alice["entities"] + alice["relations"])
    assert alice_restricted > 0


async def test_hidden_and_missing_pages_give_byte_identical_errors(mcp_url):
    url, _ = mcp_url
    hidden = await call(url, "bob", "fetch", id=f"page:{DESIGN_DOCS}")
    missing = await call(url, "bob", "fetch", id="page:99999999")
    assert hidden == missing and hidden.startswith("not_found:")
    hidden_children = await call(url, "bob", "list_children", id=f"page:{DESIGN_DOCS}")
    missing_children = await call(url, "bob", "list_children", id="page:99999999")
    assert hidden_children == missing_children == hidden


async def test_images_come_with_alt_text_and_only_with_their_page(mcp_url, hive_slice: HiveSlice):
    url, _ = mcp_url
    design_image = "image:att34177453"  # Correlation Optimizer, under DesignDocs
    async with Client(url, auth=TOKENS["alice"]) as client:
        result = await client.call_tool("fetch_image", {"id": design_image})
    picture, about = result.content
    expected = hive_slice.site.attachments["att34177453"]
    assert picture.type == "image" and base64.b64decode(picture.data) == expected.data and picture.mime_type == expected.media_type
    described = json.loads(about.text)
    assert described["page_id"] == "page:34019487" and described["alt_text"]
    fetched = await call(url, "alice", "fetch", id="page:34019487")
    assert f'<img id="{design_image}" alt-text=' in fetched["markdown"]
    hidden = await call(url, "bob", "fetch_image", id=design_image)
    missing = await call(url, "bob", "fetch_image", id="image:att99999999")
    assert hidden.startswith("not_found:") and hidden == missing
    assert (await call(url, "bob", "fetch_image", id="page:34019487")).startswith("invalid_argument:")


async def test_carol_sees_nothing(mcp_url):
    url, _ = mcp_url
    assert (await call(url, "carol", "list_spaces"))["spaces"] == []
    for query in DESIGN_QUERIES + OPEN_QUERIES:
        result = await call(url, "carol", "search", query=query)
        assert result["hits"] == result["entities"] == result["relations"] == []
    assert (await call(url, "carol", "list_children", id="space:HIVE")).startswith("not_found:")
    assert (await call(url, "carol", "fetch", id="page:30758712")).startswith("not_found:")


async def test_bob_finds_open_pages(mcp_url):
    url, _ = mcp_url
    result = await call(url, "bob", "search", query="HiveServer2 LDAP authentication", top_k=5)
    assert result["hits"], "bob should find the HiveServer2 pages"
    page = await call(url, "bob", "fetch", id=result["hits"][0]["id"])
    assert page["markdown"] and page["outline"] and page["notice"]


async def test_every_returned_id_was_checked_and_allowed(mcp_url):
    url, observed = mcp_url
    for query in DESIGN_QUERIES + OPEN_QUERIES:
        await call(url, "bob", "search", query=query, response_format="detailed")
    await call(url, "bob", "fetch", id="page:58852417")
    await call(url, "bob", "explore", entity="Beeline", hops=2)
    await walk_tree(url, "bob")
    assert {tool for tool, _, _ in observed} >= {"search", "fetch", "list_spaces", "list_children", "explore"}
    for tool, gate, result in observed:
        returned = set(ids_in(result))
        allowed = {r.object for r in gate.records if r.allowed}
        assert returned <= allowed, (tool, returned - allowed)


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}


async def test_unknown_token_is_rejected_with_401_and_a_known_one_accepted(mcp_url):
    url, _ = mcp_url
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with httpx.AsyncClient(timeout=10) as http:
        for token in ("not-a-token", TOKENS["alice"][:-1], "x" * 40):
            refused = await http.post(url, json=INITIALIZE, headers=headers | {"Authorization": f"Bearer {token}"})
            assert refused.status_code == 401 and "wayfinder" not in refused.text.lower()
        accepted = await http.post(url, json=INITIALIZE, headers=headers | {"Authorization": f"Bearer {TOKENS['alice']}"})
        assert accepted.status_code == 200


async def test_a_foreign_host_or_origin_is_refused_even_with_a_valid_token(mcp_url):
    """DNS rebinding: a web page whose own name was rebound to the server's address sends that name
    in Host (and Origin). The server answers neither, whatever the token; its own name, a loopback
    one and a same-origin browser call pass."""
    url, _ = mcp_url
    own = httpx.URL(url)
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {TOKENS['alice']}",
    }
    async with httpx.AsyncClient(timeout=10) as http:
        rebound = await http.post(url, json=INITIALIZE, headers=headers | {"Host": f"attacker.example:{own.port}"})
        foreign = await http.post(url, json=INITIALIZE, headers=headers | {"Origin": "http://attacker.example"})
        for refused, status in ((rebound, 421), (foreign, 403)):
            assert refused.status_code == status and "wayfinder" not in refused.text.lower()
        for passing in ({"Host": f"localhost:{own.port}"}, {"Origin": f"http://{own.host}:{own.port}"}):
            assert (await http.post(url, json=INITIALIZE, headers=headers | passing)).status_code == 200


async def test_a_request_body_over_the_cap_is_refused_before_mcp_reads_it(mcp_url):
    url, _ = mcp_url
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {TOKENS['alice']}",
    }
    cap = MCPSettings().limits.max_request_bytes
    padded = INITIALIZE | {"params": INITIALIZE["params"] | {"padding": "x" * cap}}
    async with httpx.AsyncClient(timeout=10) as http:
        refused = await http.post(url, json=padded, headers=headers)
        assert refused.status_code == 413 and "serverInfo" not in refused.text
        assert (await http.post(url, json=INITIALIZE, headers=headers)).status_code == 200


async def test_a_long_page_is_fetched_in_parts_that_add_up_to_the_whole(mcp_url):
    url, _ = mcp_url
    whole = await call(url, "alice", "fetch", id="page:34019487")
    assert whole["next_cursor"] is None
    parts, cursor = [], None
    while True:
        part = await call(url, "alice", "fetch", id="page:34019487", max_tokens=400, **({"cursor": cursor} if cursor else {}))
        parts.append(part)
        cursor = part["next_cursor"]
        if cursor is None:
            break
    assert len(parts) > 3 and "".join(p["markdown"] for p in parts) == whole["markdown"]
    assert parts[0]["outline"] == whole["outline"] and all(p["outline"] == [] for p in parts[1:])
    # bob may not see the page: its cursor gives him what a missing page gives, nothing more
    assert (await call(url, "bob", "fetch", id="page:34019487", cursor=parts[0]["next_cursor"])).startswith("not_found:")


MODERN = "2026-07-28"
MODERN_META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


async def modern_call(url: str, method: str, params: dict[str, Any], token: str | None) -> httpx.Response:
    """One stateless request of the 2026-07-28 revision: no initialize, no session."""
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    if method == "tools/call":
        headers["Mcp-Name"] = params["name"]
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient(timeout=30) as http:
        return await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params | {"_meta": MODERN_META}}, headers=headers)


async def test_each_supported_revision_is_served_through_the_same_gate(mcp_url):
    """Clients of 2025-06-18 and 2025-11-25 initialize a session as before; a 2026-07-28 client
    sends stateless requests (server/discover, then tools) with the same token checks and the
    same answers per user."""
    url, _ = mcp_url
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json", "Authorization": f"Bearer {TOKENS['alice']}"}
    async with httpx.AsyncClient(timeout=30) as http:
        for revision in ("2025-06-18", "2025-11-25"):
            hello = INITIALIZE | {"params": INITIALIZE["params"] | {"protocolVersion": revision}}
            answer = await http.post(url, json=hello, headers=headers)
            assert answer.status_code == 200 and f'"protocolVersion":"{revision}"' in answer.text

    discovered = await modern_call(url, "server/discover", {}, TOKENS["alice"])
    assert discovered.status_code == 200 and MODERN in discovered.json()["result"]["supportedVersions"]
    assert (await modern_call(url, "server/discover", {}, None)).status_code == 401

    fetch = {"name": "fetch", "arguments": {"id": f"page:{DESIGN_DOCS}"}}
    alice = (await modern_call(url, "tools/call", fetch, TOKENS["alice"])).json()["result"]
    bob = (await modern_call(url, "tools/call", fetch, TOKENS["bob"])).json()["result"]
    assert alice["isError"] is False and alice["structuredContent"]["id"] == f"page:{DESIGN_DOCS}"
    assert bob["isError"] is True and bob["content"][0]["text"].startswith("not_found:")


async def test_the_evaluations_scripted_agent_reaches_a_page_only_its_user_may_see(mcp_url, restricted):
    """`wayfinder eval`'s agent over real HTTP: alice opens the design page the search ranks first
    in two calls; bob's walk opens only pages he may see and never reaches it."""
    url, _ = mcp_url
    gold = [f"page:{DESIGN_DOCS_CHILD}"]
    async with Client(url, auth=TOKENS["alice"]) as client:
        alice = await run_episode(client, WAYFINDER, "q", "correlation optimizer design", gold)
        definitions = json.loads(await tool_definitions(client))
        converted = declarations(await client.list_tools())  # for the Gemini agent loop
    assert alice.solved_at == 2 and alice.opened == gold and alice.errors == 0
    assert "Correlation Optimizer" in alice.texts[1]
    assert {tool["name"] for tool in definitions} >= {"search", "fetch"} and len(converted) == len(definitions)
    assert all(p.type is not None for d in converted for p in (d.parameters.properties or {}).values())
    async with Client(url, auth=TOKENS["bob"]) as client:
        bob = await run_episode(client, WAYFINDER, "q", "correlation optimizer design", gold)
    assert bob.solved_at is None and bob.opened and not set(bob.opened) & restricted
