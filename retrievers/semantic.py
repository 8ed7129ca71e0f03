"""Authorized semantic search: candidates from three channels, authorized, fused through visible
paths only.

Relevance is not permission. The index answers three independent similarity searches (chunks by
the query, entities by its low-level keywords, relations by its high-level keywords) and expands
nothing. Every document those candidates stand on is authorized in one batch; an entity or relation
is kept only when every document supporting it is visible (DESIGN.md A4), and only then are its
chunks fetched. So a hidden page never selects or orders what a caller gets: a term found only in
hidden pages yields what a term found nowhere yields (the leak suite checks it with canaries).

Ranking is reciprocal-rank fusion of the three channels over visible chunks; a hit names the
channels that found it. A similarity floor keeps noise out: a query that matches nothing visible
returns nothing rather than the least bad pages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from authz import links, policy
from authz.gate import Gate
from core import ids
from core.errors import InvalidArgument
from navigator.navigator import Navigator
from retrievers.lightrag_adapter import ChunkHit, GraphHit, SemanticIndex

MAX_QUERY_CHARS = 2000
MAX_TOP_K = 50
MAX_SPACES = 50
SNIPPET_CHARS = {"concise": 300, "detailed": 1500}
MAX_GRAPH_HITS = {"concise": 5, "detailed": 15}
# Entities/relations backed by more documents than this are left out: each supporting document
# must be authorized (A4), and a hub entity ("Hive") would cost hundreds of checks per search.
MAX_EVIDENCE_DOCS = 20
MIN_CANDIDATES = 40  # per channel; more than top_k so a few hidden candidates do not crowd out visible ones
MIN_CHUNK_SIMILARITY = 0.35  # measured: nonsense tokens reach 0.34 at most, dev questions 0.32-0.71
MIN_GRAPH_SIMILARITY = 0.45  # measured: nonsense reaches 0.42 on entities, dev questions 0.36-0.89
RRF_K = 60  # reciprocal-rank fusion constant: score = sum over channels of 1 / (RRF_K + rank)


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
        if spaces is not None and len(spaces) > MAX_SPACES:
            raise InvalidArgument(f"spaces takes at most {MAX_SPACES} space keys, got {len(spaces)}")
        wanted_spaces = {ids.space_id(key) for key in spaces} if spaces else None
        # The caller's spaces are authorized first, on every search: a user who can see no space
        # gets nothing without the index being asked, and an unreachable OpenFGA fails the
        # request even when the index would have found nothing.
        searchable = {space["id"] for space in await self._navigator.list_spaces(gate)}
        if wanted_spaces is not None:
            searchable &= wanted_spaces
        if not searchable:
            return SearchResult(hits=[], entities=[], relations=[])

        raw = await self._index.query(query, max(top_k * self._overfetch, MIN_CANDIDATES))
        chunks = [c for c in raw.chunks if c.score >= MIN_CHUNK_SIMILARITY]
        graph = [
            g
            for g in [*raw.entities, *raw.relations]
            if g.score >= MIN_GRAPH_SIMILARITY and len(g.doc_ids) <= MAX_EVIDENCE_DOCS
        ]
        summaries = await self._navigator.visible_summaries(
            gate, [c.doc_id for c in chunks] + [d for g in graph for d in sorted(g.doc_ids)]
        )
        summaries = {pid: s for pid, s in summaries.items() if s.space_id in searchable}
        chunks = [c for c in chunks if c.doc_id in summaries]
        graph = [g for g in graph if policy.derived_visible(g.doc_ids, summaries.keys())]
        # Only now, through items the caller may see, are further chunks reached.
        known = {c.chunk_id: c for c in chunks}
        reached = [cid for g in graph for cid in g.chunk_ids if cid not in known]
        expanded = await self._index.chunks(reached) if reached else []
        known.update((c.chunk_id, c) for c in expanded if c.doc_id in summaries)
        ranked = _best_per_page(_fuse(chunks, graph, known), known)[:top_k]

        # Links in snippets, names and descriptions lose targets the caller cannot see (A11).
        redacted = await links.redact(
            gate, [known[r.chunk_id].text for r in ranked] + [t for g in graph for t in (g.name, g.description)]
        )
        snippets, graph_texts = redacted[: len(ranked)], redacted[len(ranked) :]
        limit = SNIPPET_CHARS[response_format]
        graph_limit = MAX_GRAPH_HITS[response_format]
        graph_results = [
            GraphResult(g.kind, g.name, _snippet(description, limit), sorted(g.doc_ids))
            for g, name, description in zip(graph, graph_texts[::2], graph_texts[1::2], strict=True)
            if name == g.name  # a name that points at a hidden page is not shown at all
        ]
        hits = [
            SearchHit(
                id=summary.id,
                kind="page",
                title=summary.title,
                space=summary.space_id,
                breadcrumb=[crumb.title for crumb in summary.ancestors],
                url=summary.url,
                snippet=_snippet(snippet, limit),
                chunk_id=r.chunk_id,
                score=round(r.score, 5),
                why=r.why,
            )
            for r, snippet in zip(ranked, snippets, strict=True)
            for summary in [summaries[known[r.chunk_id].doc_id]]
        ]
        return SearchResult(
            hits=hits,
            entities=[g for g in graph_results if g.kind == "entity"][:graph_limit],
            relations=[g for g in graph_results if g.kind == "relation"][:graph_limit],
        )


@dataclass
class _Ranked:
    chunk_id: str
    score: float = 0.0
    why: list[str] = field(default_factory=list)


def _fuse(chunks: Sequence[ChunkHit], graph: Sequence[GraphHit], known: dict[str, ChunkHit]) -> list[_Ranked]:
    """Reciprocal-rank fusion of the chunk, entity and relation channels, over ``known`` chunks."""
    fused: dict[str, _Ranked] = {}

    def credit(chunk_id: str, rank: int, reason: str) -> None:
        entry = fused.setdefault(chunk_id, _Ranked(chunk_id))
        entry.score += 1.0 / (RRF_K + rank)
        if reason not in entry.why and len(entry.why) < 4:
            entry.why.append(reason)

    for rank, chunk in enumerate(sorted(chunks, key=lambda c: -c.score), start=1):
        credit(chunk.chunk_id, rank, "text similarity")
    for kind in ("entity", "relation"):
        items = sorted((g for g in graph if g.kind == kind), key=lambda g: -g.score)
        for rank, item in enumerate(items, start=1):
            for chunk_id in item.chunk_ids:
                if chunk_id in known:
                    credit(chunk_id, rank, f"{kind} {item.name}")
    return sorted(fused.values(), key=lambda r: (-r.score, r.chunk_id))


def _best_per_page(ranked: list[_Ranked], known: dict[str, ChunkHit]) -> list[_Ranked]:
    seen: set[str] = set()
    best = []
    for entry in ranked:
        doc = known[entry.chunk_id].doc_id
        if doc not in seen:
            seen.add(doc)
            best.append(entry)
    return best


def _snippet(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"
