"""The peer the evaluations compare against: PyPI mcp-atlassian, unmodified, as a real MCP server
over stdio, reads the emulator as it would a Data Center site — Confluence search, get page, page
children; Jira search and get issue — and, in its Cloud mode, as a Cloud site: a peer that works
with real Cloud sites works with the emulator's Cloud face."""

from __future__ import annotations

import json

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from core.settings import Settings
from devstack.atlassian.admin import Emulator
from devstack.atlassian.hive import TOKENS, seed_hive
from devstack.atlassian.hive_jira import seed_hive_jira
from devstack.atlassian.runner import serving
from devstack.atlassian.site import Site
from devstack.peers import mcp_atlassian, mcp_atlassian_environment
from evals.agent import MCP_ATLASSIAN, run_episode
from core.providers.gemini import declarations
from devstack.atlassian.export import DESIGN_DOCS_PAGE, SINGLE_USER_PAGE
from tests.conftest import CORPUS

HOME = "27362069"


@pytest.fixture(scope="module")
async def hive() -> Site:
    """The Hive space and project, which the peers only read."""
    site = Site()
    await seed_hive(site, CORPUS)
    await seed_hive_jira(site, CORPUS)
    return site


@pytest.fixture(scope="module")
async def peer(settings: Settings, hive: Site, tmp_path_factory: pytest.TempPathFactory):
    site = hive
    script = mcp_atlassian(settings)
    workdir = tmp_path_factory.mktemp("mcp-atlassian")  # empty: it would read ./.env over its environment
    with serving(Emulator(site, "unused-admin-token")) as url:
        transport = StdioTransport(
            str(script), ["--transport", "stdio"], env=mcp_atlassian_environment(url + "/confluence", token=TOKENS["bob"], jira_url=url + "/jira"), cwd=str(workdir)
        )
        async with Client(transport, timeout=60) as client:
            yield client


# mcp-atlassian decides Cloud by the host name: the emulator's Cloud face gets one that its
# process resolves to loopback (and only there).
CLOUD_HOST = "wayfinder-emulated.atlassian.net"
RESOLVER = f"""import socket
_resolve = socket.getaddrinfo
def _loopback(host, *args, **kwargs):
    return _resolve("127.0.0.1" if host == {CLOUD_HOST!r} else host, *args, **kwargs)
socket.getaddrinfo = _loopback
"""


@pytest.fixture(scope="module")
async def cloud_peer(settings: Settings, hive: Site, tmp_path_factory: pytest.TempPathFactory):
    site = hive
    script = mcp_atlassian(settings)
    workdir = tmp_path_factory.mktemp("mcp-atlassian-cloud")
    (workdir / "resolver").mkdir()
    (workdir / "resolver" / "sitecustomize.py").write_text(RESOLVER)
    # It reads a page through v1 with an API token, which a Cloud tenant host still answers
    # (the gateway does not); every other read it makes is one Cloud keeps or v2.
    emulator = Emulator(site, "unused-admin-token", cloud_v1_answered=True)
    with serving(emulator) as url:
        port = url.rsplit(":", 1)[1]
        env = mcp_atlassian_environment(f"http://{CLOUD_HOST}:{port}/wiki", token=TOKENS["bob"], username="bob@example.com", jira_url=f"http://{CLOUD_HOST}:{port}")
        env["PYTHONPATH"] = str(workdir / "resolver")
        transport = StdioTransport(str(script), ["--transport", "stdio"], env=env, cwd=str(workdir))
        async with Client(transport, timeout=60) as client:
            yield client, emulator


def _payload(result) -> object:
    return json.loads(result.content[0].text)


async def test_its_tools_are_the_ones_the_evaluations_call(peer):
    names = {tool.name for tool in await peer.list_tools()}
    assert {"confluence_search", "confluence_get_page", "confluence_get_page_children", "jira_search", "jira_get_issue"} <= names


async def test_search_finds_pages_and_respects_what_its_user_may_see(peer):
    found = _payload(await peer.call_tool("confluence_search", {"query": "ContributorsMinutes110726", "limit": 5}))
    assert SINGLE_USER_PAGE in {str(item["id"]) for item in found}  # bob's own page
    hidden = _payload(await peer.call_tool("confluence_search", {"query": "DesignDocs", "limit": 10}))
    assert DESIGN_DOCS_PAGE not in {str(item["id"]) for item in hidden}  # committers only


async def test_get_page_returns_markdown_with_metadata(peer):
    page = _payload(await peer.call_tool("confluence_get_page", {"page_id": HOME}))
    text = json.dumps(page)
    assert "Apache Hive" in text and page["metadata"]["id"] == HOME


async def test_get_page_children_lists_the_tree(peer):
    children = _payload(await peer.call_tool("confluence_get_page_children", {"parent_id": HOME, "limit": 50}))
    listed = children if isinstance(children, list) else children["results"]
    assert {"27820116", "46633569"} <= {str(child["id"]) for child in listed}  # AboutThisWiki, AccumuloIntegration


async def test_jira_search_and_get_issue_respect_what_its_user_may_see(peer):
    found = _payload(await peer.call_tool("jira_search", {"jql": 'project = HIVE AND text ~ "metatool"', "limit": 10}))
    keys = {issue["key"] for issue in found["issues"]}
    assert "HIVE-3056" in keys
    issue = _payload(await peer.call_tool("jira_get_issue", {"issue_key": "HIVE-3056"}))
    assert issue["key"] == "HIVE-3056" and "MetaTool" in json.dumps(issue)
    epics = _payload(await peer.call_tool("jira_search", {"jql": "project = HIVE AND issuetype = Epic", "limit": 50}))
    summaries = {i["summary"] for i in epics["issues"]}
    assert "WebHCat" in summaries and "DesignDocs" not in summaries  # that epic is at level Security: bob is no committer


async def test_the_evaluations_scripted_agent_walks_its_tools(peer):
    """`wayfinder eval`'s agent with mcp-atlassian's tools: a search by question, pages opened by id."""
    done = await run_episode(peer, MCP_ATLASSIAN, "q", "how do I initialize the metastore schema with the schema tool", ["page:34835119"])
    assert done.solved_at is not None and done.solved_at <= 4 and done.opened[-1] == "page:34835119"
    assert "Hive Schema Tool" in done.texts[done.solved_at - 1]
    converted = declarations(await peer.list_tools())  # for the Gemini agent loop
    assert converted and all(p.type is not None for d in converted for p in (d.parameters.properties or {}).values())
    refused = await run_episode(peer, MCP_ATLASSIAN, "q", 'the song "Thinking Out Loud"', ["page:1"])
    assert (refused.calls, refused.errors, refused.solved_at) == (1, 1, None)  # its CQL breaks on a double quote


async def test_its_cloud_mode_searches_reads_and_lists_children_on_the_cloud_face(cloud_peer):
    peer, emulator = cloud_peer
    found = _payload(await peer.call_tool("confluence_search", {"query": "ContributorsMinutes110726", "limit": 5}))
    assert SINGLE_USER_PAGE in {str(item["id"]) for item in found}
    page = _payload(await peer.call_tool("confluence_get_page", {"page_id": HOME}))
    assert "Apache Hive" in json.dumps(page) and page["metadata"]["id"] == HOME
    children = _payload(await peer.call_tool("confluence_get_page_children", {"parent_id": HOME, "limit": 50}))
    listed = children if isinstance(children, list) else children["results"]
    assert {"27820116", "46633569"} <= {str(child["id"]) for child in listed}
    assert emulator.requests["/api/v2/pages/{id}/direct-children"] >= 1  # Cloud mode: children from v2
    found = _payload(await peer.call_tool("jira_search", {"jql": 'project = HIVE AND text ~ "metatool"', "limit": 10}))
    assert "HIVE-3056" in {issue["key"] for issue in found["issues"]}
    assert emulator.requests["/rest/api/3/search/jql"] >= 1 and not emulator.requests["/rest/api/2/search"]
