"""An in-memory ``SemanticIndex`` for tests of the code above the index.

Scores whole documents by query-term overlap (and by the real BM25 of :mod:`retrievers.lexical`
for the lexical channel); entities are the capitalised words of a document and relations link
capitalised words that follow each other. Deterministic and instant.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence, Set
from typing import Literal

from core.errors import InvalidArgument
from retrievers.lexical import LexicalEntry, LexicalIndex
from retrievers.base import ChunkHit, GraphHit, IndexDocument, Neighbourhood, Probe, RawResults

_TERM = re.compile(r"\w+")
_CAPITALISED = re.compile(r"\b[A-Z]\w*(?:[.-]\w+)*")


def _terms(text: str) -> set[str]:
    return {t.casefold() for t in _TERM.findall(text)}


class FakeSemanticIndex:
    """``SemanticIndex`` over a dict; one chunk per document (``<doc_id>-chunk-000``)."""

    def __init__(self) -> None:
        self.docs: dict[str, str] = {}
        self.calls: list[tuple[str, object]] = []  # (method, argument) for assertions

    async def __aenter__(self) -> FakeSemanticIndex:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    async def upsert(
        self, docs: Sequence[IndexDocument], on_progress: Callable[[int], None] | None = None, *, remove: Sequence[str] = ()
    ) -> None:
        self.calls.append(("upsert", [d.doc_id for d in docs]))
        if remove:
            await self.delete(remove)
        if len({d.doc_id for d in docs}) != len(docs):
            raise InvalidArgument("duplicate document ids in one upsert")
        for done, doc in enumerate(docs, start=1):
            self.docs[doc.doc_id] = doc.text
            if on_progress is not None:
                on_progress(done)

    async def delete(self, doc_ids: Sequence[str]) -> None:
        self.calls.append(("delete", list(doc_ids)))
        for doc_id in doc_ids:
            self.docs.pop(doc_id, None)

    async def indexed_doc_ids(self) -> set[str]:
        return set(self.docs)

    async def outdated_doc_ids(self) -> set[str]:
        return set()

    async def probe(self, text: str) -> Probe:
        return Probe(text)

    async def query(self, text: str | Probe, top_k: int, within: Set[str] | None = None) -> RawResults:
        """As the real index: with ``within``, chunks of those documents only, and the entities and
        relations all of whose documents are among them, or rebuilt from those among them (every
        hit here is one the query names, so any of its documents rebuilds it)."""
        text = text.text if isinstance(text, Probe) else text
        self.calls.append(("query", text))
        if top_k < 1:
            raise InvalidArgument("top_k must be at least 1")
        wanted = _terms(text)
        searched = self.docs if within is None else {d: body for d, body in self.docs.items() if d in within}
        scored = sorted(
            ((len(wanted & _terms(body)), doc_id) for doc_id, body in searched.items()),
            key=lambda pair: (-pair[0], pair[1]),
        )
        matching = [doc_id for score, doc_id in scored if score > 0][:top_k]
        score_of = {doc_id: score / max(len(wanted), 1) for score, doc_id in scored}
        chunks = [
            ChunkHit(_chunk_id(doc_id), doc_id, self.docs[doc_id], rank, score_of[doc_id])
            for rank, doc_id in enumerate(matching, start=1)
        ]
        support: dict[str, set[str]] = {}
        edges: dict[str, set[str]] = {}
        for doc_id, body in sorted(self.docs.items()):
            names = _CAPITALISED.findall(body)
            for name in names:
                if name.casefold() in wanted:
                    support.setdefault(name, set()).add(doc_id)
            for source, target in zip(names, names[1:], strict=False):
                if source != target and (source.casefold() in wanted or target.casefold() in wanted):
                    edges.setdefault(f"{source} -> {target}", set()).add(doc_id)
        entities = [_hit("entity", name, f"{name} (fake)", ids, rank, 1.0) for rank, (name, ids) in enumerate(sorted(support.items())[:top_k], start=1)]
        relations = [_hit("relation", name, f"{name} (fake)", ids, rank, 1.0) for rank, (name, ids) in enumerate(sorted(edges.items())[:top_k], start=1)]
        if within is not None:
            entities, relations = (
                [h for hit in hits if (h := hit if hit.doc_ids <= within else hit.rebuilt_from(within))] for hits in (entities, relations)
            )
        lexical = LexicalIndex({_chunk_id(d): LexicalEntry(d, body) for d, body in self.docs.items()})
        found = [
            ChunkHit(cid, doc_id, self.docs[doc_id], rank, score)
            for rank, (cid, doc_id, score) in enumerate(lexical.search(text, top_k, within), start=1)
        ]
        return RawResults(chunks=chunks, entities=entities, relations=relations, lexical=found, term_weights=lexical.term_weights(text, within))

    async def entities_of(self, doc_ids: Sequence[str]) -> list[GraphHit]:
        self.calls.append(("entities_of", list(doc_ids)))
        names = sorted({name for d in doc_ids if d in self.docs for name in _CAPITALISED.findall(self.docs[d])})
        support = {name: {d for d, body in self.docs.items() if name in _CAPITALISED.findall(body)} for name in names}
        return [
            GraphHit("entity", name, f"{name} (fake)", frozenset(ids), rank, _chunk_ids(ids))
            for rank, (name, ids) in enumerate(sorted(support.items()), start=1)
        ]

    def _graph(self) -> tuple[dict[str, set[str]], dict[tuple[str, str], set[str]]]:
        """Every entity and relation (its ends in name order) with the documents supporting it."""
        support: dict[str, set[str]] = {}
        edges: dict[tuple[str, str], set[str]] = {}
        for doc_id, body in self.docs.items():
            names = _CAPITALISED.findall(body)
            for name in names:
                support.setdefault(name, set()).add(doc_id)
            for pair in zip(names, names[1:], strict=False):
                if pair[0] != pair[1]:
                    edges.setdefault((min(pair), max(pair)), set()).add(doc_id)
        return support, edges

    async def entity_named(self, name: str, within: Set[str] | None = None) -> GraphHit | None:
        self.calls.append(("entity_named", name))
        support, _ = self._graph()
        found = name if name in support else min((n for n in support if n.casefold() == name.casefold()), default=None)
        if found is None or (within is not None and not support[found] <= within):
            return None
        return GraphHit("entity", found, f"{found} (fake)", frozenset(support[found]), 1, _chunk_ids(support[found]))

    async def neighbourhood(self, names: Sequence[str], within: Set[str] | None = None) -> Neighbourhood:
        """Relations weigh as many as the documents saying them."""
        self.calls.append(("neighbourhood", list(names)))
        support, edges = self._graph()
        relations: list[GraphHit] = []
        for name in dict.fromkeys(names):
            for (a, b), docs in sorted(edges.items()):
                if name in (a, b):
                    other = b if name == a else a
                    if within is None or (docs | support[other]) <= within:
                        relations.append(
                            GraphHit("relation", f"{name} -> {other}", f"{name} and {other} (fake)", frozenset(docs),
                                     len(relations) + 1, _chunk_ids(docs), float(len(docs)), (name, other))
                        )
        entities = {
            r.ends[1]: GraphHit("entity", r.ends[1], f"{r.ends[1]} (fake)", frozenset(support[r.ends[1]]), 0, _chunk_ids(support[r.ends[1]]))
            for r in relations
            if r.ends is not None
        }
        return Neighbourhood(relations, entities)

    async def chunks(self, chunk_ids: Sequence[str]) -> list[ChunkHit]:
        self.calls.append(("chunks", list(chunk_ids)))
        docs = [cid.removesuffix(_CHUNK_SUFFIX) for cid in dict.fromkeys(chunk_ids)]
        return [ChunkHit(_chunk_id(d), d, self.docs[d], rank=0) for d in docs if d in self.docs]


_CHUNK_SUFFIX = "-chunk-000"


def _chunk_id(doc_id: str) -> str:
    return doc_id + _CHUNK_SUFFIX


def _chunk_ids(doc_ids: set[str]) -> tuple[str, ...]:
    return tuple(_chunk_id(d) for d in sorted(doc_ids))


def _hit(kind: Literal["entity", "relation"], name: str, description: str, doc_ids: set[str], rank: int, score: float) -> GraphHit:
    """A hit the query names, on one chunk per document: any of them rebuilds it."""
    docs = frozenset(doc_ids)
    return GraphHit(kind, name, description, docs, rank, _chunk_ids(doc_ids), score, chunk_docs=tuple(sorted(docs)), rebuilders=docs)
