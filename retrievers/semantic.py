"""Authorized semantic search: candidates from four channels, authorized, fused through visible
paths only.

Relevance is not permission. When the sync's pre-filter keys are at hand (authz.prefilter), the
index searches only the documents the caller may see as far as the last sync knew, so recall holds
when that is a small share of the corpus. The index answers four independent searches (chunks by
BM25 over their text and page title, chunks by the query's vector, entities by its low-level keywords,
relations by its high-level keywords) and expands nothing. Every document those candidates stand
on is authorized in one batch; an entity or relation is kept when every document supporting it is
visible (DESIGN.md A4), or rebuilt from the visible ones when one of those alone yields what ranked
it (its name, or the text its vector embeds: :meth:`GraphHit.rebuilt_from`; such an item ranks its
visible chunks and is never shown), and only then are its chunks fetched. So a hidden page never
selects or orders what a caller gets: a term found only in hidden pages yields what a term found
nowhere yields (the leak suite checks it with canaries), and a page copied into a space the caller
cannot see takes nothing from the entities of the copy they can.

Ranking is weighted reciprocal-rank fusion of whole documents over the channels and one more
read from the authorized candidates' own chunks, what their links say of the other candidates
(anchor text: an overview page's row "Delete (drop) an HCatalog table" names the page it links to
in the question's words), plus a second hop for multi-hop questions: candidates sharing a
specific entity with the best documents found rank higher (never above the document they were
reached through), the entity rebuilt from the authorized candidates' own mentions of it. A hit
names the channels that found it. A similarity floor keeps noise out of the vector channels: a query
that matches nothing visible returns nothing rather than the least bad pages.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import UTC, datetime

from authz import links, policy, prefilter
from authz.gate import Gate
from authz.prefilter import AclFile
from core import ids
from core.errors import InvalidArgument
from core.references import references
from core.telemetry import span
from core.text import MARKDOWN_LINK, plain
from navigator.navigator import Navigator
from navigator.base import PageSummary
from retrievers.base import ChunkHit, GraphHit, RawResults, SemanticIndex
from retrievers.explore import Exploration, Explorer
from retrievers.lexical import tokens
from retrievers.shown import MAX_EVIDENCE_DOCS, snippet, visible_graph, window

MAX_QUERY_CHARS = 2000
MAX_TOP_K = 50
MAX_SPACES = 50
MAX_LABELS = 20
KINDS = frozenset({"page", "issue"})
SNIPPET_CHARS = {"concise": 300, "detailed": 1500}
MAX_GRAPH_HITS = {"concise": 5, "detailed": 15}
# Documents authorized for the graph channels' evidence per search at most, beyond the chunk
# candidates': every one is an OpenFGA check, and an issue quoting a page doubles an entity's
# evidence. The best items are kept within it; the rest are left out, never shown. Items reach it
# already narrowed to the pre-filter's documents, so, as with the candidate cap, only keys older
# than the permissions let a hidden document take any of it. It does not bind on the dev sets
# (`wayfinder eval`: the same figures with and without it; 60 cost Hive all-hops@5 0.933 -> 0.867).
GRAPH_EVIDENCE_BUDGET = 120
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
# Weighted reciprocal-rank fusion of whole documents: score = sum over channels of
# weight / (RRF_K + the document's rank in that channel). Tuned on the dev sets (Hive, MuSiQue)
# with `wayfinder eval` and the offline providers: the lexical channel carries identifiers and
# titles, the graph channels and the second hop multi-hop structure; a small RRF_K trusts each
# channel's top ranks. Link text weighs what a page's own words weigh. Measured on the full
# pipeline (the second hop's seeds move with the weights), Hive MRR / MuSiQue recall@5: 0.900 /
# 0.655 here; lexical, vector or entity 20% either way, relation anywhere from 0.6 to 1.0 and
# anchor 1.75 give the same Hive MRR; anchor 2.25 gives 0.833, relation 0.5 0.856 / 0.665; without
# link text Hive MRR is 0.844 and recall@5 0.933 (1.000 here, and with link text weighted anywhere
# from 1.0 to 3.0). The dev sets are small (15 and 50 questions): one question moves MRR by up to 0.067.
# Hosted embeddings deserve their own tuning.
RRF_K = 2
WEIGHTS = {"lexical": 2.0, "vector": 0.5, "entity": 0.5, "relation": 0.8, "anchor": 2.0, "bridge": 1.0}
# The second hop: documents sharing a specific entity with the BRIDGE_SEEDS best documents, among
# the candidates already found; specific means mentioned by 2..BRIDGE_MAX_DOCS of the authorized
# candidates (MuSiQue dev recall@5: 0.642 at 10 and 15, 0.635 at 20).
BRIDGE_SEEDS = 2
BRIDGE_MAX_DOCS = 10
# Pages whose shown chunks share this share of their three-word runs are one hit ("also in").
NEAR_DUPLICATE = 0.8


@dataclass(frozen=True)
class SearchHit:
    id: str
    kind: str
    title: str
    space: str  # the page's space id, or the project id
    breadcrumb: list[str]
    url: str
    snippet: str
    chunk_id: str
    score: float
    why: list[str]
    also_in: list[str]  # near-duplicate pages (the same text elsewhere), ranked lower
    labels: list[str]
    updated_at: str | None  # ISO 8601, UTC


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
    """``acl`` (the keys a sync writes beside the index) lets the index rank only the documents the
    caller may see, so recall holds when they see a small share of the corpus; without it every
    document is ranked and the best ``candidates`` per channel are authorized."""

    def __init__(self, index: SemanticIndex, navigator: Navigator, candidates: int, acl: AclFile | None = None) -> None:
        self._index = index
        self._navigator = navigator
        self._candidates = candidates  # per channel, before the relevance floor
        self._acl = acl

    async def search(
        self,
        gate: Gate,
        query: str,
        *,
        top_k: int = 10,
        spaces: Sequence[str] | None = None,
        projects: Sequence[str] | None = None,
        labels: Sequence[str] | None = None,
        updated_after: datetime | None = None,
        kinds: Sequence[str] | None = None,
        response_format: str = "concise",
    ) -> SearchResult:
        """``spaces`` and ``projects`` (keys: pages of those spaces, issues of those projects),
        ``labels`` (any of them), ``updated_after`` and ``kinds`` narrow the candidates before
        anything is ranked."""
        query = _checked(query, top_k, spaces, projects, response_format)
        wanted = _Filters.checked(labels, updated_after, kinds)
        limit = SNIPPET_CHARS[response_format]
        # The query is read (its keywords and vectors: no document) while what to search is authorized.
        (candidate_spaces, within), probe = await asyncio.gather(self._searched(gate, spaces, projects), self._index.probe(query))
        with span("index.query", candidates=self._candidates):
            raw = await self._index.query(probe, self._candidates, within)
        chunks, graph = _relevant_candidates(raw, query)
        lexical = raw.lexical

        # First round trip: the spaces, every candidate document, and the link targets in entity
        # and relation text, asked while the documents' places are read (one wait, not two).
        # Always at least the spaces, so an unreachable OpenFGA fails the request even when the
        # index found nothing. A document stored in a space not asked yet costs one more batch.
        documents = [c.doc_id for c in [*chunks, *lexical]] + [d for g in graph for d in sorted(g.doc_ids)]
        graph_text = [t for g in graph for t in (g.name, window(g.description, limit))]
        also = [*candidate_spaces, *links.references_in(graph_text)]
        placed, _ = await asyncio.gather(self._navigator.placed(documents), gate.visible([*documents, *also]))
        candidates = await policy.pages_in_visible_spaces(gate, placed, also=also)
        searchable = await gate.visible(candidate_spaces)  # answered by the batch above
        candidates = {pid: p for pid, p in candidates.items() if p.space_id in searchable and wanted.admit(p)}
        chunks = [c for c in chunks if c.doc_id in candidates]
        lexical = [c for c in lexical if c.doc_id in candidates]
        graph = await visible_graph(gate, graph, candidates.keys(), limit, rebuilt=True)

        # Only now, through items the caller may see, are further chunks reached.
        known = {c.chunk_id: c for c in [*chunks, *lexical]}
        reached = [cid for g in graph for cid in g.chunk_ids if cid not in known]
        with span("index.chunks", chunks=len(reached)):
            expanded = await self._index.chunks(reached) if reached else []
        known.update((c.chunk_id, c) for c in expanded if c.doc_id in candidates)
        channels = [*_channels(chunks, lexical, graph, known), _anchors(known, candidates.keys(), raw.term_weights)]
        with span("search.bridges"):
            bridges = await self._bridges(gate, _fuse(channels), candidates.keys())
        if bridges:
            channels.append(bridges)
        with span("search.rank"):
            fused = _below_their_seeds(_fuse(channels), bridges.via) if bridges else _fuse(channels)
            ranked = [(r, known[r.chunk_id]) for r in _near_duplicates_grouped(fused, known, top_k)]

        # Second round trip: the breadcrumbs of the hits shown (and of their near-duplicates), and
        # the link targets in their snippets, which lose the targets the caller cannot see (A11).
        windows = [_chunk_window(chunk, limit) for _, chunk in ranked]
        shown = {doc: candidates[doc] for r, _ in ranked for doc in (r.doc_id, *r.also_in)}
        summaries = await policy.visible_pages(gate, shown, also=links.references_in(windows))
        snippets = await links.redact(gate, windows)
        hits = [
            _hit(summary, dataclasses.replace(r, also_in=[d for d in r.also_in if d in summaries]), snippet(text, limit))
            for (r, chunk), text in zip(ranked, snippets, strict=True)
            if (summary := summaries.get(chunk.doc_id)) is not None
        ]
        graph_results = [GraphResult(g.kind, g.name, snippet(g.description, limit), sorted(g.doc_ids)) for g in graph if not g.partial]
        graph_limit = MAX_GRAPH_HITS[response_format]
        return SearchResult(
            hits=hits,
            entities=[g for g in graph_results if g.kind == "entity"][:graph_limit],
            relations=[g for g in graph_results if g.kind == "relation"][:graph_limit],
        )

    async def explore(self, gate: Gate, entity: str, *, hops: int = 1, limit: int = 20) -> Exploration:
        """The entity graph around ``entity`` through visible items only (:mod:`retrievers.explore`),
        narrowed by the same pre-filter as search."""
        within = await self._admissible(gate, await self._navigator.container_ids())
        return await Explorer(self._index, self._navigator).explore(gate, entity, hops, limit, within)

    async def _searched(
        self, gate: Gate, spaces: Sequence[str] | None, projects: Sequence[str] | None
    ) -> tuple[list[str], frozenset[str] | None]:
        """The spaces and projects to search, and :meth:`_admissible` of them. The ones asked for
        are authorized as asked, whether they exist or not: a missing one and a hidden one look
        alike, and the gate is always asked."""
        if spaces or projects:
            searched = sorted({ids.space_id(key) for key in spaces or ()} | {ids.project_id(key) for key in projects or ()})
        else:
            searched = await self._navigator.container_ids()
        # Every candidate that clears the relevance floor, up to the cap, among the documents the
        # caller may see as far as the last sync knew (A7: everything is still checked below).
        # Without those keys, which candidates the caller may see cannot change which visible
        # ones are considered (A4), short of the cap.
        return searched, await self._admissible(gate, searched)

    async def _admissible(self, gate: Gate, spaces: Sequence[str]) -> frozenset[str] | None:
        """The documents of ``spaces`` the caller may see as far as the last sync knew; None
        without the sync's keys (then nothing is narrowed)."""
        keys = self._acl.current() if self._acl is not None else None
        return await prefilter.admissible(gate, keys, spaces) if keys is not None else None

    async def _bridges(self, gate: Gate, fused: Sequence[_Ranked], visible: Collection[str]) -> _Channel | None:
        """The second hop of a multi-hop question: candidates that share a specific entity with the
        best documents found. Each entity is rebuilt from the ``visible`` (authorized) candidates'
        fragments only (A4): that a document mentions it is that document's own text, so what
        links two visible documents, and how specific the link is, is counted over visible
        documents alone. A hidden document neither adds, removes nor weighs a link, and no
        further document is authorized here. Only candidates already found are ranked; none is
        added, and the seeds themselves are not: the second hop is reached through them, so it
        neither reorders them nor ranks above the seed it was reached through (the channel's
        ``via``)."""
        seeds = [r.doc_id for r in fused[:BRIDGE_SEEDS]]
        if not seeds:
            return None
        chunk_of = {r.doc_id: r.chunk_id for r in fused}
        visible = set(visible)
        # Only an entity that joins a seed to another candidate can lift anything.
        rebuilt = [dataclasses.replace(e, doc_ids=frozenset(e.doc_ids & visible), description="") for e in await self._index.entities_of(seeds)]
        entities = [
            e
            for e in rebuilt
            if 2 <= len(e.doc_ids) <= BRIDGE_MAX_DOCS and e.doc_ids & set(seeds) and len(e.doc_ids & chunk_of.keys()) >= 2
        ]
        # Only the names are shown (in `why`); a name that is a link to a hidden page is left out.
        shown = await visible_graph(gate, entities, visible, 0)
        scores: dict[str, float] = {}
        reasons: dict[str, tuple[float, str]] = {}
        via: dict[str, str] = {}
        for position, seed in enumerate(seeds, start=1):
            for entity in shown:
                if seed not in entity.doc_ids:
                    continue
                weight = 1.0 / (math.log(1 + len(entity.doc_ids)) * position)
                for doc in entity.doc_ids - set(seeds):
                    if doc in chunk_of:
                        scores[doc] = scores.get(doc, 0.0) + weight
                        via.setdefault(doc, seed)  # the best-placed seed that reaches it
                        if weight > reasons.get(doc, (0.0, ""))[0]:
                            reasons[doc] = (weight, f"linked through {entity.name}")
        ranked = sorted(scores, key=lambda d: (-scores[d], d))
        return _Channel(WEIGHTS["bridge"], [(d, chunk_of[d], reasons[d][1]) for d in ranked], via)


@dataclass(frozen=True)
class _Filters:
    labels: frozenset[str] | None
    updated_after: datetime | None
    kinds: frozenset[str]

    @classmethod
    def checked(cls, labels: Sequence[str] | None, updated_after: datetime | None, kinds: Sequence[str] | None) -> _Filters:
        if labels is not None and (len(labels) > MAX_LABELS or any(not 0 < len(label) <= 255 for label in labels)):
            raise InvalidArgument(f"labels takes 1 to {MAX_LABELS} labels of 1 to 255 characters")
        unknown = sorted(set(kinds or ()) - KINDS)
        if unknown:
            raise InvalidArgument(f"kinds takes {sorted(KINDS)}, got {unknown}")
        if updated_after is not None and updated_after.tzinfo is None:
            updated_after = updated_after.replace(tzinfo=UTC)  # a time without a zone is UTC
        return cls(frozenset(labels) if labels else None, updated_after, frozenset(kinds) if kinds else KINDS)

    def admit(self, page: PageSummary) -> bool:
        if _kind(page.id) not in self.kinds:
            return False
        if self.labels is not None and not self.labels.intersection(page.labels):
            return False
        return self.updated_after is None or (page.updated_at is not None and page.updated_at > self.updated_after)


def _kind(doc_id: str) -> str:
    """"page" or "issue": a restricted Jira comment is Jira content, filtered with issues."""
    kind = doc_id.partition(":")[0]
    return "issue" if kind == "comment" else kind


def _checked(query: str, top_k: int, spaces: Sequence[str] | None, projects: Sequence[str] | None, response_format: str) -> str:
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
    for name, keys in (("spaces", spaces), ("projects", projects)):
        if keys is not None and len(keys) > MAX_SPACES:
            raise InvalidArgument(f"{name} takes at most {MAX_SPACES} keys, got {len(keys)}")
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
    chunk_docs = {c.doc_id for c in [*chunks, *raw.lexical]}
    kept = _within_budget(sorted(graph, key=lambda g: -g.score), chunk_docs, GRAPH_EVIDENCE_BUDGET)
    return chunks, [g for g in graph if g in kept]


def _within_budget(items: Sequence[GraphHit], free: AbstractSet[str], budget: int) -> list[GraphHit]:
    """The leading ``items`` whose documents, beyond those in ``free`` (authorized anyway), number
    at most ``budget`` together; an item that would overrun it is skipped."""
    taken: set[str] = set()
    kept = []
    for item in items:
        extra = item.doc_ids - free - taken
        if len(taken) + len(extra) <= budget:
            taken |= extra
            kept.append(item)
    return kept


def _hit(summary: PageSummary, ranked: _Ranked, snippet: str) -> SearchHit:
    return SearchHit(
        id=summary.id,
        kind=summary.id.partition(":")[0],  # "page", "issue" or "comment"
        title=summary.title,
        space=summary.space_id,
        breadcrumb=[crumb.title for crumb in summary.ancestors],
        url=summary.url,
        snippet=snippet,
        chunk_id=ranked.chunk_id,
        score=round(ranked.score, 5),
        why=ranked.why,
        also_in=ranked.also_in,
        labels=list(summary.labels),
        updated_at=summary.updated_at.isoformat() if summary.updated_at else None,
    )


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


@dataclass(frozen=True)
class _Channel:
    """One channel's documents, best first: (document, its chunk that ranked, why)."""

    weight: float
    ranking: list[tuple[str, str, str]]
    via: dict[str, str] = field(default_factory=dict)  # the second hop: document → the seed that reached it


@dataclass
class _Ranked:
    doc_id: str
    chunk_id: str
    score: float = 0.0
    why: list[str] = field(default_factory=list)
    best: float = 0.0  # the largest single channel's credit, whose chunk is shown
    also_in: list[str] = field(default_factory=list)  # near-duplicates grouped under this one


def _channels(chunks: Sequence[ChunkHit], lexical: Sequence[ChunkHit], graph: Sequence[GraphHit], known: dict[str, ChunkHit]) -> list[_Channel]:
    """The visible candidates as one document ranking per channel."""

    def ranking(found: Iterable[tuple[str, str]]) -> list[tuple[str, str, str]]:
        seen: dict[str, tuple[str, str, str]] = {}
        for chunk_id, reason in found:
            doc = known[chunk_id].doc_id if chunk_id in known else None
            if doc is not None and doc not in seen:
                seen[doc] = (doc, chunk_id, reason)
        return list(seen.values())

    def by_item(kind: str) -> list[tuple[str, str]]:
        items = sorted((g for g in graph if g.kind == kind), key=lambda g: -g.score)
        return [(cid, f"{kind} {item.name}") for item in items for cid in item.chunk_ids]

    return [
        _Channel(WEIGHTS["lexical"], ranking((c.chunk_id, "keywords") for c in sorted(lexical, key=lambda c: -c.score))),
        _Channel(WEIGHTS["vector"], ranking((c.chunk_id, "text similarity") for c in sorted(chunks, key=lambda c: -c.score))),
        _Channel(WEIGHTS["entity"], ranking(by_item("entity"))),
        _Channel(WEIGHTS["relation"], ranking(by_item("relation"))),
    ]


def _anchors(known: Mapping[str, ChunkHit], candidates: Collection[str], weights: Mapping[str, float]) -> _Channel:
    """The candidates as the links of the visible chunks describe them (anchor text, as web search
    reads it): an overview page says in one line what each page it links to is for ("Delete (drop)
    an HCatalog table"), often in the words of the question rather than the page's own. A link to
    another candidate is scored by the query terms of its line: their ``weights`` (IDF over the
    documents searched) times the share of the line's terms they are, so a long line says less
    about each of its links; a line with several links describes each by its own text only. The
    best-described candidates first, each shown by its best-placed chunk. Every chunk read is an
    authorized candidate's and every target is one: nothing is added, read or authorized here."""
    shown: dict[str, str] = {}  # document → its best-placed chunk (the channels' order)
    for chunk_id, chunk in known.items():
        shown.setdefault(chunk.doc_id, chunk_id)
    targets = {doc for doc in shown if doc in candidates}
    described: list[tuple[str, str]] = []  # (target, the text describing it)
    for chunk in known.values():
        for line in (line for line in chunk.text.splitlines() if "](" in line):
            links = [(m["text"], refs) for m in MARKDOWN_LINK.finditer(line) if not m["bang"] and (refs := references(m["target"]))]
            for text, refs in links:
                described.extend((target, plain(line) if len(links) == 1 else text) for target in refs & targets - {chunk.doc_id})
    best: dict[str, float] = {}
    for (target, _), terms in zip(described, tokens([text for _, text in described]) if described else [], strict=True):
        found = [weights[term] for term in set(terms) if term in weights]
        if found:
            best[target] = max(best.get(target, 0.0), sum(found) * len(found) / len(set(terms)))
    ranked = sorted(best, key=lambda doc: (-best[doc], doc))
    return _Channel(WEIGHTS["anchor"], [(doc, shown[doc], "link text") for doc in ranked])


def _fuse(channels: Sequence[_Channel]) -> list[_Ranked]:
    """Weighted reciprocal-rank fusion of the channels, one entry per document, best first."""
    fused: dict[str, _Ranked] = {}
    for channel in channels:
        for rank, (doc, chunk_id, reason) in enumerate(channel.ranking, start=1):
            credit = channel.weight / (RRF_K + rank)
            entry = fused.setdefault(doc, _Ranked(doc, chunk_id))
            entry.score += credit
            if credit > entry.best:
                entry.best, entry.chunk_id = credit, chunk_id
            if reason not in entry.why and len(entry.why) < 4:
                entry.why.append(reason)
    return sorted(fused.values(), key=lambda r: (-r.score, r.doc_id))


def _below_their_seeds(fused: list[_Ranked], via: dict[str, str]) -> list[_Ranked]:
    """``fused`` with each document the second hop reached ranked no higher than the seed it was
    reached through (just below it when its credit would lift it past), best first."""
    seed_score = {r.doc_id: r.score for r in fused if r.doc_id in via.values()}
    for entry in fused:
        seed = via.get(entry.doc_id)
        if seed in seed_score:
            entry.score = min(entry.score, math.nextafter(seed_score[seed], 0.0))
    return sorted(fused, key=lambda r: (-r.score, r.doc_id))


def _near_duplicates_grouped(ranked: Sequence[_Ranked], known: dict[str, ChunkHit], top_k: int) -> list[_Ranked]:
    """The best ``top_k`` of the ranking, each page whose shown chunk nearly repeats that of a
    better-ranked page (a copy in another version's tree, a page moved and kept) folded into that
    page's ``also_in``. Each page is compared with the kept ones only: at most ``top_k`` each."""
    kept: list[tuple[_Ranked, set[int]]] = []
    for entry in ranked:
        shingles = _shingles(known[entry.chunk_id].text)
        for canonical, seen in kept:
            small, large = sorted((len(shingles), len(seen)))
            # Sets of such different sizes cannot share enough: the cheap test first.
            if shingles and small >= NEAR_DUPLICATE * large and (shared := len(shingles & seen)) >= NEAR_DUPLICATE * (large + small - shared):
                canonical.also_in.append(entry.doc_id)
                break
        else:
            if len(kept) < top_k:
                kept.append((dataclasses.replace(entry, also_in=[]), shingles))
    return [entry for entry, _ in kept]


def _shingles(text: str) -> set[int]:
    """Hashes of the text's runs of three words, case and punctuation aside."""
    words = [w.casefold() for w in _WORD.findall(text)]
    return set(map(hash, zip(words, words[1:], words[2:], strict=False)))


def _chunk_window(chunk: ChunkHit, limit: int) -> str:
    """:func:`~retrievers.shown.window` of a chunk, without the first and last words the chunker may have cut out
    of a longer one: ``:27362075`` left over from ``page:27362075`` names no page in any spelling
    redaction knows, but shows a hidden id. A chunk that starts the page (its title heading) keeps
    its first word."""
    words = chunk.text.split()
    start = 0 if chunk.text.startswith("#") else 1
    return window(" ".join(words[start:-1]), limit)
