"""The dev set's navigation questions, answered exactly by the navigator tools over the whole Hive
space: synced over REST from the emulator into a stack of its own (real OpenFGA and Neo4j; the
semantic index is not needed here, so an in-memory one stands in), asked as bob with the real gate."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator

import pytest
from rich.console import Console

from authz.client import OpenFGAClient
from authz.gate import Gate
from core.models import Principal
from core.settings import Settings
from devstack import stack
from devstack.atlassian.hive import seed_hive
from devstack.atlassian.runner import serving
from devstack.atlassian.server import Emulator
from devstack.atlassian.site import Site
from devstack.leaks import synced_from
from navigator.navigator import Navigator, TreeNode
from navigator.store import Neo4jStore
from pipeline.raw_store import RawStore
from pipeline.sources.confluence_rest import ConfluenceRestSource
from pipeline.sync import run_sync
from retrievers.fake_index import FakeSemanticIndex
from tests.conftest import CORPUS
from tests.conftest import test_settings as settings_in

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

QUESTIONS = [json.loads(line) for line in (CORPUS / "questions_dev.jsonl").read_text().splitlines() if line.strip()]
NAVIGATION = [q for q in QUESTIONS if q["kind"] == "navigation"]


@pytest.fixture(scope="module")
async def whole_hive(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Settings]:
    own = settings_in(tmp_path_factory.mktemp("whole-hive"))
    own = own.model_copy(
        update={
            "openfga": own.openfga.model_copy(update={"http_port": 29280, "grpc_port": 29281, "store_name": "wayfinder-test-nav"}),
            "neo4j": own.neo4j.model_copy(update={"bolt_port": 29787}),
        }
    )
    site = Site()
    await seed_hive(site, CORPUS)
    with serving(Emulator(site, secrets.token_urlsafe(32))) as url:
        synced = synced_from(own, url)
        try:
            stack.up(synced, notify=lambda _: None)
            async with RawStore.for_settings(synced) as store:
                report = await run_sync(
                    synced, ConfluenceRestSource(synced.confluence, synced.confluence.url or ""), store, Console(quiet=True),
                    open_index=lambda _settings, _usage: FakeSemanticIndex(),
                )
            assert not report.failed
            yield synced
        finally:
            stack.down(synced)


def _preorder(node: TreeNode) -> list[str]:
    return [found for child in node.children for found in (child.id, *_preorder(child))]


@pytest.mark.parametrize("question", NAVIGATION, ids=[q["id"] for q in NAVIGATION])
async def test_a_navigation_question_is_answered_exactly(whole_hive: Settings, question: dict) -> None:
    nav = question["nav"]
    expected = [f"page:{p}" for p in nav["expected"]]
    async with OpenFGAClient(whole_hive.openfga) as authorizer, Neo4jStore(whole_hive.neo4j) as store:
        gate = Gate(authorizer, Principal(user="bob"))
        navigator = Navigator(store)
        if nav["op"] == "children":
            tree = await navigator.get_tree(gate, f"page:{nav['node']}", depth=1, limit=200)
            assert [c.id for c in tree.root.children] == expected
            assert tree.root.child_count == len(expected)
        elif nav["op"] == "subtree":
            tree = await navigator.get_tree(gate, f"page:{nav['node']}", depth=2, limit=200)
            assert _preorder(tree.root) == expected
        elif nav["op"] == "resolve_path":
            resolved = await navigator.resolve_path(gate, nav["node"])
            assert [resolved.id] == expected
            breadcrumb = [c.id for c in await navigator.get_ancestors(gate, resolved.id)]
            assert breadcrumb[0] == "space:HIVE" and breadcrumb[1:] == [c["id"] for c in resolved.candidates[0]["breadcrumb"]]
        else:
            pytest.fail(f"unknown navigation op {nav['op']!r} in {question['id']}")
    assert len(NAVIGATION) >= 5
