"""What the semantic index takes and answers, whatever engine is behind it: documents in,
unauthorized candidates out (the caller authorizes every document before using anything)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol


@dataclass(frozen=True)
class IndexDocument:
    """One document to index. ``doc_id`` is unique (e.g. ``page:27362069``)."""

    doc_id: str
    text: str


@dataclass(frozen=True)
class ChunkHit:
    """A chunk of one document. ``score`` is its similarity to the query (0 when fetched by id)."""

    chunk_id: str
    doc_id: str
    text: str
    rank: int
    score: float = 0.0


@dataclass(frozen=True)
class GraphHit:
    """An entity (``name`` is the entity) or relation (``name`` is ``"A -> B"``).

    ``doc_ids`` holds every document supporting it and ``chunk_ids`` every supporting chunk; all
    documents must be authorized before the hit, its text or its chunks are used.

    ``rebuilders`` are the documents any one of which, on its own, yields what ranked the hit: an
    entity the query names (its name), or one whose vector embeds only what that document's own
    extraction of it holds. A caller who may see one of them but not every supporting document
    may still rank with it, rebuilt from the documents they may see (:meth:`rebuilt_from`).
    """

    kind: Literal["entity", "relation"]
    name: str
    description: str
    doc_ids: frozenset[str]
    rank: int
    chunk_ids: tuple[str, ...] = ()
    score: float = 0.0
    ends: tuple[str, str] | None = None  # a relation's entities, as walked (from, to)
    chunk_docs: tuple[str, ...] = ()  # the document of each of ``chunk_ids``
    rebuilders: frozenset[str] = frozenset()
    partial: bool = False  # rebuilt from some of its documents: it ranks, it is never shown

    def rebuilt_from(self, documents: Collection[str]) -> GraphHit | None:
        """The hit as it stands on ``documents`` alone (DESIGN.md A4: rebuilt from the fragments
        of visible documents only), when one of them is among its ``rebuilders``: those documents
        and their chunks, no description (the merged one holds the others' text), ``partial``.
        Otherwise None: what ranked it needs a document outside ``documents``."""
        seen = frozenset(doc for doc in self.doc_ids if doc in documents)
        if not seen & self.rebuilders:
            return None
        kept = [(chunk, doc) for chunk, doc in zip(self.chunk_ids, self.chunk_docs, strict=True) if doc in seen]
        return dataclasses.replace(
            self,
            description="",
            doc_ids=seen,
            chunk_ids=tuple(chunk for chunk, _ in kept),
            chunk_docs=tuple(doc for _, doc in kept),
            rebuilders=self.rebuilders & seen,
            partial=True,
        )


@dataclass(frozen=True)
class RawResults:
    chunks: list[ChunkHit]
    entities: list[GraphHit]
    relations: list[GraphHit]
    lexical: list[ChunkHit] = field(default_factory=list)  # BM25 score in ``score``
    # The query's terms as the lexical channel counts them (retrievers.lexical.tokens) → their IDF
    # over the documents searched; what the anchor text of the candidates' links is weighed by.
    term_weights: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Probe:
    """A query read before its search: what an index needs of the query alone (its keywords, its
    vectors), so it can be worked out while the caller still authorizes what to search."""

    text: str
    high: tuple[str, ...] = ()  # the query's high-level (theme) keywords
    low: tuple[str, ...] = ()  # its low-level (named thing) keywords
    vectors: Mapping[str, Any] = field(default_factory=dict)  # probe text → its query vector


@dataclass(frozen=True)
class Neighbourhood:
    """What touches some entities in the graph, unauthorized."""

    relations: list[GraphHit]  # each with ``ends`` (one of the entities asked about first) and its weight in ``score``
    entities: dict[str, GraphHit]  # the entities at their other ends, by name


class SemanticIndex(Protocol):
    """Documents in, unauthorized candidates out: each channel searched on its own, nothing
    expanded through the graph (the caller expands through the items it may see)."""

    async def upsert(
        self, docs: Sequence[IndexDocument], on_progress: Callable[[int], None] | None = None, *, remove: Sequence[str] = ()
    ) -> None:
        """Index ``docs``, replacing earlier versions; ``on_progress(n_done)`` after each batch.
        ``remove`` names documents to delete in the same pass (the stores are written once for
        both); they are gone by the first ``on_progress``."""
        ...

    async def delete(self, doc_ids: Sequence[str]) -> None:
        """Remove documents and everything only they support. Unknown ids are ignored."""
        ...

    async def probe(self, text: str) -> Probe:
        """``text`` read for :meth:`query`; touches no document."""
        ...

    async def query(self, text: str | Probe, top_k: int, within: Set[str] | None = None) -> RawResults:
        """Up to ``top_k`` chunks, entities and relations each by similarity to ``text``, first the
        entities ``text`` names exactly, and up to ``top_k`` chunks by BM25. With ``within``, only
        chunks of those documents, and entities and relations all of whose documents are among
        them or else rebuilt from those among them (:meth:`GraphHit.rebuilt_from`; a pre-filter:
        the caller still authorizes everything). ``text`` may come as its :meth:`probe`."""
        ...

    async def entities_of(self, doc_ids: Sequence[str]) -> list[GraphHit]:
        """The entities extracted from these documents, each with every document supporting it."""
        ...

    async def entity_named(self, name: str, within: Set[str] | None = None) -> GraphHit | None:
        """The entity called ``name`` (exactly, else one whose name differs only in case) with every
        document supporting it. None when there is none, or when ``within`` is given and not all
        of its documents are among them."""
        ...

    async def neighbourhood(self, names: Sequence[str], within: Set[str] | None = None) -> Neighbourhood:
        """Every relation touching the entities ``names`` and the entity at its other end, each
        with every document supporting it. With ``within``, only the relations whose documents
        and whose far end's documents are all among them."""
        ...

    async def chunks(self, chunk_ids: Sequence[str]) -> list[ChunkHit]:
        """The chunks with these ids (unknown ids are skipped)."""
        ...

    async def indexed_doc_ids(self) -> set[str]:
        """Ids of the documents fully processed."""
        ...

    async def outdated_doc_ids(self) -> set[str]:
        """Ids of processed documents extracted by another extractor than the configured one:
        indexing them again re-extracts them."""
        ...
