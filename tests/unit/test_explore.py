"""explore walks the entity graph through visible items only (DESIGN.md A4), on the fake index:
an entity any hidden page supports is neither shown nor walked through, and a hidden entity is
the same not_found as one that does not exist."""

from __future__ import annotations

import dataclasses

import pytest

from authz.base import Check
from authz.fake import FakeAuthorizer
from authz.gate import Gate
from authz.prefilter import AclFile, AclKeys
from core.errors import AuthorizationUnavailable, InvalidArgument, NotFound
from core.models import Page, Principal, Space
from navigator.fake import FakeNavigatorStore
from navigator.navigator import Navigator
from retrievers import explore
from retrievers.base import IndexDocument
from retrievers.fake_index import FakeSemanticIndex
from retrievers.semantic import SemanticRetriever

SPACE = Space(key="S", name="Space", url="u")
# The fake's entities are capitalised words; a relation joins two that follow each other.
TEXTS = {
    "1": "Beeline calls Metastore. Beeline calls Thrift.",  # everyone in the space
    "2": "Thrift carries Vault.",  # restricted: Thrift is also said here, Vault only here
    "3": "Metastore keeps Schema.",
}
EVERYONE = ("space:S", "page:1", "page:3")


async def retriever(texts: dict[str, str] = TEXTS, acl: AclFile | None = None) -> tuple[SemanticRetriever, FakeSemanticIndex]:
    store = FakeNavigatorStore()
    pages = [Page(page_id=n, space_key="S", title=f"t{n}", parent_id=None, position=int(n), url=f"u/{n}", markdown=t) for n, t in texts.items()]
    await store.sync_space(SPACE, pages)
    index = FakeSemanticIndex()
    await index.upsert([IndexDocument(p.id, p.markdown) for p in pages])
    return SemanticRetriever(index, Navigator(store), candidates=40, acl=acl), index


def gate(*visible: str, unavailable: bool = False) -> Gate:
    return Gate(FakeAuthorizer([Check("user:bob", "viewer", o) for o in visible], unavailable=unavailable), Principal(user="bob"))


async def test_the_walk_shows_visible_neighbours_nearest_first_with_their_evidence():
    semantic, _ = await retriever()
    found = await semantic.explore(gate(*EVERYONE, "page:2"), "Beeline", hops=2)
    assert found.entity == explore.ExploredEntity("Beeline", "Beeline (fake)", ["page:1"], 0)
    assert [(e.name, e.hops) for e in found.entities] == [("Metastore", 1), ("Thrift", 1), ("Schema", 2), ("Vault", 2)]
    assert {(r.source, r.target): r.evidence for r in found.relations} == {
        ("Beeline", "Metastore"): ["page:1"], ("Beeline", "Thrift"): ["page:1"],
        ("Metastore", "Schema"): ["page:3"], ("Thrift", "Vault"): ["page:2"],
    }
    assert not found.truncated


async def test_an_entity_a_hidden_page_supports_is_not_shown_and_not_walked_through():
    semantic, _ = await retriever()
    g = gate(*EVERYONE)
    found = await semantic.explore(g, "Beeline", hops=2)
    assert [(e.name, e.hops) for e in found.entities] == [("Metastore", 1), ("Schema", 2)]
    shown = str(dataclasses.asdict(found))
    assert "Thrift" not in shown and "Vault" not in shown and "page:2" not in shown
    assert "page:2" in {r.object for r in g.records}  # asked, and denied: not assumed either way


async def test_a_hidden_entity_is_the_same_not_found_as_one_that_does_not_exist():
    semantic, _ = await retriever()
    failures = []
    for name in ("Vault", "Thrift", "Nowhere"):
        with pytest.raises(NotFound) as failure:
            await semantic.explore(gate(*EVERYONE), name)
        failures.append(failure.value)
    assert {type(f) for f in failures} == {NotFound}


async def test_names_are_found_regardless_of_case_and_the_limit_is_said():
    semantic, _ = await retriever()
    found = await semantic.explore(gate(*EVERYONE), "  beeline ", hops=2, limit=1)
    assert found.entity.name == "Beeline"
    assert [e.name for e in found.entities] == ["Metastore"] and found.truncated
    assert [(r.source, r.target) for r in found.relations] == [("Beeline", "Metastore")]


async def test_one_hop_stays_one_hop():
    semantic, index = await retriever()
    found = await semantic.explore(gate(*EVERYONE), "Beeline")
    assert [e.name for e in found.entities] == ["Metastore"]
    assert [method for method, _ in index.calls if method == "neighbourhood"] == ["neighbourhood"]


async def test_authorization_that_cannot_be_decided_fails_the_request():
    semantic, _ = await retriever()
    with pytest.raises(AuthorizationUnavailable):
        await semantic.explore(gate(*EVERYONE, unavailable=True), "Beeline")


@pytest.mark.parametrize(("entity", "hops", "limit", "needle"), [("", 1, 5, "entity"), ("x" * 201, 1, 5, "entity"), ("Beeline", 3, 5, "hops"), ("Beeline", 1, 0, "limit")])
async def test_bad_arguments_are_named(entity, hops, limit, needle):
    semantic, _ = await retriever()
    with pytest.raises(InvalidArgument, match=needle):
        await semantic.explore(gate(*EVERYONE), entity, hops=hops, limit=limit)


async def test_the_budget_of_checks_leaves_candidates_out_never_shows_them_unchecked(monkeypatch):
    monkeypatch.setattr(explore, "EVIDENCE_BUDGET", 0)
    semantic, _ = await retriever()
    g = gate(*EVERYONE, "page:2")
    found = await semantic.explore(g, "Beeline", hops=2)
    assert found.entities == [] and found.relations == []
    assert {r.object for r in g.records} == {"space:S", "page:1"}  # the start's evidence and its space only


async def test_with_the_sync_keys_hidden_items_are_not_even_candidates(tmp_path):
    keys = tmp_path / "acl.json"
    # page 2 sits under a restricted page 4, which bob may not see.
    AclKeys.of({"space:S": {"page:1": "space:S", "page:3": "space:S", "page:2": "page:4"}}).save(keys)
    semantic, _ = await retriever(acl=AclFile(keys))
    g = gate(*EVERYONE)
    found = await semantic.explore(g, "Beeline", hops=2)
    assert [e.name for e in found.entities] == ["Metastore", "Schema"]
    assert "page:4" in {r.object for r in g.records}  # the restricted anchor, asked by the pre-filter
    assert "page:2" not in {r.object for r in g.records}  # so nothing standing on page 2 was a candidate
