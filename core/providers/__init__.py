"""Model providers behind small Protocols: embeddings and entity/keyword extraction."""

from core.providers.base import Embedder, Entity, Extraction, Extractor, Relation

__all__ = ["Embedder", "Entity", "Extraction", "Extractor", "Relation"]
