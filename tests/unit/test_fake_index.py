"""The in-memory index honours the SemanticIndex contract."""

from __future__ import annotations

import pytest

from core.errors import InvalidArgument
from retrievers.fake_index import FakeSemanticIndex
from retrievers.base import IndexDocument, SemanticIndex

DOCS = [
    IndexDocument("page:1", "Apache Hive uses HiveServer2 for JDBC."),
    IndexDocument("page:2", "The Metastore talks to HiveServer2."),
    IndexDocument("page:3", "Spark reads tables."),
]


async def test_satisfies_protocol() -> None:
    index: SemanticIndex = FakeSemanticIndex()
    assert await index.indexed_doc_ids() == set()


async def test_upsert_query_delete() -> None:
    index = FakeSemanticIndex()
    progress: list[int] = []
    await index.upsert(DOCS, on_progress=progress.append)
    assert progress[-1] == 3
    assert await index.indexed_doc_ids() == {"page:1", "page:2", "page:3"}

    results = await index.query("HiveServer2", top_k=5)
    assert [c.doc_id for c in results.chunks] == ["page:1", "page:2"]
    assert [c.rank for c in results.chunks] == [1, 2]
    (entity,) = results.entities
    assert entity.name == "HiveServer2" and entity.doc_ids == {"page:1", "page:2"}

    await index.delete(["page:2", "page:unknown"])
    results = await index.query("HiveServer2", top_k=5)
    assert [c.doc_id for c in results.chunks] == ["page:1"]
    assert results.entities[0].doc_ids == {"page:1"}


async def test_upsert_replaces_text() -> None:
    index = FakeSemanticIndex()
    await index.upsert(DOCS)
    await index.upsert([IndexDocument("page:1", "Tez replaced MapReduce.")])
    assert (await index.query("HiveServer2", 5)).chunks[0].doc_id == "page:2"
    assert (await index.query("Tez", 5)).chunks[0].text == "Tez replaced MapReduce."


async def test_rejects_bad_arguments() -> None:
    index = FakeSemanticIndex()
    with pytest.raises(InvalidArgument):
        await index.upsert([DOCS[0], DOCS[0]])
    with pytest.raises(InvalidArgument):
        await index.query("x", top_k=0)
