"""Builds the semantic index with the configured providers (offline ones by default)."""

from __future__ import annotations

from collections.abc import Callable

from core.providers.base import Embedder, Extractor, Usage
from core.providers.local import LocalEmbedder, LocalExtractor
from core.settings import Settings
from retrievers.lightrag_adapter import Engines, LightRAGIndex
from retrievers.base import SemanticIndex

#: how the sync opens the index: settings, and the ledger hosted models' calls are written to
OpenIndex = Callable[[Settings, Usage | None], SemanticIndex]


def providers(settings: Settings, usage: Usage | None = None) -> tuple[Embedder, Extractor]:
    """The embedder and extractor ``WAYFINDER_PROVIDERS`` names."""
    if settings.providers == "gemini":
        from core.providers.gemini import GeminiEmbedder, GeminiExtractor  # the SDK is loaded only when it is used

        return GeminiEmbedder(settings.gemini, usage), GeminiExtractor(settings.gemini, usage)
    lightrag = settings.lightrag
    return LocalEmbedder(unpacked=settings.models_dir, workers=lightrag.embedding_workers), LocalExtractor(workers=lightrag.extraction_workers)


def semantic_index(
    settings: Settings,
    usage: Usage | None = None,
    *,
    embedder: Embedder | None = None,
    extractor: Extractor | None = None,
    queries_only: bool = False,
) -> LightRAGIndex:
    """The index with the configured providers and storage profile; a benchmark may pass its own
    (e.g. counting) providers. ``queries_only``: for serving (changes refused, less loaded)."""
    if embedder is None or extractor is None:
        configured_embedder, configured_extractor = providers(settings, usage)
        embedder, extractor = embedder or configured_embedder, extractor or configured_extractor
    engines = Engines(settings.postgres, settings.neo4j) if settings.lightrag.storage == "production" else None
    return LightRAGIndex(settings.lightrag, settings.index_dir, embedder, extractor, engines=engines, queries_only=queries_only)
