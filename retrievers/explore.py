"""explore: the entity graph around one entity, one or two hops out, through visible items only.

An entity or relation is shown, and walked through, only when every document supporting it is
visible to the caller in this request (DESIGN.md A4). The walk goes on only from entities the
caller may see, so a hidden page decides neither where it goes nor what it shows; an entity that
is hidden, unknown, or supported by more documents than one request checks is the same
not_found. Names and descriptions lose the link targets the caller cannot see (A11), and an item
whose name is a link to a hidden page is left out.

Nearest first: the start entity's relations by weight (how often the pages say them), then those
of each entity reached, in the order reached. Items backed by more than MAX_EVIDENCE_DOCS
documents are not considered, and a request authorizes at most EVIDENCE_BUDGET documents beyond
the start's, the first candidates first. With the sync's pre-filter keys (``within``), only items
whose documents the caller may see as far as the last sync knew are considered at all, so hidden
items take none of that budget; the live gate still decides (A7).
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from authz import links, policy
from authz.gate import Gate
from core.errors import InvalidArgument, NotFound
from core.telemetry import span
from navigator.navigator import Navigator
from retrievers.base import GraphHit, SemanticIndex
from retrievers.shown import MAX_EVIDENCE_DOCS, snippet, visible_graph, window

MAX_ENTITY_CHARS = 200
MAX_HOPS = 2
MAX_LIMIT = 50
DESCRIPTION_CHARS = 300
MAX_START_EVIDENCE = 100  # documents behind the start entity, all authorized
EVIDENCE_BUDGET = 300  # further documents authorized per request, at most


@dataclass(frozen=True)
class ExploredEntity:
    name: str
    description: str
    evidence: list[str]  # every supporting document: all visible
    hops: int  # 0 for the start


@dataclass(frozen=True)
class ExploredRelation:
    source: str
    target: str
    description: str
    evidence: list[str]


@dataclass(frozen=True)
class Exploration:
    entity: ExploredEntity
    entities: list[ExploredEntity]  # nearest first
    relations: list[ExploredRelation]  # those between the entities shown
    truncated: bool  # visible entities were left out for the limit


class Explorer:
    def __init__(self, index: SemanticIndex, navigator: Navigator) -> None:
        self._index = index
        self._navigator = navigator

    async def explore(self, gate: Gate, entity: str, hops: int, limit: int, within: AbstractSet[str] | None) -> Exploration:
        """The entities and relations up to ``hops`` relations from ``entity``, at most ``limit``
        entities besides it; ``within`` the pre-filter's documents (None: no pre-filter)."""
        name = _checked(entity, hops, limit)
        with span("index.graph"):
            start = await self._index.entity_named(name, within)
            if start is None or len(start.doc_ids) > MAX_START_EVIDENCE:
                raise NotFound(name)
            around = await self._index.neighbourhood([start.name], within)
        budget = _Budget(EVIDENCE_BUDGET, start.doc_ids)
        # One batch: the start and its first hop. Nothing read is used unless the start is visible.
        steps = budget.taken(_ordered(around.relations, around.entities, [start.name]))
        shown = await _visible(gate, [start, *(item for step in steps for item in step)], self._navigator)
        if start.name not in shown.entities:
            raise NotFound(name)
        walk = _Walk(shown.entities[start.name], limit)
        frontier = walk.add(steps, shown, hop=1)
        if hops == 2 and frontier:
            with span("index.graph"):
                around = await self._index.neighbourhood(frontier, within)
            steps = budget.taken(_ordered(around.relations, around.entities, frontier))
            walk.add(steps, await _visible(gate, [item for step in steps for item in step], self._navigator), hop=2)
        return walk.result()


def _checked(entity: str, hops: int, limit: int) -> str:
    name = entity.strip() if isinstance(entity, str) else ""
    if not 0 < len(name) <= MAX_ENTITY_CHARS:
        raise InvalidArgument(f"entity must be a name of 1 to {MAX_ENTITY_CHARS} characters")
    if type(hops) is not int or not 1 <= hops <= MAX_HOPS:
        raise InvalidArgument(f"hops must be 1 or {MAX_HOPS}, got {hops!r}")
    if type(limit) is not int or not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgument(f"limit must be between 1 and {MAX_LIMIT}, got {limit!r}")
    return name


Step = tuple[GraphHit, GraphHit]  # a relation and the entity it reaches


def _ordered(relations: Sequence[GraphHit], entities: dict[str, GraphHit], frontier: Sequence[str]) -> list[Step]:
    """Each relation with its far end, the frontier's order first, then the heaviest relation,
    then names; items backed by too many documents to authorize are left out."""
    position = {name: n for n, name in enumerate(frontier)}
    steps = [(r, entities[r.ends[1]]) for r in relations if r.ends is not None and r.ends[1] in entities]
    steps.sort(key=lambda step: (position.get(step[0].ends[0], len(position)), -step[0].score, step[0].ends[1]))  # type: ignore[index]
    return [(r, e) for r, e in steps if len(r.doc_ids) <= MAX_EVIDENCE_DOCS and len(e.doc_ids) <= MAX_EVIDENCE_DOCS]


class _Budget:
    """The documents a request may authorize beyond those it must (the start's)."""

    def __init__(self, size: int, free: AbstractSet[str]) -> None:
        self._left = size
        self._seen = set(free)

    def taken(self, steps: Sequence[Step]) -> list[Step]:
        """The leading ``steps`` whose new documents fit what is left; a step that would overrun
        it is skipped."""
        kept = []
        for relation, entity in steps:
            new = (relation.doc_ids | entity.doc_ids) - self._seen
            if len(new) <= self._left:
                self._left -= len(new)
                self._seen |= new
                kept.append((relation, entity))
        return kept


@dataclass(frozen=True)
class _Shown:
    entities: dict[str, GraphHit]  # visible, as shown (description cut, links redacted)
    relations: dict[str, GraphHit]


async def _visible(gate: Gate, items: Sequence[GraphHit], navigator: Navigator) -> _Shown:
    """The ``items`` the caller may see: every document behind them, its space and the link
    targets in their names and descriptions authorized in one batch."""
    documents = sorted({doc for item in items for doc in item.doc_ids})
    placed = await navigator.placed(documents)
    texts = [text for item in items for text in (item.name, window(item.description, DESCRIPTION_CHARS))]
    visible = await policy.pages_in_visible_spaces(gate, placed, also=links.references_in(texts))
    kept = await visible_graph(gate, list({(item.kind, item.name): item for item in items}.values()), visible.keys(), DESCRIPTION_CHARS)
    return _Shown({g.name: g for g in kept if g.kind == "entity"}, {g.name: g for g in kept if g.kind == "relation"})


class _Walk:
    """The entities reached so far (nearest first) and the relations between them."""

    def __init__(self, start: GraphHit, limit: int) -> None:
        self._start = start
        self._limit = limit
        self._hops = {start.name: 0}
        self._entities: list[GraphHit] = []
        self._relations: dict[frozenset[str], GraphHit] = {}
        self._truncated = False

    def add(self, steps: Sequence[Step], shown: _Shown, hop: int) -> list[str]:
        """Walk the visible ``steps``; the names of the entities newly reached."""
        reached = []
        for relation, entity in steps:
            if relation.name not in shown.relations or entity.name not in shown.entities:
                continue
            if entity.name not in self._hops:
                if len(self._entities) == self._limit:
                    self._truncated = True
                    continue
                self._hops[entity.name] = hop
                self._entities.append(shown.entities[entity.name])
                reached.append(entity.name)
            self._relations.setdefault(frozenset(relation.ends or ()), shown.relations[relation.name])
        return reached

    def result(self) -> Exploration:
        def entity(hit: GraphHit) -> ExploredEntity:
            return ExploredEntity(hit.name, snippet(hit.description, DESCRIPTION_CHARS), sorted(hit.doc_ids), self._hops[hit.name])

        return Exploration(
            entity=entity(self._start),
            entities=[entity(e) for e in self._entities],
            relations=[
                ExploredRelation(r.ends[0], r.ends[1], snippet(r.description, DESCRIPTION_CHARS), sorted(r.doc_ids))
                for r in self._relations.values()
                if r.ends is not None
            ],
            truncated=self._truncated,
        )
