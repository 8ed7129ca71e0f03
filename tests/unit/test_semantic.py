"""Search reaches candidates through visible paths only: a hidden page never selects, orders or
colours what a caller gets (DESIGN.md A4), on the fake index."""

from __future__ import annotations

import dataclasses

from authz.base import Check
from authz.fake import FakeAuthorizer
from authz.gate import Gate
from authz.prefilter import AclFile, AclKeys
from core.models import Page, Principal, Space
from navigator.fake import FakeNavigatorStore
from navigator.navigator import Navigator
from retrievers.fake_index import FakeSemanticIndex
from retrievers.base import IndexDocument
from retrievers.semantic import SemanticRetriever

SPACE = Space(key="S", name="Space", url="u")
TEXTS = {
    "1": "The Metastore stores Table definitions. See [Plan](page:2) and page:2.",
    "2": "Zorblax Metastore migration plan, secret.",
    "3": "Compaction runs in the Metastore too.",
}


async def retriever(texts: dict[str, str] = TEXTS) -> tuple[SemanticRetriever, FakeSemanticIndex]:
    """Search over one page per text (page id → its text) in space S."""
    store = FakeNavigatorStore()
    pages = [Page(page_id=n, space_key="S", title=f"T{n}", parent_id=None, position=int(n), url=f"u/{n}", markdown=t) for n, t in texts.items()]
    await store.sync_space(SPACE, pages)
    index = FakeSemanticIndex()
    await index.upsert([IndexDocument(p.id, p.markdown) for p in pages])
    return SemanticRetriever(index, Navigator(store), candidates=40), index


def bob(*visible: str) -> Gate:
    return Gate(FakeAuthorizer([Check("user:bob", "viewer", o) for o in ("space:S", *visible)]), Principal(user="bob"))


async def search(query: str, *visible: str):
    semantic, index = await retriever()
    return await semantic.search(bob(*visible), query, response_format="detailed"), index


async def test_a_term_only_hidden_pages_hold_gives_what_a_term_found_nowhere_gives():
    hidden_term, _ = await search("Zorblax", "page:1", "page:3")
    nowhere, _ = await search("Quuxplonk", "page:1", "page:3")
    assert dataclasses.asdict(hidden_term) == dataclasses.asdict(nowhere) == {"hits": [], "entities": [], "relations": []}


async def test_an_entity_shared_with_a_hidden_page_ranks_only_visible_chunks_and_is_not_shown():
    result, index = await search("Metastore", "page:1", "page:3")
    assert {h.id for h in result.hits} == {"page:1", "page:3"}
    assert "Metastore" not in [e.name for e in result.entities]  # it also stands on page:2
    # The query names it, so the visible pages alone rebuild it: it ranks them (A4).
    assert all("entity Metastore" in h.why for h in result.hits)
    assert result.relations and all("page:2" not in r.evidence for r in result.relations)
    fetched = [cid for method, arg in index.calls if method == "chunks" for cid in arg]
    assert not [cid for cid in fetched if cid.startswith("page:2")]


def test_an_item_is_rebuilt_only_from_documents_that_yield_what_ranked_it():
    from retrievers.base import GraphHit

    hit = GraphHit(
        "entity", "Metastore", "merged text of pages 1, 2 and 3", frozenset({"page:1", "page:2", "page:3"}), 1,
        ("c1", "c2", "c3", "c1b"), 0.8, chunk_docs=("page:1", "page:2", "page:3", "page:1"), rebuilders=frozenset({"page:2", "page:3"}),
    )
    assert hit.rebuilt_from({"page:1"}) is None  # page:1 alone does not yield its vector
    part = hit.rebuilt_from({"page:1", "page:2"})
    assert part is not None and part.partial and part.description == ""
    assert (part.doc_ids, part.chunk_ids, part.chunk_docs) == (frozenset({"page:1", "page:2"}), ("c1", "c2", "c1b"), ("page:1", "page:2", "page:1"))
    assert part.rebuilders == {"page:2"} and part.rebuilt_from({"page:1"}) is None


async def test_an_item_ranks_through_visible_documents_only_when_one_of_them_rebuilds_it():
    from retrievers.base import ChunkHit, GraphHit, RawResults

    class Ranked(Scored):
        def __init__(self, rebuilders):
            super().__init__([ChunkHit("c1", "page:1", "Nothing about it", 1, 0.1)])
            self.rebuilders = rebuilders

        async def query(self, text, top_k, within=None):
            hit = GraphHit(
                "entity", "Velmora", "on pages 2 and 3", frozenset({"page:2", "page:3"}), 1, ("c2", "c3"), 0.9,
                chunk_docs=("page:2", "page:3"), rebuilders=self.rebuilders,
            )
            return RawResults(chunks=self._chunks, entities=[hit], relations=[])

        async def chunks(self, chunk_ids):
            return [ChunkHit(c, f"page:{c[1:]}", "Velmora text", 0) for c in chunk_ids]

    store = FakeNavigatorStore()
    pages = [Page(page_id=n, space_key="S", title=f"T{n}", parent_id=None, position=int(n), url="u", markdown="") for n in "123"]
    await store.sync_space(SPACE, pages)

    async def found(rebuilders):
        index = Ranked(rebuilders)
        result = await SemanticRetriever(index, Navigator(store), candidates=10).search(bob("page:1", "page:2"), "velmora")
        return result, index

    rebuilt, _ = await found(frozenset({"page:2"}))
    assert [(h.id, h.why) for h in rebuilt.hits] == [("page:2", ["entity Velmora"])]
    assert rebuilt.entities == []  # it ranks; its merged description is never shown
    hidden, _ = await found(frozenset({"page:3"}))  # only the hidden page yields its vector
    assert hidden.hits == [] and hidden.entities == []


async def test_visible_entities_lead_to_their_chunks_and_say_so():
    result, index = await search("Metastore", "page:1", "page:2", "page:3")
    assert [e.name for e in result.entities] == ["Metastore"]
    assert result.entities[0].evidence == ["page:1", "page:2", "page:3"]
    assert any("entity Metastore" in h.why for h in result.hits)
    assert all(h.score > 0 for h in result.hits)
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)


async def test_links_in_snippets_lose_hidden_targets():
    result, _ = await search("Table definitions", "page:1", "page:3")
    (hit,) = [h for h in result.hits if h.id == "page:1"]
    assert "page:2" not in hit.snippet and "See Plan and" in hit.snippet
    shown, _ = await search("Table definitions", "page:1", "page:2", "page:3")
    assert "[Plan](page:2)" in next(h.snippet for h in shown.hits if h.id == "page:1")


class Scored:
    """An index that returns fixed chunks with fixed similarities."""

    def __init__(self, chunks):
        self._chunks = chunks

    async def probe(self, text):
        from retrievers.base import Probe

        return Probe(text)

    async def query(self, text, top_k, within=None):
        from retrievers.base import RawResults

        return RawResults(chunks=self._chunks, entities=[], relations=[])

    async def chunks(self, chunk_ids):
        return []

    async def entities_of(self, doc_ids):
        return []


async def test_a_weak_match_needs_a_shared_word_and_a_strong_one_does_not():
    from retrievers.base import ChunkHit

    store = FakeNavigatorStore()
    pages = [Page(page_id=n, space_key="S", title=f"T{n}", parent_id=None, position=int(n), url="u", markdown="") for n in "123"]
    await store.sync_space(SPACE, pages)
    index = Scored(
        [
            ChunkHit("c1", "page:1", "The metastore schema tool", 1, 0.30),  # weak, shares "metastore"
            ChunkHit("c2", "page:2", "Nothing in common here", 2, 0.30),  # weak, shares nothing
            ChunkHit("c3", "page:3", "Nothing in common either", 3, 0.45),  # strong on its own
        ]
    )
    result = await SemanticRetriever(index, Navigator(store), candidates=10).search(
        bob("page:1", "page:2", "page:3"), "how does the Metastore work"
    )
    assert {h.id for h in result.hits} == {"page:1", "page:3"}


async def test_an_entity_whose_name_points_at_a_hidden_page_is_never_named():
    from retrievers.base import ChunkHit, GraphHit, RawResults

    class Junk(Scored):
        async def query(self, text, top_k, within=None):
            name = "Plan](page:2"  # extraction noise from "[Plan](page:2)" on a visible page
            hit = GraphHit("entity", name, "see page:2", frozenset({"page:1"}), 1, ("c1",), 0.9)
            return RawResults(chunks=self._chunks, entities=[hit], relations=[])

    store = FakeNavigatorStore()
    pages = [Page(page_id=n, space_key="S", title=f"T{n}", parent_id=None, position=int(n), url="u", markdown="") for n in "12"]
    await store.sync_space(SPACE, pages)
    index = Junk([ChunkHit("c1", "page:1", "The plan for the metastore", 1, 0.5)])
    result = await SemanticRetriever(index, Navigator(store), candidates=10).search(bob("page:1"), "plan metastore")
    assert [h.id for h in result.hits] == ["page:1"]
    assert "page:2" not in str(result) and result.entities == []


def test_a_chunk_cut_inside_a_reference_shows_no_part_of_the_id():
    from retrievers.base import ChunkHit
    from retrievers.semantic import _chunk_window

    cut = ChunkHit("c", "page:1", ":27362075 for the design of page:2736", 1)
    assert "2736" not in _chunk_window(cut, 300)
    first = ChunkHit("c", "page:1", "# Title\n\nBody text ends here", 1)
    assert _chunk_window(first, 300) == "# Title Body text ends"


async def test_hidden_pages_do_not_crowd_visible_ones_out_of_the_candidates():
    store = FakeNavigatorStore()
    texts = {str(n): "zorblax metastore notes" for n in range(100, 145)} | {"1": "the metastore"}
    pages = [Page(page_id=n, space_key="S", title=f"T{n}", parent_id=None, position=int(n), url="u", markdown=t) for n, t in texts.items()]
    await store.sync_space(SPACE, pages)
    index = FakeSemanticIndex()
    await index.upsert([IndexDocument(p.id, p.markdown) for p in pages])
    semantic = SemanticRetriever(index, Navigator(store), candidates=200)
    hidden_term = await semantic.search(bob("page:1"), "zorblax metastore")
    nowhere = await semantic.search(bob("page:1"), "quuxplonk metastore")
    assert [h.id for h in hidden_term.hits] == [h.id for h in nowhere.hits] == ["page:1"]


async def test_a_missing_space_and_a_hidden_one_answer_alike_and_both_are_checked():
    import pytest

    from core.errors import AuthorizationUnavailable

    semantic, _ = await retriever()
    outsider = Gate(FakeAuthorizer([]), Principal(user="carol"))
    hidden = await semantic.search(outsider, "Metastore", spaces=["S"])
    missing = await semantic.search(outsider, "Metastore", spaces=["NOPE"])
    assert dataclasses.asdict(hidden) == dataclasses.asdict(missing)
    assert {"space:S", "space:NOPE"} <= {r.object for r in outsider.records}
    for key in ("S", "NOPE"):
        with pytest.raises(AuthorizationUnavailable):
            await semantic.search(Gate(FakeAuthorizer(unavailable=True), Principal(user="carol")), "Metastore", spaces=[key])


async def test_an_identifier_is_found_by_its_keywords_and_the_hit_says_so():
    result, _ = await search("where is zorblax migrated", "page:1", "page:2", "page:3")
    assert result.hits[0].id == "page:2"
    assert "keywords" in result.hits[0].why


async def bridged(*visible: str, pages_left_out: frozenset[str] = frozenset()):
    """Page 1 answers the first hop; page 2 (the second hop) shares the entity Velmora with it, and
    so does page 4."""
    texts = {
        "1": "Quintor founded the town of Velmora.",
        "2": "Velmora has a harbour and a population of nine thousand.",
        "3": "The population census counts every harbour town.",
        "4": "Velmora appears in the old maps.",
    }
    semantic, index = await retriever({n: t for n, t in texts.items() if n not in pages_left_out})
    gate = bob(*visible)
    return await semantic.search(gate, "population of the town Quintor founded"), index, gate


async def test_the_second_hop_is_reached_through_an_entity_the_best_hits_share():
    result, index, _ = await bridged("page:1", "page:2", "page:3", "page:4")
    why = {h.id: h.why for h in result.hits}
    assert "linked through Velmora" in why["page:2"]
    assert [h.id for h in result.hits][:2] == ["page:1", "page:2"]
    seeds = [arg for method, arg in index.calls if method == "entities_of"]
    assert seeds and all(set(s) <= {"page:1", "page:2", "page:3"} for s in seeds)


async def test_a_hidden_page_neither_makes_nor_breaks_a_second_hop():
    """Page 4, hidden, mentions Velmora too. The link between the visible pages 1 and 2 is rebuilt
    from their own text (A4): the answer is the one an index without page 4 gives, word for word,
    and page 4 is never asked about."""
    hidden, _, gate = await bridged("page:1", "page:2", "page:3")
    absent, _, _ = await bridged("page:1", "page:2", "page:3", pages_left_out=frozenset({"4"}))
    assert dataclasses.asdict(hidden) == dataclasses.asdict(absent)
    assert "linked through Velmora" in {h.id: h.why for h in hidden.hits}["page:2"]
    assert "page:4" not in {h.id for h in hidden.hits}
    assert "page:4" not in {r.object for r in gate.records}


async def test_near_duplicate_pages_are_one_hit_and_a_hidden_copy_is_never_named():
    store = FakeNavigatorStore()
    copy = "Compaction merges the delta files of an ACID table into a new base file, once enough deltas pile up."
    texts = {"1": copy, "2": copy + " (Hive 4)", "3": copy, "4": "Compaction thresholds are set per table."}
    pages = [Page(page_id=n, space_key="S", title=f"T{n}", parent_id=None, position=int(n), url="u", markdown=t) for n, t in texts.items()]
    await store.sync_space(SPACE, pages)
    index = FakeSemanticIndex()
    await index.upsert([IndexDocument(p.id, p.markdown) for p in pages])
    result = await SemanticRetriever(index, Navigator(store), candidates=40).search(bob("page:1", "page:2", "page:4"), "compaction delta files")
    ids = [h.id for h in result.hits]
    assert "page:4" in ids and len([i for i in ids if i in {"page:1", "page:2"}]) == 1
    (canonical,) = [h for h in result.hits if h.id in {"page:1", "page:2"}]
    assert canonical.also_in == [({"page:1", "page:2"} - {canonical.id}).pop()]
    assert all("page:3" not in h.also_in and h.id != "page:3" for h in result.hits)


async def test_labels_time_and_kind_narrow_the_candidates_before_ranking():
    import pytest
    from datetime import UTC, datetime

    from core.errors import InvalidArgument

    store = FakeNavigatorStore()
    when = {"1": datetime(2024, 1, 1, tzinfo=UTC), "2": datetime(2025, 6, 1, tzinfo=UTC), "3": datetime(2025, 9, 1, tzinfo=UTC)}
    tags = {"1": ("acid",), "2": ("acid", "compaction"), "3": ()}
    pages = [
        Page(page_id=n, space_key="S", title=f"T{n}", parent_id=None, position=int(n), url="u", markdown=f"Compaction notes {n}.", labels=tags[n], updated_at=when[n])
        for n in "123"
    ]
    await store.sync_space(SPACE, pages)
    index = FakeSemanticIndex()
    await index.upsert([IndexDocument(p.id, p.markdown) for p in pages])
    semantic = SemanticRetriever(index, Navigator(store), candidates=40)
    everyone = bob("page:1", "page:2", "page:3")

    async def ids(**filters) -> set[str]:
        return {h.id for h in (await semantic.search(everyone, "compaction notes", **filters)).hits}

    assert await ids() == {"page:1", "page:2", "page:3"}
    assert await ids(labels=["acid"]) == {"page:1", "page:2"}
    assert await ids(updated_after=datetime(2025, 1, 1)) == {"page:2", "page:3"}  # no zone: UTC
    assert await ids(labels=["compaction", "nope"], updated_after=datetime(2025, 7, 1, tzinfo=UTC)) == set()
    assert await ids(kinds=["issue"]) == set() and await ids(kinds=["page"]) == {"page:1", "page:2", "page:3"}
    (hit,) = (await semantic.search(everyone, "compaction notes", labels=["compaction"])).hits
    assert hit.labels == ["acid", "compaction"] and hit.updated_at == "2025-06-01T00:00:00+00:00"
    with pytest.raises(InvalidArgument, match="kinds"):
        await semantic.search(everyone, "compaction", kinds=["blog"])
    with pytest.raises(InvalidArgument, match="labels"):
        await semantic.search(everyone, "compaction", labels=[""])


HIDDEN = Space(key="H", name="Hidden", url="h")


async def crowded(tmp_path, candidates: int = 2):
    """Twelve hidden pages match "metastore compaction schedule" better than the one page bob may see in
    space S; page:102 in S is restricted (its own anchor) and page:103 stands behind it."""
    store = FakeNavigatorStore()
    hidden = [Page(page_id=str(200 + n), space_key="H", title=f"H{n}", parent_id=None, position=n, url=f"h/{n}", markdown="Metastore compaction schedule, Metastore compaction schedule.") for n in range(12)]
    mine = [
        Page(page_id="101", space_key="S", title="Notes", parent_id=None, position=0, url="u/101", markdown="Notes on the metastore and its compaction."),
        Page(page_id="102", space_key="S", title="Restricted", parent_id=None, position=1, url="u/102", markdown="Metastore compaction plans."),
        Page(page_id="103", space_key="S", title="Below", parent_id="102", position=0, url="u/103", markdown="Metastore compaction details."),
    ]
    await store.sync_space(SPACE, mine)
    await store.sync_space(HIDDEN, hidden)
    index = FakeSemanticIndex()
    await index.upsert([IndexDocument(p.id, p.markdown) for p in [*hidden, *mine]])
    AclKeys.of(
        {"space:S": {"page:101": "space:S", "page:102": "page:102", "page:103": "page:102"}, "space:H": {p.id: "space:H" for p in hidden}}
    ).save(tmp_path / "acl.json")
    navigator = Navigator(store)
    return SemanticRetriever(index, navigator, candidates), SemanticRetriever(index, navigator, candidates, AclFile(tmp_path / "acl.json"))


async def test_the_prefilter_finds_what_a_user_sees_when_hidden_pages_match_better(tmp_path):
    post, pre = await crowded(tmp_path)
    assert (await post.search(bob("page:101"), "metastore compaction schedule")).hits == []  # the best candidates were hidden
    assert [h.id for h in (await pre.search(bob("page:101"), "metastore compaction schedule")).hits] == ["page:101"]


async def test_the_prefilter_asks_about_spaces_then_the_restricted_anchors_of_visible_ones(tmp_path):
    _, pre = await crowded(tmp_path)
    gate = bob("page:101", "page:102", "page:103")
    result = await pre.search(gate, "metastore compaction")
    assert {h.id for h in result.hits} == {"page:101", "page:102", "page:103"}
    calls = gate.authorizer.calls
    assert [sorted(c.object for c in batch) for batch in calls[:2]] == [["space:H", "space:S"], ["page:102"]]
    assert not [c for batch in calls for c in batch if c.object.startswith("page:2")]  # nothing of the hidden space is ranked or checked


async def test_keys_older_than_the_permissions_cost_recall_and_never_show_a_hidden_page(tmp_path):
    _, pre = await crowded(tmp_path)
    # The keys put page:103 behind page:102: when bob may see page:103 and not page:102 (a
    # restriction changed since the sync), page:103 is missed, not wrongly shown...
    assert [h.id for h in (await pre.search(bob("page:101", "page:103"), "metastore compaction")).hits] == ["page:101"]
    # ...and a page the keys admit is still checked live: page:102 admitted, then denied.
    gate = Gate(FakeAuthorizer([Check("user:bob", "viewer", o) for o in ("space:S", "page:101", "page:102")]), Principal(user="bob"))
    AclKeys.of({"space:S": {"page:101": "space:S", "page:102": "space:S", "page:103": "space:S"}}).save(tmp_path / "acl.json")
    assert {h.id for h in (await pre.search(gate, "metastore compaction")).hits} == {"page:101", "page:102"}


def test_the_keys_are_read_again_when_a_sync_rewrites_them(tmp_path):
    acl = AclFile(tmp_path / "acl.json")
    assert acl.current() is None
    AclKeys.of({"space:S": {"page:1": "space:S"}}).save(tmp_path / "acl.json")
    assert acl.current() == AclKeys.of({"space:S": {"page:1": "space:S"}})
    AclKeys.of({"space:S": {"page:1": "page:1", "page:2": "page:1"}}).save(tmp_path / "acl.json")
    assert acl.current().by_space == {"space:S": {"page:1": ("page:1", "page:2")}}


async def test_issues_are_found_beside_pages_each_authorized_with_its_project(tmp_path):
    from core.models import Issue, JiraPermissions, Project

    from authz.tuples import issue_anchors

    store = FakeNavigatorStore()
    page = Page(page_id="1", space_key="S", title="Compaction", parent_id=None, position=0, url="u/1", markdown="Compaction of ACID tables.")
    await store.sync_space(SPACE, [page])

    def issue(key: str, security: str | None = None) -> Issue:
        return Issue(
            key=key, project_key="P", issue_type="Bug", hierarchy_level=0, summary=f"Compaction fails {key}", parent_key=None,
            position=int(key[2:]), url=f"j/{key}", markdown=f"# {key}: Compaction fails\n\nCompaction of ACID tables fails.", security_level=security,
        )

    issues = [issue("P-1"), issue("P-2", "10")]
    await store.sync_project(Project(key="P", name="Project", url="j"), issues)
    index = FakeSemanticIndex()
    await index.upsert([IndexDocument(page.id, page.markdown), *(IndexDocument(i.id, i.markdown) for i in issues)])
    levels = JiraPermissions(project_browsers={}, role_members={}, level_members={"10": ("group:leads#member",)})
    AclKeys.of({"space:S": {page.id: "space:S"}, "project:P": issue_anchors("P", issues, levels)}).save(tmp_path / "acl.json")
    semantic = SemanticRetriever(index, Navigator(store), candidates=40, acl=AclFile(tmp_path / "acl.json"))
    gate = bob("page:1", "project:P", "issue:P-1")  # P-2 is on a level bob is not in

    found = (await semantic.search(gate, "compaction of ACID tables")).hits
    assert {(h.id, h.kind, h.space) for h in found} == {("page:1", "page", "space:S"), ("issue:P-1", "issue", "project:P")}
    assert not [c for batch in gate.authorizer.calls[2:] for c in batch if c.object == "issue:P-2"]  # ranked out by the pre-filter
    assert {h.id for h in (await semantic.search(gate, "compaction", kinds=["issue"])).hits} == {"issue:P-1"}
    assert {h.id for h in (await semantic.search(gate, "compaction", projects=["P"])).hits} == {"issue:P-1"}
    assert {h.id for h in (await semantic.search(gate, "compaction", spaces=["S"])).hits} == {"page:1"}
    everyone = bob("page:1", "project:P", "issue:P-1", "issue:P-2", "security_level:P.10")  # a member of P-2's level
    assert {h.id for h in (await semantic.search(everyone, "compaction", kinds=["issue"])).hits} == {"issue:P-1", "issue:P-2"}
    no_project = bob("page:1", "issue:P-1", "issue:P-2")  # the issue passes, its project does not
    assert {h.id for h in (await semantic.search(no_project, "compaction")).hits} == {"page:1"}


async def test_graph_evidence_is_authorized_within_a_budget_best_items_first(monkeypatch):
    """Thirty entities, each on four documents of its own: only the best ones whose evidence fits
    the budget are kept, and no document beyond it is ever checked."""
    from retrievers.base import ChunkHit, GraphHit, RawResults

    monkeypatch.setattr("retrievers.semantic.GRAPH_EVIDENCE_BUDGET", 10)

    class Many(Scored):
        async def query(self, text, top_k, within=None):
            hits = [
                GraphHit("entity", f"Metastore part {n}", "", frozenset({"page:1", *(f"page:{100 + 4 * n + k}" for k in range(4))}), n, (), 0.9 - n / 100)
                for n in range(30)
            ]
            return RawResults(chunks=self._chunks, entities=hits, relations=[])

    store = FakeNavigatorStore()
    pages = [Page(page_id=str(n), space_key="S", title=f"T{n}", parent_id=None, position=n, url="u", markdown="") for n in [1, *range(100, 220)]]
    await store.sync_space(SPACE, pages)
    gate = bob(*(p.id for p in pages))
    result = await SemanticRetriever(Many([ChunkHit("c1", "page:1", "The metastore", 1, 0.5)]), Navigator(store), candidates=10).search(
        gate, "metastore part", response_format="detailed"
    )
    assert [e.name for e in result.entities] == ["Metastore part 0", "Metastore part 1"]  # 4 + 4 documents; a third would make 12
    assert len({r.object for r in gate.records if r.object.startswith("page:") and r.object != "page:1"}) <= 10


def test_the_second_hop_ranks_nothing_above_the_seed_it_was_reached_through():
    """Fused ranks (no index): page 3, reached from page 2 through an entity, gains enough credit
    to pass page 2 and even page 1; it stops just below page 2. Page 4 is reached from page 1 and
    stays where its credit puts it, below page 1."""
    from retrievers.semantic import _below_their_seeds, _Channel, _fuse

    direct = _Channel(1.0, [("page:1", "c1", "keywords"), ("page:2", "c2", "keywords"), ("page:3", "c3", "keywords"), ("page:4", "c4", "keywords")])
    bridge = _Channel(3.0, [("page:3", "c3", "linked through X"), ("page:4", "c4", "linked through Y")], {"page:3": "page:2", "page:4": "page:1"})
    fused = _fuse([direct, bridge])
    assert [r.doc_id for r in fused] == ["page:3", "page:4", "page:1", "page:2"]  # the credit alone
    ranked = _below_their_seeds(fused, bridge.via)
    assert [r.doc_id for r in ranked] == ["page:1", "page:4", "page:2", "page:3"]
    score = {r.doc_id: r.score for r in ranked}
    assert score["page:2"] > score["page:3"] > score["page:2"] - 1e-9
    assert _below_their_seeds(_fuse([direct]), {}) == _fuse([direct])


async def test_the_second_hop_does_not_credit_the_seeds_it_starts_from(monkeypatch):
    """Pages 1 and 2, the best found, both mention Velmora, and so does page 3: the second hop
    lifts page 3 and leaves the seeds' scores as their own channels made them."""
    from retrievers.semantic import WEIGHTS

    texts = {
        "1": "Quintor founded the town of Velmora.",
        "2": "The population of the town of Velmora.",
        "3": "Velmora population census of the harbour town.",
    }

    async def scores() -> dict[str, float]:
        semantic, _ = await retriever(texts)
        found = await semantic.search(bob("page:1", "page:2", "page:3"), "population of the town Quintor founded")
        return {h.id: h.score for h in found.hits}

    with_hop = await scores()
    monkeypatch.setitem(WEIGHTS, "bridge", 0.0)
    without = await scores()
    assert with_hop["page:1"] == without["page:1"] and with_hop["page:2"] == without["page:2"]
    assert with_hop["page:3"] > without["page:3"]


# An overview page (1) describes, one table row each, the three reference pages it links to; the
# reference pages say nearly the same of themselves, and only the overview says "drop". Ties go to
# the lower id, so page 4, the one asked about, comes last on the pages' own text.
OVERVIEW = {
    "1": "catalog resources.\n\n| resource | description |\n| --- | --- |\n"
    "| [tables (get)](page:2) | list what a database holds. |\n"
    "| [tables (put)](page:3) | create one. |\n"
    "| [tables (delete)](page:4) | delete (drop) a catalog table. |",
    "2": "catalog table resource, method get. parameters: database, table.",
    "3": "catalog table resource, method put. parameters: database, table.",
    "4": "catalog table resource, method delete. parameters: database, table.",
}


async def described(*visible: str, pages_left_out: frozenset[str] = frozenset()):
    semantic, _ = await retriever({n: t for n, t in OVERVIEW.items() if n not in pages_left_out})
    return await semantic.search(bob(*visible), "how do I drop a catalog table")


async def test_a_page_is_found_by_what_the_links_to_it_say(monkeypatch):
    """The overview's row for page 4 says what the question asks; page 4's own text does not."""
    from retrievers.semantic import WEIGHTS

    found = await described("page:1", "page:2", "page:3", "page:4")
    ranked = [h.id for h in found.hits]
    assert ranked.index("page:4") < min(ranked.index("page:2"), ranked.index("page:3"))
    assert "link text" in {h.id: h.why for h in found.hits}["page:4"]
    monkeypatch.setitem(WEIGHTS, "anchor", 0.0)
    ranked = [h.id for h in (await described("page:1", "page:2", "page:3", "page:4")).hits]
    assert ranked.index("page:4") > max(ranked.index("page:2"), ranked.index("page:3"))


async def test_what_a_hidden_page_says_of_a_link_ranks_nothing():
    """The overview is hidden: the answer is the one an index without it gives, word for word."""
    hidden = await described("page:2", "page:3", "page:4")
    absent = await described("page:2", "page:3", "page:4", pages_left_out=frozenset({"1"}))
    assert dataclasses.asdict(hidden) == dataclasses.asdict(absent)
    assert [h.id for h in hidden.hits] == ["page:2", "page:3", "page:4"]
