"""Jira through Wayfinder's own MCP server, end to end: the Hive slice and the HIVE issues its pages
cite, synced over REST from the emulator into real OpenFGA, Neo4j and LightRAG on a stack of this
module's own, then asked over streamable HTTP with bearer tokens. Issues are searched and read
like pages, and an issue on the Security level (the Committers role) exists only for alice."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from rich.console import Console

from core.settings import JiraSettings
from devstack import stack
from devstack.atlassian.hive import SYNC_LOGIN, TOKENS, seed_hive
from devstack.atlassian.hive_jira import REVIEW_NOTE, SECURITY_LEVEL, seed_hive_jira
from devstack.atlassian.runner import serving as serving_site
from devstack.atlassian.server import Emulator
from devstack.atlassian.site import Site
from devstack.leaks import synced_from
from devstack.serving import serving
from mcp_app.auth import StaticTokens, http_identity
from mcp_app.server import create_server, open_services
from pipeline.raw_store import RawStore
from pipeline.sources.confluence_rest import ConfluenceRestSource
from pipeline.sources.jira_rest import JiraRestSource
from pipeline.sync import run_sync
from tests.conftest import CORPUS, SLICE_ROOTS
from tests.conftest import test_settings as settings_in
from tests.e2e.mcp import call_with, strings_in

BEARER = {user: f"jira-e2e-token-of-{user}".ljust(40, "x") for user in ("alice", "bob", "carol")}


@pytest.fixture(scope="module")
async def jira_mcp(tmp_path_factory: pytest.TempPathFactory) -> Any:
    own = settings_in(tmp_path_factory.mktemp("jira-mcp"))
    own = own.model_copy(
        update={
            "openfga": own.openfga.model_copy(update={"http_port": 29580, "grpc_port": 29581, "store_name": "wayfinder-test-jira-mcp"}),
            "neo4j": own.neo4j.model_copy(update={"bolt_port": 29887}),
        }
    )
    site = Site()
    await seed_hive(site, CORPUS, roots=SLICE_ROOTS)
    await seed_hive_jira(site, CORPUS)
    with serving_site(Emulator(site, secrets.token_urlsafe(32))) as url:
        synced = synced_from(own, url)
        try:
            stack.up(synced, notify=lambda _: None)
            jira = JiraRestSource(JiraSettings(username=SYNC_LOGIN, token=TOKENS[SYNC_LOGIN], page_size=100), url + "/jira")
            async with RawStore.for_settings(synced) as store:
                report = await run_sync(synced, ConfluenceRestSource(synced.confluence, synced.confluence.url or ""), store, Console(quiet=True), jira=jira)
            assert not report.failed and report.jira is not None and len(report.jira.added) == len(site.jira.issues)
            server = create_server(
                partial(open_services, synced), http_identity, auth=StaticTokens({token: user for user, token in BEARER.items()}), observe=lambda *_: None
            )
            async with serving(server, synced.mcp.host, 0) as mcp_url:
                yield mcp_url, site
        finally:
            stack.down(synced)


async def call(url: str, user: str, tool: str, **args: Any) -> dict[str, Any] | str:
    return await call_with(url, BEARER[user], tool, **args)


def issue_ids(value: Any) -> Iterator[str]:
    return (found for found in strings_in(value) if found.startswith("issue:"))


def secured_and_open(site: Site) -> tuple[Any, Any]:
    """A story on the Security level and one on no level, the first of each by key number."""
    stories = sorted((i for i in site.jira.issues.values() if i.issue_type in ("Story", "Bug")), key=lambda i: int(i.key.partition("-")[2]))
    return next(i for i in stories if i.security_level == SECURITY_LEVEL), next(i for i in stories if i.security_level is None)


async def test_an_issue_is_found_by_search_and_read_by_fetch_like_a_page(jira_mcp):
    url, site = jira_mcp
    _, open_issue = secured_and_open(site)
    found = await call(url, "bob", "search", query=open_issue.summary, kinds=["issue"], top_k=10)
    assert isinstance(found, dict), found
    hit = next(h for h in found["hits"] if h["id"] == f"issue:{open_issue.key}")
    assert hit["kind"] == "issue" and hit["space"] == "project:HIVE" and all(h["kind"] == "issue" for h in found["hits"])
    read = await call(url, "bob", "fetch", id=hit["id"])
    assert read["markdown"].startswith(f"# {open_issue.key}: ") and read["breadcrumb"]  # under its epic
    spaces = await call(url, "bob", "list_spaces")
    assert [p["id"] for p in spaces["projects"]] == ["project:HIVE"] and [s["id"] for s in spaces["spaces"]] == ["space:HIVE"]
    pages_only = await call(url, "bob", "search", query=open_issue.summary, spaces=["HIVE"], top_k=10)
    assert not list(issue_ids([h["id"] for h in pages_only["hits"]]))  # a space filter keeps issues out


async def test_a_secured_issue_exists_only_for_those_on_its_level(jira_mcp):
    url, site = jira_mcp
    secured, _ = secured_and_open(site)
    target = f"issue:{secured.key}"
    alice = await call(url, "alice", "search", query=secured.summary, top_k=10, response_format="detailed")
    assert target in [h["id"] for h in alice["hits"]]  # the control: the issue is indexed and found
    assert (await call(url, "alice", "fetch", id=target))["id"] == target
    for user in ("bob", "carol"):
        found = await call(url, user, "search", query=secured.summary, top_k=10, response_format="detailed")
        assert target not in set(issue_ids(found)), user  # neither as a hit nor as an entity's evidence
        hidden, missing = await call(url, user, "fetch", id=target), await call(url, user, "fetch", id="issue:HIVE-99999999")
        assert hidden == missing and hidden.startswith("not_found:")
        assert await call(url, user, "get_ancestors", id=target) == await call(url, user, "get_ancestors", id="issue:HIVE-99999999")


async def test_a_comment_restricted_to_a_role_or_a_group_never_joins_its_issues_text(jira_mcp):
    """DESIGN.md A14: the committers' review notes (visible in Jira to the Committers role, or the
    hive-reviewers group, alone) have fewer readers than their open issues, so no reader of the
    issue gets them through it: not in fetch, and carol (no committer) not in a snippet or an
    entity's description either."""
    url, site = jira_mcp
    noted = [i for i in site.jira.issues.values() if any(c.visibility for c in i.comments)]
    assert {c.visibility[0] for i in noted for c in i.comments if c.visibility} == {"role", "group"}  # both kinds are seeded
    phrase = REVIEW_NOTE.split(":")[1].strip()
    for issue in noted[:4]:
        for user in ("carol", "alice"):  # carol may not read the notes in Jira; alice may, but not through the issue
            read = await call(url, user, "fetch", id=f"issue:{issue.key}")
            assert isinstance(read, dict) and read["id"] == f"issue:{issue.key}", read
            assert "review note" not in read["markdown"] and phrase not in read["markdown"], (user, issue.key)
    found = await call(url, "carol", "search", query=phrase, top_k=10, response_format="detailed")
    assert not any(phrase in text for text in strings_in(found))


async def test_a_restricted_comment_is_a_document_its_readers_fetch_find_and_place_and_no_one_else_does(jira_mcp):
    """DESIGN.md A14: a review note is a document of its own, read by its issue's readers in its
    role or group (alice, a committer) and by nobody else (carol): fetch, search and get_ancestors
    answer alice; carol's answers are those of an id that does not exist."""
    url, site = jira_mcp
    notes = {
        kind: next((issue, c) for issue in sorted(site.jira.issues.values(), key=lambda i: i.number) for c in issue.comments if c.visibility and c.visibility[0] == kind)
        for kind in ("role", "group")
    }
    for kind, (issue, comment) in notes.items():
        read = await call(url, "alice", "fetch", id=f"comment:{comment.id}")
        assert isinstance(read, dict), (kind, read)
        assert REVIEW_NOTE.format(key=issue.key) in read["markdown"] and read["title"].startswith(f"{issue.key}: comment by"), kind
        placed = await call(url, "alice", "get_ancestors", id=f"comment:{comment.id}")
        assert isinstance(placed, dict) and placed["ancestors"][0]["id"] == "project:HIVE" and placed["ancestors"][-1]["id"] == f"issue:{issue.key}", placed
        missing = "comment:99999999"
        for tool in ("fetch", "get_ancestors"):
            assert await call(url, "carol", tool, id=f"comment:{comment.id}") == await call(url, "carol", tool, id=missing), (kind, tool)
    issue, comment = notes["role"]
    found = await call(url, "alice", "search", query=REVIEW_NOTE.format(key=issue.key), top_k=10)
    assert isinstance(found, dict)
    assert f"comment:{comment.id}" in [hit["id"] for hit in found["hits"]] and "comment" in {hit["kind"] for hit in found["hits"]}
    hidden = await call(url, "carol", "search", query=REVIEW_NOTE.format(key=issue.key), top_k=10)
    assert isinstance(hidden, dict) and not [hit["id"] for hit in hidden["hits"] if hit["id"].startswith("comment:")]