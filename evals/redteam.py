"""The graph extraction red-team: a query-budgeted attacker, as a principal over MCP, tries to
rebuild the entities and relations that only pages it may not see support.

It plays the published extraction attacks on graph RAG (query the service, harvest the entities
and relations its answers show, query those in turn) with an unfair head start: its first queries
are the names of the very items it is after, then the titles of the hidden pages, then whatever
the answers reveal, each harvested entity explored two hops out — until ``budget`` calls are
spent. An item counts as recovered when an answer shows it as an entity or a relation (a name in
``search``'s ``entities``/``relations`` or anywhere in an ``explore`` answer's graph). The targets
are the items whose every supporting document is hidden from the attacker, by the index's own
record against the leak oracle; the number recovered must be 0.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

BUDGET = 150  # tool calls per attack
SEED_TARGETS = 40  # target names the attacker starts from (drawn at random, seeded)


@dataclass
class Attack:
    targets: int  # items only hidden pages support
    calls: int = 0
    refused: int = 0
    seen: set[str] = field(default_factory=set)  # every entity and relation answers showed
    recovered: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {"targets": self.targets, "calls": self.calls, "refused": self.refused, "items_seen": len(self.seen), "recovered": len(self.recovered), "recovered_items": self.recovered}


def secrets_of(evidence: Mapping[str, Set[str]], visible: Set[str]) -> set[str]:
    """The entities and relations (``"A -> B"``) whose every supporting document is hidden."""
    return {item for item, docs in evidence.items() if docs and not docs & visible}


def _shown(data: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The entity names and relation names (``"A -> B"``, both ways) an answer shows."""
    entities = [e["name"] for e in [data.get("entity") or {}, *data.get("entities", [])] if e.get("name")]
    relations: list[str] = []
    for relation in data.get("relations", []):
        if "source" in relation:
            relations += [f"{relation['source']} -> {relation['target']}", f"{relation['target']} -> {relation['source']}"]
        elif relation.get("name"):
            relations.append(relation["name"])
    return entities, relations


async def extract_graph(
    client: Any, evidence: Mapping[str, Set[str]], visible: Set[str], hidden_titles: Sequence[str], budget: int = BUDGET, seed: int = 0
) -> Attack:
    """The attack as the principal ``client`` speaks for; ``evidence`` is the index's record of the
    documents behind each item (:meth:`LightRAGIndex.graph_evidence`), ``visible`` the oracle's."""
    targets = secrets_of(evidence, visible)
    attack = Attack(len(targets))
    names = sorted(t for t in targets if " -> " not in t)
    start = random.Random(seed).sample(names, min(SEED_TARGETS, len(names)))
    queue: deque[tuple[str, str]] = deque([*(("search", n) for n in start), *(("search", t) for t in hidden_titles), *(("explore", n) for n in start)])
    asked: set[tuple[str, str]] = set()
    while queue and attack.calls < budget:
        tool, text = queue.popleft()
        if (tool, text) in asked:
            continue
        asked.add((tool, text))
        arguments = {"query": text, "top_k": 10} if tool == "search" else {"entity": text, "hops": 2, "limit": 50}
        result = await client.call_tool(tool, arguments, raise_on_error=False)
        attack.calls += 1
        if result.is_error:
            attack.refused += 1
            continue
        entities, relations = _shown(result.structured_content or {})
        for name in entities:
            if ("explore", name) not in asked:
                queue.append(("explore", name))
        attack.seen.update(entities, relations)
    attack.recovered = sorted(attack.seen & targets)
    return attack
