"""Builds the semantic index with the configured providers (offline ones by default)."""

from __future__ import annotations

from core.providers.local import LocalEmbedder, LocalExtractor
from core.settings import Settings
from retrievers.lightrag_adapter import LightRAGIndex


def semantic_index(settings: Settings) -> LightRAGIndex:
    return LightRAGIndex(settings.lightrag, settings.index_dir, LocalEmbedder(), LocalExtractor())
