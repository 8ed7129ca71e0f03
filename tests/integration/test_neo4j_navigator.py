"""The page tree in the real Neo4j: order, breadcrumbs, idempotent sync, moves and deletions."""

from __future__ import annotations

import json

import pytest

from authz.client import OpenFGAClient
from authz.gate import Gate
from core.errors import NotFound
from core.models import Page, Principal, Project, Space
from core.settings import Settings
from navigator.navigator import Navigator
from navigator.store import Neo4jStore
from tests.conftest import CORPUS

SPACE = Space(key="NAVT", name="Navigation test", url="u")


def page(pid: int, parent: int | None, position: int) -> Page:
    return Page(
        page_id=str(pid), space_key="NAVT", title=f"P{pid}", parent_id=str(parent) if parent else None,
        position=position, url=f"u/{pid}", markdown=f"body {pid}",
    )


TREE = [page(900001, None, 0), page(900002, 900001, 0), page(900003, 900001, 1), page(900004, 900003, 0)]


@pytest.fixture
async def store(services: Settings):
    async with Neo4jStore(services.neo4j) as opened:
        await opened.sync_space(SPACE, TREE)
        yield opened


async def test_children_in_order_and_breadcrumbs(store: Neo4jStore):
    assert [c.id for c in await store.children("space:NAVT", -1, 10)] == ["page:900001"]
    assert [c.id for c in await store.children("page:900001", -1, 10)] == ["page:900002", "page:900003"]
    assert [c.id for c in await store.children("page:900001", 0, 10)] == ["page:900003"]
    summary = (await store.summaries(["page:900004"]))["page:900004"]
    assert [c.id for c in summary.ancestors] == ["page:900001", "page:900003"]
    assert await store.page("page:1") is None


async def test_spaces_then_projects_each_by_key_in_one_read(store: Neo4jStore):
    """A space and a project may share a key; each comes back as what it is."""
    await store.sync_space(Space(key="NAVA", name="First", url="u/a"), [])
    await store.sync_project(Project(key="NAVA", name="Tracker", url="u/p"), [])
    try:
        containers = [c for c in await store.containers() if c.key.startswith("NAV")]
    finally:  # the other tests' stack holds no such space or project
        await store._write("MATCH (c:Space|Project {key: 'NAVA'}) DETACH DELETE c")
    assert [(type(c).__name__, c.id, c.name) for c in containers] == [
        ("Space", "space:NAVA", "First"), ("Space", "space:NAVT", "Navigation test"), ("Project", "project:NAVA", "Tracker"),
    ]


async def test_sync_twice_moves_and_prunes(store: Neo4jStore):
    await store.sync_space(SPACE, TREE)
    assert len(await store.children("page:900001", -1, 10)) == 2
    moved = [TREE[0], TREE[1], TREE[2], page(900004, 900002, 0)]  # 900004 moves under 900002
    await store.sync_space(SPACE, moved)
    assert [c.id for c in await store.children("page:900002", -1, 10)] == ["page:900004"]
    assert await store.children("page:900003", -1, 10) == []
    await store.sync_space(SPACE, moved[:3])  # 900004 deleted at the source
    assert await store.page("page:900004") is None
    content = await store.page("page:900002")
    assert content is not None and content.markdown == "body 900002"


async def test_hive_slice_tree_matches_the_space_index(indexed, services: Settings, hive_slice):
    async with Neo4jStore(services.neo4j) as store:
        children = await store.children("page:27362076", -1, 10)
        assert [c.id for c in children] == ["page:55156221", "page:34835119"]
        ldap = (await store.summaries(["page:58852417"]))["page:58852417"]
        assert [c.title for c in ldap.ancestors] == ["AdminManual SettingUpHiveServer", "Setting Up HiveServer2"]
        # labels and the time of the current version, as the site holds them, for search's filters
        source = hive_slice.site.pages["58852417"]
        assert ldap.labels == tuple(source.labels) and ldap.labels
        assert ldap.updated_at is not None and abs((ldap.updated_at - source.versions[-1].when).total_seconds()) < 1


async def test_a_page_moved_to_another_space_survives_the_old_space_sync(store: Neo4jStore):
    other = Space(key="NAVU", name="Other", url="u")
    moved = Page(page_id="900004", space_key="NAVU", title="P900004", parent_id=None, position=0, url="u", markdown="m")
    await store.sync_space(other, [moved])
    await store.sync_space(SPACE, TREE[:3])
    assert [c.id for c in await store.children("space:NAVU", -1, 10)] == ["page:900004"]
    summary = (await store.summaries(["page:900004"]))["page:900004"]
    assert summary.space_id == "space:NAVU" and summary.ancestors == ()


async def test_a_sync_writes_only_what_changed_and_links_reach_pages_that_arrive_later(store: Neo4jStore):
    assert await store.sync_space(SPACE, TREE) == 0  # the fixture's sync wrote them all
    linking = page(900005, None, 1).model_copy(update={"links": ("900006",)})  # to a page not held yet
    assert await store.sync_space(SPACE, [*TREE, linking]) == 1
    assert await store.links("page:900005") == []
    edited = TREE[1].model_copy(update={"markdown": "body 900002, edited"})
    target = page(900006, None, 2)
    assert await store.sync_space(SPACE, [TREE[0], edited, *TREE[2:], linking, target]) == 2  # the edit, the new page
    assert (await store.page("page:900002")).markdown == "body 900002, edited"
    assert await store.links("page:900005") == ["page:900006"]  # the unchanged page's link now lands
    moved = TREE[3].model_copy(update={"parent_id": "900002"})  # a move is a change too
    assert await store.sync_space(SPACE, [TREE[0], edited, TREE[2], moved, linking, target]) == 1
    assert [c.id for c in await store.children("page:900002", -1, 10)] == ["page:900004"]


async def test_the_tree_tools_on_the_real_stack_stop_at_hidden_pages(indexed, services: Settings, hive_slice):
    """get_ancestors, get_tree and resolve_path with the real gate over the synced slice: bob is
    not a committer, so the DesignDocs subtree (restricted to committers) does not exist for him."""
    site = hive_slice.site
    design_docs = site.pages["27362075"]
    child = site.children("27362075")[0]
    grandchild = next(p for p in site.pages.values() if p.parent_id and site.pages[p.parent_id].parent_id == "27362075")
    async with OpenFGAClient(services.openfga) as authorizer, Neo4jStore(services.neo4j) as store:
        navigator = Navigator(store)

        def gate(user: str) -> Gate:
            return Gate(authorizer, Principal(user=user))

        path = f"HIVE/{design_docs.title}/{child.title}"
        assert (await navigator.resolve_path(gate("alice"), path.upper())).id == f"page:{child.id}"
        ancestors = await navigator.get_ancestors(gate("alice"), f"page:{grandchild.id}")
        assert [c.id for c in ancestors] == ["space:HIVE", "page:27362075", f"page:{grandchild.parent_id}"]
        alice_tree = await navigator.get_tree(gate("alice"), "space:HIVE", depth=1, limit=200)
        bob_tree = await navigator.get_tree(gate("bob"), "space:HIVE", depth=1, limit=200)
        assert "page:27362075" in [c.id for c in alice_tree.root.children]
        assert "page:27362075" not in [c.id for c in bob_tree.root.children]
        assert bob_tree.root.child_count == alice_tree.root.child_count - 1 == len(bob_tree.root.children)

        failures = []
        for call in (
            navigator.resolve_path(gate("bob"), path),
            navigator.resolve_path(gate("bob"), f"HIVE/{design_docs.title}"),
            navigator.resolve_path(gate("bob"), "HIVE/No such page here"),
            navigator.get_ancestors(gate("bob"), f"page:{grandchild.id}"),
            navigator.get_tree(gate("bob"), "page:27362075", depth=1, limit=10),
        ):
            with pytest.raises(NotFound) as caught:
                await call
            failures.append(type(caught.value))
        assert set(failures) == {NotFound}


async def test_the_navigation_questions_of_the_slice_are_answered_exactly(indexed, services: Settings):
    """The dev set's 'children' questions whose pages the slice holds, through get_tree (bob sees
    every page they name, the one restricted to him included)."""
    questions = [json.loads(line) for line in (CORPUS / "questions_dev.jsonl").read_text().splitlines() if line.strip()]
    asked = [q for q in questions if q["kind"] == "navigation" and q["nav"]["node"] in ("27362076", "27362087")]
    assert len(asked) == 2
    async with OpenFGAClient(services.openfga) as authorizer, Neo4jStore(services.neo4j) as store:
        for question in asked:
            tree = await Navigator(store).get_tree(Gate(authorizer, Principal(user="bob")), f"page:{question['nav']['node']}", depth=1, limit=50)
            assert [c.id for c in tree.root.children] == [f"page:{p}" for p in question["nav"]["expected"]], question["id"]


async def test_related_pages_on_the_real_stack(indexed, services: Settings, hive_slice):
    """Links both ways through the real Cypher and gate. No link of the slice crosses the DesignDocs
    boundary (the unit tests cover one that does): bob sees links among open pages and nothing of
    DesignDocs, where alice sees its links."""
    site = hive_slice.site
    design = {"page:27362075"} | {f"page:{p.id}" for p in site.pages.values() if any(a.id == "27362075" for a in site.ancestors(p))}
    async with OpenFGAClient(services.openfga) as authorizer, Neo4jStore(services.neo4j) as store:
        pairs = sorted({(source, target) for source in (f"page:{p}" for p in site.pages) for target in await store.links(source)})
        inside = next((s, t) for s, t in pairs if s in design and t in design)
        outside = next((s, t) for s, t in pairs if s not in design and t not in design)
        navigator = Navigator(store)

        def gate(user: str) -> Gate:
            return Gate(authorizer, Principal(user=user))

        for user, (source, target) in (("alice", inside), ("alice", outside), ("bob", outside)):
            assert target in [p.id for p in (await navigator.related(gate(user), source, 100))["links_to"]]
            assert source in [p.id for p in (await navigator.related(gate(user), target, 100))["linked_from"]]
        for page_id in (*inside, "page:404"):
            with pytest.raises(NotFound):
                await navigator.related(gate("bob"), page_id, 100)
