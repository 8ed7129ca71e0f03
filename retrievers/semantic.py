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

import dataclasses
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from authz import links, policy
from authz.gate import Gate
from core import ids
from core.errors import InvalidArgument
from navigator.navigator import Navigator
from navigator.base import PageSummary
from retrievers.lightrag_adapter import ChunkHit, GraphHit, RawResults, SemanticIndex

MAX_QUERY_CHARS = 2000
MAX_TOP_K = 50
MAX_SPACES = 50
SNIPPET_CHARS = {"concise": 300, "detailed": 1500}
SNIPPET_MARGIN = 500  # characters beyond the snippet that link redaction may pull into it
MAX_GRAPH_HITS = {"concise": 5, "detailed": 15}
# Entities/relations backed by more documents than this are left out: each supporting document
# must be authorized (A4), and a hub entity ("Hive") would cost hundreds of checks per search.
MAX_EVIDENCE_DOCS = 20
# Similarity floors, measured on the Hive index with the offline embedder. Nonsense tokens (the
# shape of the leak suite's canaries) reach 0.41 on chunks (one chunk of DeveloperGuide, as
# converted from storage format, is every nonsense word's nearest neighbour: 0.33-0.41 over 120
# random words) and 0.54 on entities at most, while
# what supports the dev questions' gold pages scores from 0.27. So a candidate sharing a word with
# the query (a chunk's text, an entity's or relation's name) needs the low floor, and one sharing
# none needs more than any nonsense token reached; an entity the query names exactly scores 1.
# Among the floors tried, these gave the best page recall@5 and MRR on the dev questions and left
# every nonsense query empty (tuning proper belongs to the ranking work).
MIN_CHUNK_SIMILARITY = 0.25
MIN_CHUNK_SIMILARITY_WITHOUT_TERMS = 0.42  # 0.35 let 7 of 120 nonsense words through; dev recall@5 unchanged
MIN_GRAPH_SIMILARITY = 0.35
MIN_GRAPH_SIMILARITY_WITHOUT_TERMS = 0.6
_WORD = re.compile(r"[^\W_][\w.-]*")
_STOPWORDS = frozenset(
    "about after all also and any are can could does for from have how into its not one only other "
    "our should some such than that the their them then there these they this those use used using "
    "was way were what when where which while who why will with would you your".split()
)
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
    def __init__(self, index: SemanticIndex, navigator: Navigator, candidates: int) -> None:
        self._index = index
        self._navigator = navigator
        self._candidates = candidates  # per channel, before the relevance floor

    async def search(
        self,
        gate: Gate,
        query: str,
        *,
        top_k: int = 10,
        spaces: Sequence[str] | None = None,
        response_format: str = "concise",
    ) -> SearchResult:
        query = _checked(query, top_k, spaces, response_format)
        limit = SNIPPET_CHARS[response_format]
        # The spaces asked for are authorized as asked, whether they exist or not: a missing
        # space and a hidden one look alike, and the gate is always asked.
        candidate_spaces = sorted({ids.space_id(key) for key in spaces}) if spaces else await self._navigator.space_ids()
        # Every candidate that clears the relevance floor, up to the cap: which of them the caller
        # may see cannot change which visible ones are considered (A4), short of the cap.
        chunks, graph = _relevant_candidates(await self._index.query(query, self._candidates), query)

        # First round trip: the spaces, every candidate document with its space, and the link
        # targets in entity and relation text. Always at least the spaces, so an unreachable
        # OpenFGA fails the request even when the index found nothing.
        placed = await self._navigator.placed([c.doc_id for c in chunks] + [d for g in graph for d in sorted(g.doc_ids)])
        graph_text = [t for g in graph for t in (g.name, _window(g.description, limit))]
        candidates = await policy.pages_in_visible_spaces(
            gate, placed, also=[*candidate_spaces, *links.references_in(graph_text)]
        )
        searchable = await gate.visible(candidate_spaces)  # answered by the batch above
        candidates = {pid: p for pid, p in candidates.items() if p.space_id in searchable}
        chunks = [c for c in chunks if c.doc_id in candidates]
        graph = await _visible_graph(gate, graph, candidates.keys(), limit)

        # Only now, through items the caller may see, are further chunks reached.
        known = {c.chunk_id: c for c in chunks}
        reached = [cid for g in graph for cid in g.chunk_ids if cid not in known]
        expanded = await self._index.chunks(reached) if reached else []
        known.update((c.chunk_id, c) for c in expanded if c.doc_id in candidates)
        ranked = [(r, known[r.chunk_id]) for r in _best_per_page(_fuse(chunks, graph, known), known)[:top_k]]

        # Second round trip: the breadcrumbs of the hits shown, and the link targets in their
        # snippets, which lose the targets the caller cannot see (A11).
        windows = [_chunk_window(chunk, limit) for _, chunk in ranked]
        summaries = await policy.visible_pages(
            gate, {chunk.doc_id: candidates[chunk.doc_id] for _, chunk in ranked}, also=links.references_in(windows)
        )
        snippets = await links.redact(gate, windows)
        hits = [
            _hit(summary, r, _snippet(snippet, limit))
            for (r, chunk), snippet in zip(ranked, snippets, strict=True)
            if (summary := summaries.get(chunk.doc_id)) is not None
        ]
        graph_results = [GraphResult(g.kind, g.name, _snippet(g.description, limit), sorted(g.doc_ids)) for g in graph]
        graph_limit = MAX_GRAPH_HITS[response_format]
        return SearchResult(
            hits=hits,
            entities=[g for g in graph_results if g.kind == "entity"][:graph_limit],
            relations=[g for g in graph_results if g.kind == "relation"][:graph_limit],
        )


def _checked(query: str, top_k: int, spaces: Sequence[str] | None, response_format: str) -> str:
    """The query, stripped, once every argument is within its bounds."""
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
    return query


def _relevant_candidates(raw: RawResults, query: str) -> tuple[list[ChunkHit], list[GraphHit]]:
    """The chunks, entities and relations that clear the relevance floor, before authorization."""
    terms = _terms(query)
    chunks = [c for c in raw.chunks if _relevant(c.score, c.text, terms, MIN_CHUNK_SIMILARITY, MIN_CHUNK_SIMILARITY_WITHOUT_TERMS)]
    graph = [
        g
        for g in [*raw.entities, *raw.relations]
        if len(g.doc_ids) <= MAX_EVIDENCE_DOCS
        and _relevant(g.score, g.name, terms, MIN_GRAPH_SIMILARITY, MIN_GRAPH_SIMILARITY_WITHOUT_TERMS)
    ]
    return chunks, graph


def _hit(summary: PageSummary, ranked: _Ranked, snippet: str) -> SearchHit:
    return SearchHit(
        id=summary.id,
        kind="page",
        title=summary.title,
        space=summary.space_id,
        breadcrumb=[crumb.title for crumb in summary.ancestors],
        url=summary.url,
        snippet=snippet,
        chunk_id=ranked.chunk_id,
        score=round(ranked.score, 5),
        why=ranked.why,
    )


async def _visible_graph(gate: Gate, graph: Sequence[GraphHit], documents: Collection[str], limit: int) -> list[GraphHit]:
    """The entities and relations the caller may see (A4), descriptions cut to what is shown and
    hidden link targets removed (A11). An item whose very name points at a hidden page is left
    out, names and all."""
    shown = [g for g in graph if policy.derived_visible(g.doc_ids, documents)]
    texts = await links.redact(gate, [t for g in shown for t in (g.name, _window(g.description, limit))])
    return [
        dataclasses.replace(g, description=description)
        for g, name, description in zip(shown, texts[::2], texts[1::2], strict=True)
        if name == g.name
    ]


def _terms(text: str) -> set[str]:
    """The words of ``text`` that can carry meaning: casefolded, three letters or more, no stopwords."""
    return {w for w in (m.casefold().rstrip(".-") for m in _WORD.findall(text)) if len(w) >= 3 and w not in _STOPWORDS}


def _relevant(score: float, text: str, terms: set[str], floor: float, floor_without_terms: float) -> bool:
    """Similar enough to count: a candidate sharing a word with the query clears the low floor; one
    sharing none must clear the high one. So a query no visible text contains finds nothing, which
    is also what a term found only in hidden pages must find (DESIGN.md A4)."""
    if score >= floor_without_terms:
        return True
    return score >= floor and bool(terms & _terms(text))


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


def _window(text: str, limit: int) -> str:
    """The part of ``text`` a snippet of ``limit`` characters can come from, with room for the
    characters link redaction removes; redacting only this much keeps the checks few. It ends
    between words, so the window itself cuts no reference short."""
    words = text.split()
    kept: list[str] = []
    size = 0
    for word in words:
        size += len(word) + 1
        if size > limit + SNIPPET_MARGIN:
            break
        kept.append(word)
    return " ".join(kept)


def _chunk_window(chunk: ChunkHit, limit: int) -> str:
    """:func:`_window` of a chunk, without the first and last words the chunker may have cut out
    of a longer one: ``:27362075`` left over from ``page:27362075`` names no page in any spelling
    redaction knows, but shows a hidden id. A chunk that starts the page (its title heading) keeps
    its first word."""
    words = chunk.text.split()
    start = 0 if chunk.text.startswith("#") else 1
    return _window(" ".join(words[start:-1]), limit)


def _snippet(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"
