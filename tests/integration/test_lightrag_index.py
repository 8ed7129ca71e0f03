"""Real LightRAG 1.5.7 with the offline providers, on both storage profiles: files in tmp_path, and
the production engines (PostgreSQL with pgvector, Neo4j) of the test session."""

from __future__ import annotations

import json
import logging
import secrets
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lightrag.constants import GRAPH_FIELD_SEP
from lightrag.kg.nano_vector_db_impl import NanoVectorDBStorage
from lightrag.utils import compute_mdhash_id

from core.errors import ConfigurationError, IndexError_, InvalidArgument
from core.providers.local import LocalEmbedder, LocalExtractor
from core.settings import LightRAGSettings
from retrievers import lightrag_adapter
from retrievers.lightrag_adapter import Engines, LightRAGIndex
from retrievers.base import IndexDocument, SemanticIndex

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

DOCS = [
    IndexDocument("page:1", "Apache Hive uses HiveServer2 to serve JDBC clients. HiveServer2 supports Kerberos."),
    IndexDocument("page:2", "The Hive Metastore stores table schemas in MySQL. HiveServer2 reads schemas from the Metastore."),
    IndexDocument("page:3", "Apache Spark reads Hive tables through the Metastore and Thrift."),
]


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder()


@pytest.fixture(scope="module")
def extractor() -> LocalExtractor:
    return LocalExtractor()


def open_index(path: Path, embedder: LocalEmbedder, extractor: LocalExtractor) -> LightRAGIndex:
    return LightRAGIndex(LightRAGSettings(workspace="test"), path, embedder, extractor)


Opener = Callable[[str], LightRAGIndex]


@pytest.fixture(params=["files", "production"])
def opener(request: pytest.FixtureRequest, tmp_path: Path, embedder: LocalEmbedder, extractor: LocalExtractor) -> Opener:
    """Opens the index named ``name`` on one storage profile: a directory of its own, or a
    workspace of its own in a fresh PostgreSQL database and the session's Neo4j."""
    if request.param == "files":
        return lambda name: open_index(tmp_path / name, embedder, extractor)
    postgres, services = request.getfixturevalue("postgres"), request.getfixturevalue("services")
    database = f"lightrag_{secrets.token_hex(4)}"
    postgres.create_database(database)
    engines = Engines(postgres.settings(database), services.neo4j)
    return lambda name: LightRAGIndex(
        LightRAGSettings(workspace=f"{name}_{database}", storage="production"), tmp_path / name, embedder, extractor, engines=engines
    )


async def test_insert_query_delete_update(opener: Opener) -> None:
    progress: list[int] = []
    async with opener("a") as index:
        typed: SemanticIndex = index
        await typed.upsert(DOCS, on_progress=progress.append)
        assert progress == [3]
        assert await index.indexed_doc_ids() == {"page:1", "page:2", "page:3"}

        results = await index.query("How does HiveServer2 talk to JDBC clients?", top_k=5)
        # The query read ahead (what search does while it authorizes) searches alike.
        probe = await index.probe("How does HiveServer2 talk to JDBC clients?")
        assert probe.low and probe.high and len(probe.vectors) == 3
        assert await index.query(probe, top_k=5) == results
        by_chunk = {hit.doc_id: hit.text for hit in results.chunks}
        assert by_chunk["page:1"] == DOCS[0].text
        assert all(hit.text == next(d.text for d in DOCS if d.doc_id == hit.doc_id) for hit in results.chunks)
        shared = next(hit for hit in results.entities if hit.name == "HiveServer2")
        assert shared.doc_ids == {"page:1", "page:2"}
        assert all(hit.doc_ids for hit in [*results.entities, *results.relations])

        await index.delete(["page:2", "page:never-indexed"])
        assert await index.indexed_doc_ids() == {"page:1", "page:3"}
        results = await index.query("HiveServer2 Metastore MySQL schemas", top_k=5)
        assert "page:2" not in {hit.doc_id for hit in results.chunks}
        shared = next(hit for hit in results.entities if hit.name == "HiveServer2")
        assert shared.doc_ids == {"page:1"}
        assert all("page:2" not in hit.doc_ids for hit in [*results.entities, *results.relations])

        changed = IndexDocument("page:1", "Apache Hive now runs queries on Tez instead of MapReduce.")
        await index.upsert([changed])
        results = await index.query("Tez MapReduce HiveServer2", top_k=5)
        texts = [hit.text for hit in results.chunks if hit.doc_id == "page:1"]
        assert texts == [changed.text]
        assert await index.indexed_doc_ids() == {"page:1", "page:3"}


async def test_deleting_several_documents_reads_each_cached_extraction_once(
    opener: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deleting a document rebuilds the entities it shared from the cached extractions of every
    chunk that still mentions them; deleting two in one call reads each of those once, and leaves
    the same graph as deleting them one call at a time."""
    fourth = IndexDocument("page:4", "HiveServer2 runs on Hive and reads the Metastore over Thrift.")
    parsed: list[str] = []
    real_parse = lightrag_adapter._parse_cached_extraction

    async def counted(storage: object, result: str, chunk_id: str, *args: object) -> object:
        parsed.append(chunk_id)
        return await real_parse(storage, result, chunk_id, *args)

    monkeypatch.setattr(lightrag_adapter, "_parse_cached_extraction", counted)
    async with opener("together") as index:
        await index.upsert([*DOCS, fourth])
        await index.delete(["page:2", "page:3"])
        together = await index.entities_of(["page:1", "page:4"])
    assert parsed and len(parsed) == len(set(parsed))  # shared by both deletions, read once
    async with opener("apart") as index:
        await index.upsert([*DOCS, fourth])
        await index.delete(["page:2"])
        await index.delete(["page:3"])
        apart = await index.entities_of(["page:1", "page:4"])
    # (PostgreSQL stamps cached extractions to the second, so ties may join descriptions in either order)
    assert [(h.name, sorted(h.description.split("\n")), h.doc_ids) for h in together] == [
        (h.name, sorted(h.description.split("\n")), h.doc_ids) for h in apart
    ]
    assert any(h.doc_ids == {"page:1", "page:4"} for h in together)


async def test_a_copy_is_indexed_and_within_narrows_every_channel(opener: Opener, monkeypatch: pytest.MonkeyPatch) -> None:
    """A page copied into another space (the same text under another id) is indexed like any
    page; ``within`` leaves only those documents' chunks in every channel, and only the entities
    and relations all of whose documents are among them, scored as without it (whether the file
    storage scores every row or copies the admitted ones out first)."""
    copy = IndexDocument("page:4", DOCS[0].text)
    query = "HiveServer2 JDBC clients Kerberos, Spark Thrift"
    async with opener("a") as index:
        await index.upsert([*DOCS, copy])
        assert await index.indexed_doc_ids() == {"page:1", "page:2", "page:3", "page:4"}
        everything = await index.query(query, top_k=10)
        within = frozenset({"page:3", "page:4"})
        narrowed = await index.query(query, top_k=10, within=within)
        with monkeypatch.context() as patched:
            patched.setattr(lightrag_adapter, "WHOLE_SCAN_SHARE", 1)  # every row scored only when all are admitted
            copied = await index.query(query, top_k=10, within=within)
        # Filtered before ranking, not after: the one nearest chunk of page:3 is found at top_k=1
        # although another page's is nearer.
        first = await index.query(query, top_k=1, within=frozenset({"page:3"}))

    assert everything.chunks[0].doc_id != "page:3"
    assert [hit.doc_id for hit in first.chunks] == [hit.doc_id for hit in first.lexical] == ["page:3"]
    assert {"page:1", "page:4"} <= {hit.doc_id for hit in everything.chunks}
    scored = [(hit.doc_id, round(hit.score, 4)) for hit in narrowed.chunks]
    assert scored and scored == [(hit.doc_id, round(hit.score, 4)) for hit in everything.chunks if hit.doc_id in within]
    assert {hit.doc_id for hit in narrowed.lexical} == within
    assert [_ranked(hits) for hits in (copied.chunks, copied.entities, copied.relations)] == [
        _ranked(hits) for hits in (narrowed.chunks, narrowed.entities, narrowed.relations)
    ]
    assert "HiveServer2" in {hit.name for hit in everything.entities}  # supported by page:1 and page:2 too
    graph = [*narrowed.entities, *narrowed.relations]
    assert graph and all(hit.doc_ids <= within for hit in graph)
    # The query names HiveServer2: page:4 alone rebuilds it, without page:1's and page:2's text.
    [named] = [hit for hit in narrowed.entities if hit.name == "HiveServer2"]
    assert named.partial and named.doc_ids == {"page:4"} and named.description == ""
    assert all(hit.partial == (hit.doc_ids != full.doc_ids) for hit in graph for full in [*everything.entities, *everything.relations] if full.name == hit.name)


async def test_a_name_only_hidden_pages_hold_costs_what_a_name_found_nowhere_does(opener: Opener, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 47 item 6 (DESIGN.md A6): explore's first lookup takes the same steps for an entity
    the caller's documents do not support and for a name no document holds, so neither its answer
    nor its time tells them apart."""
    async with opener("a") as index:
        await index.upsert(DOCS)
        within = frozenset({"page:3"})
        assert (await index.entity_named("HiveServer2")) is not None  # held, but only by page:1 and page:2
        steps: list[str] = []
        for method in ("embed",):
            original = getattr(index._embedder, method)
            monkeypatch.setattr(index._embedder, method, lambda *a, _o=original, **k: (steps.append(method), _o(*a, **k))[1])
        for step in ("_nearest", "_entities"):
            original = getattr(index, step)

            async def counted(*a: Any, _o: Any = original, _s: str = step, **k: Any) -> Any:
                steps.append(_s)
                return await _o(*a, **k)

            monkeypatch.setattr(index, step, counted)
        assert await index.entity_named("HiveServer2", within) is None
        hidden, steps[:] = list(steps), []
        assert await index.entity_named("Nosuchentity Anywhere", within) is None
        assert hidden == steps == ["embed", "_nearest", "_entities"]


def _ranked(hits: list[Any]) -> list[tuple[str, float]]:
    return [(getattr(hit, "chunk_id", None) or hit.name, round(hit.score, 5)) for hit in hits]


async def nearest(index: LightRAGIndex, name: str, within: set[str]) -> list[str]:
    """The entities nearest the entity ``name``'s own vector, of those the documents ``within``
    support whole or rebuild."""
    rag = index._rag
    row_id = compute_mdhash_id(name, prefix="ent-")
    if isinstance(rag.entities_vdb, NanoVectorDBStorage):  # from its matrix: a query-only index keeps no other copy
        table = await rag.entities_vdb.client_storage
        vector = table["matrix"][[row["__id__"] for row in table["data"]].index(row_id)]
    else:
        vector = (await rag.entities_vdb.get_vectors_by_ids([row_id]))[row_id]
    rows = await index._nearest(rag.entities_vdb, "", 5, vector, lightrag_adapter._entity_vdb_id, frozenset(within))
    return [row["entity_name"] for row in rows]


async def test_what_rebuilds_each_vector_is_found_kept_and_refound(opener: Opener, extractor: LocalExtractor) -> None:
    """An item on several documents is rebuilt by those whose own extraction of it holds its head
    fragment (and a relation's keywords): a copy of a page rebuilds what the page does. Found as
    documents are indexed, used by the pre-filtered vector search, kept beside the index, found
    again from the cache for an index without that file, and again when documents go."""
    copy = IndexDocument("page:4", DOCS[0].text)
    docs = [*DOCS, copy]
    expected: dict[str, set[str]] = {}  # entity on several pages → the pages holding its head fragment
    fragments = {doc.doc_id: {name: " ".join(description.split()) for name, _, description in extractor.extract(doc.text).entities} for doc in docs}
    for name in {name for found in fragments.values() for name in found}:
        held = {doc: found[name] for doc, found in fragments.items() if name in found}
        if len(held) > 1:
            head = min(held.values())
            expected[name] = {doc for doc, fragment in held.items() if fragment == head}
    # HiveServer2 is on page:2 too, whose fragment is not its head
    assert expected["HiveServer2"] == {"page:1", "page:4"} and "HiveServer2" in fragments["page:2"]

    def rebuilders(index: LightRAGIndex) -> dict[str, set[str]]:
        return {name: set(index._heads[compute_mdhash_id(name, prefix="ent-")][1]) for name in expected if compute_mdhash_id(name, prefix="ent-") in index._heads}

    async with opener("a") as index:
        await index.upsert(docs)
        found = rebuilders(index)
        by_copy, by_other = await nearest(index, "HiveServer2", {"page:4"}), await nearest(index, "HiveServer2", {"page:2"})
        relation_heads = {row_id for row_id in index._heads if row_id.startswith("rel-")}
    assert found == expected  # single-page items need no entry: all their documents rebuild them
    assert by_copy[0] == "HiveServer2" and "HiveServer2" not in by_other
    heads_file = next(Path(index._working_dir).rglob(lightrag_adapter.HEADS_FILE))
    kept = json.loads(heads_file.read_text())

    heads_file.unlink()  # an index from before the file: found again from the cache
    async with opener("a") as index:
        assert rebuilders(index) == expected
        assert {row_id for row_id in index._heads if row_id.startswith("rel-")} == relation_heads
    assert json.loads(heads_file.read_text()) == kept
    async with opener("a") as index:
        await index.delete(["page:1", "page:4"])
        after = rebuilders(index)
    assert "HiveServer2" not in after  # on page:2 alone now


async def test_an_index_open_for_queries_finds_nothing_to_rebuild_without_the_file(tmp_path: Path, embedder: LocalEmbedder, extractor: LocalExtractor) -> None:
    async with open_index(tmp_path, embedder, extractor) as index:
        await index.upsert([*DOCS, IndexDocument("page:4", DOCS[0].text)])
        assert index._heads
    next(tmp_path.rglob(lightrag_adapter.HEADS_FILE)).unlink()
    async with LightRAGIndex(LightRAGSettings(workspace="test"), tmp_path, embedder, extractor, queries_only=True) as index:
        assert index._heads == {}  # no cache to read: every item ranks only for callers who see all of it
        assert "HiveServer2" not in await nearest(index, "HiveServer2", {"page:4"})
        assert (await nearest(index, "HiveServer2", {"page:1", "page:2", "page:4"}))[0] == "HiveServer2"  # whole, as before


async def test_reopen_persists_and_workspaces_do_not_leak(opener: Opener) -> None:
    async with opener("a") as index:
        await index.upsert(DOCS[:1])
    async with opener("b") as other:
        assert await other.indexed_doc_ids() == set()
        assert (await other.query("HiveServer2", top_k=3)).chunks == []
    async with opener("a") as index:
        assert await index.indexed_doc_ids() == {"page:1"}
        assert (await index.query("HiveServer2", top_k=3)).chunks[0].doc_id == "page:1"


async def test_one_upsert_writes_each_storage_once_and_the_document_status_last(
    tmp_path: Path, embedder: LocalEmbedder, extractor: LocalExtractor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LightRAG flushes every storage after each document; rewriting whole files per document
    made indexing cost grow with the square of the index."""
    from lightrag.kg.json_doc_status_impl import JsonDocStatusStorage
    from lightrag.kg.json_kv_impl import JsonKVStorage
    from lightrag.kg.networkx_impl import NetworkXStorage

    writes: list[str] = []
    for storage_class in (JsonDocStatusStorage, JsonKVStorage, NanoVectorDBStorage, NetworkXStorage):

        async def counted(self, real=storage_class.index_done_callback) -> None:
            writes.append(self.namespace)
            await real(self)

        monkeypatch.setattr(storage_class, "index_done_callback", counted)
    async with open_index(tmp_path, embedder, extractor) as index:
        writes.clear()
        await index.upsert(DOCS)
        assert len(writes) == len(set(writes)), f"a storage was written more than once: {writes}"
        assert {"text_chunks", "chunks", "entities", "relationships", "chunk_entity_relation"} <= set(writes)
        assert writes[-1] == "doc_status"
        writes.clear()
        changed = IndexDocument("page:1", "Apache Hive now runs its queries on Tez.")
        await index.upsert([changed], remove=["page:2"])  # a change and a removal: one write of each store
        assert len(writes) == len(set(writes)) and writes[-1] == "doc_status"
        assert await index.indexed_doc_ids() == {"page:1", "page:3"}
        writes.clear()
        await index.delete(["page:1"])
        assert len(writes) == len(set(writes)) and writes[-1] == "doc_status"
        assert await index.indexed_doc_ids() == {"page:3"}
        with pytest.raises(InvalidArgument, match="indexed and removed"):
            await index.upsert([changed], remove=["page:1"])


WRITTEN = "doc_status"


@pytest.mark.parametrize(
    ("spacing", "events"),
    [
        (0, [WRITTEN, WRITTEN, "1 done", WRITTEN, "2 done", "3 done"]),  # reported once the next batch is in
        (10**6, [WRITTEN, "1 done", "2 done", WRITTEN, "3 done"]),
    ],
)
async def test_writes_between_batches_wait_until_the_work_since_outweighs_them(
    tmp_path: Path, embedder: LocalEmbedder, extractor: LocalExtractor, monkeypatch: pytest.MonkeyPatch, spacing: int, events: list[str]
) -> None:
    """One batch per document: with no spacing every batch is written; with a spacing no batch
    outweighs, only the first (which times a write) and the end are, and nothing is lost. The
    last progress report comes once everything is written."""
    from lightrag.kg.json_doc_status_impl import JsonDocStatusStorage

    seen: list[str] = []

    async def counted(self, real=JsonDocStatusStorage.index_done_callback) -> None:
        seen.append(self.namespace)
        await real(self)

    monkeypatch.setattr(JsonDocStatusStorage, "index_done_callback", counted)
    monkeypatch.setattr(lightrag_adapter, "WRITE_SPACING", spacing)
    settings = LightRAGSettings(workspace="test", insert_batch_size=1)
    async with LightRAGIndex(settings, tmp_path, embedder, extractor) as index:
        await index.upsert(DOCS, on_progress=lambda done: seen.append(f"{done} done"))
    assert seen == events
    async with LightRAGIndex(settings, tmp_path, embedder, extractor) as index:
        assert await index.indexed_doc_ids() == {doc.doc_id for doc in DOCS}


def test_a_write_waits_for_the_work_since_and_is_left_to_the_end_when_that_comes_sooner() -> None:
    spacing = lightrag_adapter.WRITE_SPACING
    assert lightrag_adapter._write_due(since_s=0.0, took_s=0.0, left_s=0.0)  # the first: times a write
    assert not lightrag_adapter._write_due(since_s=spacing * 2 - 0.1, took_s=2.0, left_s=100.0)
    assert lightrag_adapter._write_due(since_s=spacing * 2, took_s=2.0, left_s=100.0)
    assert not lightrag_adapter._write_due(since_s=spacing * 2, took_s=2.0, left_s=spacing * 2 - 0.1)  # the end writes sooner
    assert not lightrag_adapter._write_due(since_s=1000.0, took_s=2.0, left_s=0.0)  # the last batch: the end writes


class Recording(LocalEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    async def embed(self, texts: list[str], *, query: bool = False):
        self.texts.extend(texts)
        return await super().embed(texts, query=query)


async def test_each_batch_is_embedded_as_the_next_goes_in_not_held_to_the_write(
    tmp_path: Path, extractor: LocalExtractor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no write due between batches, a batch's vectors are still embedded as the next one
    is inserted, and its progress reported once they are (held to the write, the work of every
    batch since the last write was left to the end of the run); a head embedded once is not
    embedded again when a later batch mentions its item (HiveServer2's head is page:1's fragment:
    page:2 keeps it); and what rebuilds each vector is found from the extractions noted as the
    upsert ran, with no cached one parsed."""
    seen: list[str] = []

    class Noting(Recording):
        async def embed(self, texts: list[str], *, query: bool = False):
            seen.extend(texts)
            return await super().embed(texts, query=query)

    parsed: list[str] = []

    async def counted(*args, real=lightrag_adapter._parse_extraction, **kwargs):
        parsed.append(args[2])
        return await real(*args, **kwargs)

    monkeypatch.setattr(lightrag_adapter, "WRITE_SPACING", 10**6)
    monkeypatch.setattr(lightrag_adapter, "_parse_extraction", counted)
    recording = Noting()
    settings = LightRAGSettings(workspace="test", insert_batch_size=1)
    async with LightRAGIndex(settings, tmp_path, recording, extractor) as index:
        await index.upsert(DOCS, on_progress=lambda done: seen.append(f"{done} done"))
        entity = await index._rag.entities_vdb.get_by_id(compute_mdhash_id("HiveServer2", prefix="ent-"))
    for number, doc in enumerate(DOCS[:2], start=1):
        assert seen.index(doc.text) < seen.index(f"{number} done")
    assert GRAPH_FIELD_SEP in entity["content"]  # merged from both pages, upserted by both batches
    heads = [text for text in recording.texts if text not in {doc.text for doc in DOCS}]
    assert heads and len(heads) == len(set(heads)), "a head was embedded twice"
    assert parsed == []


async def test_a_stores_rows_go_to_the_embedder_together_not_in_lightrags_thirty_twos(tmp_path: Path, extractor: LocalExtractor) -> None:
    """The rows a vector store holds back at a checkpoint are embedded in calls of up to
    ``EMBED_BATCH`` texts (each call costs the embedder time of its own, and most rows are short),
    not in LightRAG's default 32s; and each is embedded once."""
    calls: list[list[str]] = []

    class Calls(LocalEmbedder):
        async def embed(self, texts: list[str], *, query: bool = False):
            calls.append(list(texts))
            return await super().embed(texts, query=query)

    pages = [" ".join(f"Set hive.exec.option{n} to turn on feature number {n}." for n in range(start, start + 15)) for start in range(0, 60, 15)]
    async with open_index(tmp_path, Calls(), extractor) as index:
        await index.upsert([IndexDocument(f"page:{number}", page) for number, page in enumerate(pages, start=1)])
        names = [name for name in await index._rag.chunk_entity_relation_graph.get_all_labels() if name.startswith("hive.exec.option")]
    assert len(names) == 60
    heads = [[text for text in call if text.startswith("hive.exec.option")] for call in calls]
    assert max(map(len, heads)) == 60, f"the entities' heads went in calls of {sorted(len(h) for h in heads if h)}"
    texts = [text for call in calls for text in call]
    assert len(texts) == len(set(texts)), "a text was embedded twice"


class FailsOn(LocalEmbedder):
    """Fails every call that embeds ``text`` (while ``failing``)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text, self.failing = text, True

    async def embed(self, texts: list[str], *, query: bool = False):
        if self.failing and self.text in texts:
            raise RuntimeError("embedding service unavailable")
        return await super().embed(texts, query=query)


async def test_a_batch_that_cannot_be_embedded_fails_the_upsert_and_loses_nothing(
    tmp_path: Path, extractor: LocalExtractor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second batch's vectors fail as the third goes in: the upsert says so, what the first
    write held stays, and the next upsert indexes the rest."""
    monkeypatch.setattr(lightrag_adapter, "WRITE_SPACING", 10**6)  # only the first batch is written before the end
    settings = LightRAGSettings(workspace="test", insert_batch_size=1)
    failing = FailsOn(DOCS[1].text)
    async with LightRAGIndex(settings, tmp_path, failing, extractor) as index:
        with pytest.raises(IndexError_, match="embedding service unavailable"):
            await index.upsert(DOCS)
    failing.failing = False
    async with LightRAGIndex(settings, tmp_path, failing, extractor) as index:
        assert "page:1" in await index.indexed_doc_ids()
        await index.upsert(DOCS)
        assert await index.indexed_doc_ids() == {doc.doc_id for doc in DOCS}
        results = await index.query("Where does the Hive Metastore store table schemas?", top_k=3)
    assert "page:2" in {hit.doc_id for hit in results.chunks}


async def test_entities_and_relations_are_embedded_by_name_and_description_head(tmp_path: Path, extractor: LocalExtractor) -> None:
    recording = Recording()
    long_page = " ".join(f"HiveServer2 serves JDBC clients of the Metastore in deployment number {n}." for n in range(30))
    async with open_index(tmp_path, recording, extractor) as index:
        await index.upsert([*DOCS, IndexDocument("page:9", long_page)])
        entity = await index._rag.entities_vdb.get_by_id(compute_mdhash_id("HiveServer2", prefix="ent-"))
    [stored] = tmp_path.rglob("vdb_relationships.json")
    relations = json.loads(stored.read_text())["data"]
    name, description = entity["content"].split("\n", 1)
    assert name == "HiveServer2" and GRAPH_FIELD_SEP in description  # stored whole: fragments of several pages
    head = min(" ".join(fragment.split()) for fragment in description.split(GRAPH_FIELD_SEP))  # whatever order they merged in
    assert len(head) <= lightrag_adapter.DESCRIPTION_HEAD
    assert f"HiveServer2\n{head}" in recording.texts and entity["content"] not in recording.texts
    assert relations and all(row["content"] not in recording.texts for row in relations if len(row["content"]) > 300)
    longest = max(len(text) for text in recording.texts if text.startswith("HiveServer2\n"))
    assert longest <= len("HiveServer2\n") + lightrag_adapter.DESCRIPTION_HEAD


def test_a_query_is_embedded_as_it_is() -> None:
    assert lightrag_adapter._headed("HiveServer2, JDBC", 1) == "HiveServer2, JDBC"
    assert lightrag_adapter._headed("serve\tHiveServer2\nJDBC", 2) == "serve\tHiveServer2\nJDBC"
    assert lightrag_adapter._headed(f"HiveServer2\n{'word ' * 100}", 1) == "HiveServer2\n" + " ".join(["word"] * 30)
    merged = [f"HiveServer2\nserves JDBC{GRAPH_FIELD_SEP}accepts  Kerberos", f"HiveServer2\naccepts Kerberos{GRAPH_FIELD_SEP}serves JDBC"]
    assert {lightrag_adapter._headed(text, 1) for text in merged} == {"HiveServer2\naccepts Kerberos"}  # either merge order


class Witness(LocalExtractor):
    """Records what the index hinted and what LightRAG then asked."""

    def __init__(self) -> None:
        super().__init__()
        self.hinted: list[str] = []
        self.asked: list[str] = []

    def prefetch(self, texts) -> None:
        self.hinted.extend(texts)

    def extract(self, text: str):
        self.asked.append(text)
        return super().extract(text)


async def test_the_index_hints_each_chunk_before_lightrag_asks_for_it(tmp_path: Path, embedder: LocalEmbedder) -> None:
    witness = Witness()
    # LightRAG resolves HTML entities before it chunks, and again in each prompt: hinted as it asks
    long_text = " ".join(f"Sentence {i} says HiveServer2 &amp;amp; the Metastore &lt;talk&gt; number {i}." for i in range(400))
    docs = [*DOCS, IndexDocument("page:4", long_text)]
    settings = LightRAGSettings(workspace="test", insert_batch_size=2, chunk_token_size=200, chunk_overlap_token_size=20)
    async with LightRAGIndex(settings, tmp_path, embedder, witness) as index:
        await index.upsert(docs)
    assert len(witness.asked) > len(docs)  # the long page came in several chunks
    assert sorted(witness.asked) == sorted(witness.hinted)


class NoHints(LocalExtractor):
    def prefetch(self, texts) -> None:
        raise RuntimeError("no pool today")


async def test_indexing_goes_on_when_working_ahead_fails(tmp_path: Path, embedder: LocalEmbedder, caplog: pytest.LogCaptureFixture) -> None:
    async with LightRAGIndex(LightRAGSettings(workspace="test", insert_batch_size=2), tmp_path, embedder, NoHints()) as index:
        await index.upsert(DOCS)
        assert await index.indexed_doc_ids() == {doc.doc_id for doc in DOCS}
    assert "working ahead on the next batch failed" in caplog.text


async def test_guards(tmp_path: Path, embedder: LocalEmbedder, extractor: LocalExtractor, monkeypatch: pytest.MonkeyPatch) -> None:
    async with open_index(tmp_path / "a", embedder, extractor) as index:
        with pytest.raises(ConfigurationError, match="already open in this process"):
            await open_index(tmp_path / "b", embedder, extractor).__aenter__()
        with pytest.raises(InvalidArgument):
            await index.upsert([IndexDocument("spaces/HIVE/page", "text")])
    monkeypatch.setenv("ENTITY_TYPES", "person")
    with pytest.raises(ConfigurationError, match="ENTITY_TYPES"):
        await open_index(tmp_path / "c", embedder, extractor).__aenter__()
    with pytest.raises(ConfigurationError, match="outside"):
        await index.query("x", top_k=1)


def test_import_ignores_dotenv_and_keeps_root_logger(tmp_path: Path) -> None:
    """LightRAG reads ``.env`` from the CWD at import and nano_vectordb raises the root logger to INFO."""
    (tmp_path / ".env").write_text("WAYFINDER_LEAK=from-dotenv\nTOP_K=1\n")
    (tmp_path / "config.ini").write_text("[neo4j]\nuri = bolt://elsewhere\n")
    probe = (
        "import logging, os\n"
        "import retrievers.lightrag_adapter\n"
        "from lightrag import QueryParam\n"
        "print(os.environ.get('WAYFINDER_LEAK'), QueryParam().top_k, logging.getLogger().level)\n"
    )
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2]), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    leaked, top_k, root_level = out.stdout.split()
    assert leaked == "None"
    assert top_k != "1"
    assert int(root_level) == logging.WARNING


async def test_an_unchanged_page_is_not_indexed_again(tmp_path: Path, embedder: LocalEmbedder) -> None:
    """Pages as a source gives them (a trailing line break, an HTML entity) are stored as LightRAG
    cleans them; upserting them again unchanged asks nothing of the extractor, a changed one is redone."""
    docs = [IndexDocument(d.doc_id, d.text + " Tom &amp; Jerry.\n") for d in DOCS]
    witness = Witness()
    async with LightRAGIndex(LightRAGSettings(workspace="test"), tmp_path, embedder, witness) as index:
        await index.upsert(docs)
    assert witness.asked
    witness = Witness()
    async with LightRAGIndex(LightRAGSettings(workspace="test"), tmp_path, embedder, witness) as index:
        await index.upsert(docs)
        assert witness.asked == [] and witness.hinted == []
        await index.upsert([*docs[:2], IndexDocument("page:3", "Apache Spark now reads Iceberg tables.")])
        assert await index.indexed_doc_ids() == {"page:1", "page:2", "page:3"}
    assert witness.asked and all("Iceberg" in text for text in witness.asked)


async def test_an_index_open_for_queries_answers_alike_refuses_changes_and_leaves_the_cache_unloaded(
    tmp_path: Path, embedder: LocalEmbedder, extractor: LocalExtractor
) -> None:
    query = "How does HiveServer2 talk to JDBC clients?"
    async with open_index(tmp_path, embedder, extractor) as index:
        await index.upsert([*DOCS, IndexDocument("page:4", DOCS[0].text)])  # a copy rebuilds what page:1 does
    async with open_index(tmp_path, embedder, extractor) as index:  # scores as read back from the files
        written = await index.query(query, top_k=5)
        filtered = await index.query(query, top_k=5, within={"page:1", "page:2"})
        around = await index.neighbourhood(["HiveServer2"])
        rebuilt = [(await index._row_documents(store)).rebuilders for store in (index._rag.entities_vdb, index._rag.relationships_vdb)]
        assert rebuilt[0] and rebuilt[1]
    files = {path.name: path.read_bytes() for path in (tmp_path / "test").iterdir()}
    served = LightRAGIndex(LightRAGSettings(workspace="test"), tmp_path, embedder, extractor, queries_only=True)
    async with served as index:
        answered = await index.query(query, top_k=5)
        assert answered == written and await index.entities_of(["page:1"]) != []
        assert await index.query(query, top_k=5, within={"page:1", "page:2"}) == filtered
        assert await index.neighbourhood(["HiveServer2"]) == around
        assert [(await index._row_documents(store)).rebuilders for store in (index._rag.entities_vdb, index._rag.relationships_vdb)] == rebuilt
        rows = [row for store in ("entities_vdb", "relationships_vdb", "chunks_vdb") for row in (await getattr(index._rag, store).client_storage)["data"]]
        assert rows and not any("vector" in row for row in rows)  # packed: the matrix holds the vectors
        for change in (lambda: index.upsert(DOCS[:1]), lambda: index.delete(["page:1"])):
            with pytest.raises(ConfigurationError, match="queries only"):
                await change()
        with pytest.raises(IndexError_, match="not loaded"):  # never loaded, never read
            await index._rag.llm_response_cache.get_by_id("anything")
    assert {path.name: path.read_bytes() for path in (tmp_path / "test").iterdir()} == files  # nothing written
