"""Authorized semantic search: over-fetch from the index, authorize every document, then build hits.

Relevance is not permission: the index may return anything; only documents that pass the gate in
this request reach the caller, and entities/relations are shown only when every document they were
derived from is visible (DESIGN.md A4).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from authz.gate import Gate
from core import ids
from core.errors import InvalidArgument
from navigator.navigator import Navigator
from retrievers.lightrag_adapter import GraphHit, SemanticIndex

MAX_QUERY_CHARS = 2000
MAX_TOP_K = 50
SNIPPET_CHARS = {"concise": 300, "detailed": 1500}
MAX_GRAPH_HITS = {"concise": 5, "detailed": 15}
# Entities/relations backed by more documents than this are left out: each supporting document
# must be authorized (A4), and a hub entity ("Hive") would cost hundreds of checks per search.
MAX_EVIDENCE_DOCS = 20


@dataclass(frozen=True)
class SearchHit:
    id: str
    kind: str
    title: str
    space: str
    breadcrumb: list[str]
    url: str
    snippet: str
    chunk_id: str
    score: float
    why: list[str]


@dataclass(frozen=True)
class GraphResult:
    kind: str
    name: str
    description: str
    evidence: list[str]


@dataclass(frozen=True)
class SearchResult:
    hits: list[SearchHit]
    entities: list[GraphResult]
    relations: list[GraphResult]


class SemanticRetriever:
    def __init__(self, index: SemanticIndex, navigator: Navigator, overfetch: int) -> None:
        self._index = index
        self._navigator = navigator
        self._overfetch = overfetch

    async def search(
        self,
        gate: Gate,
        query: str,
        *,
        top_k: int = 10,
        spaces: Sequence[str] | None = None,
        response_format: str = "concise",
    ) -> SearchResult:
        query = query.strip()
        if not query:
            raise InvalidArgument("query must not be empty")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidArgument(f"query is longer than {MAX_QUERY_CHARS} characters")
        if not 1 <= top_k <= MAX_TOP_K:
            raise InvalidArgument(f"top_k must be between 1 and {MAX_TOP_K}, got {top_k}")
        if response_format not in SNIPPET_CHARS:
            raise InvalidArgument(f"response_format must be one of {sorted(SNIPPET_CHARS)}, got {response_format!r}")
        wanted_spaces = {ids.space_id(key) for key in spaces} if spaces else None
        # The caller's spaces are authorized first, on every search: a user who can see no space
        # gets nothing without the index being asked, and an unreachable OpenFGA fails the
        # request even when the index would have found nothing.
        searchable = {space["id"] for space in await self._navigator.list_spaces(gate)}
        if wanted_spaces is not None:
            searchable &= wanted_spaces
        if not searchable:
            return SearchResult(hits=[], entities=[], relations=[])

        raw = await self._index.query(query, top_k * self._overfetch)
        graph_limit = MAX_GRAPH_HITS[response_format]
        graph = [
            hit
            for hits in (raw.entities, raw.relations)
            for hit in [g for g in hits if len(g.doc_ids) <= MAX_EVIDENCE_DOCS][: graph_limit * 2]
        ]
        candidates = [c.doc_id for c in raw.chunks] + [d for g in graph for d in sorted(g.doc_ids)]
        summaries = await self._navigator.visible_summaries(gate, candidates)
        summaries = {pid: s for pid, s in summaries.items() if s.space_id in searchable}

        visible_graph = [g for g in graph if g.doc_ids and g.doc_ids <= summaries.keys()]
        limit = SNIPPET_CHARS[response_format]
        hits: list[SearchHit] = []
        for chunk in sorted(raw.chunks, key=lambda c: c.rank):
            summary = summaries.get(chunk.doc_id)
            if summary is None or any(hit.id == chunk.doc_id for hit in hits):
                continue
            hits.append(
                SearchHit(
                    id=summary.id,
                    kind="page",
                    title=summary.title,
                    space=summary.space_id,
                    breadcrumb=[crumb.title for crumb in summary.ancestors],
                    url=summary.url,
                    snippet=_snippet(chunk.text, limit),
                    chunk_id=chunk.chunk_id,
                    score=round(1.0 / (1 + len(hits)), 4),
                    why=_why(chunk.doc_id, visible_graph),
                )
            )
            if len(hits) == top_k:
                break
        return SearchResult(
            hits=hits,
            entities=[_graph_result(g, limit) for g in visible_graph if g.kind == "entity"][:graph_limit],
            relations=[_graph_result(g, limit) for g in visible_graph if g.kind == "relation"][:graph_limit],
        )


def _snippet(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"


def _why(doc_id: str, graph: Sequence[GraphHit]) -> list[str]:
    names = [g.name for g in graph if g.kind == "entity" and doc_id in g.doc_ids][:3]
    return ["text match"] + [f"mentions {name}" for name in names]


def _graph_result(hit: GraphHit, limit: int) -> GraphResult:
    return GraphResult(hit.kind, hit.name, _snippet(hit.description, limit), sorted(hit.doc_ids))
