"""Builds the semantic index with the configured providers (offline ones by default)."""

from __future__ import annotations

from core.providers.base import Embedder, Extractor
from core.providers.local import LocalEmbedder, LocalExtractor
from core.settings import Settings
from retrievers.lightrag_adapter import LightRAGIndex


def semantic_index(settings: Settings, *, embedder: Embedder | None = None, extractor: Extractor | None = None) -> LightRAGIndex:
    """The index with the configured providers; a benchmark may pass its own (e.g. counting) ones."""
    return LightRAGIndex(settings.lightrag, settings.index_dir, embedder or LocalEmbedder(), extractor or LocalExtractor(workers=settings.lightrag.extraction_workers))
