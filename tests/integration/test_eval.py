"""`wayfinder eval`'s scoring on the real stack: the indexed slice, the real gate, all three systems.

Each system's pages are authorized before they are scored, and gold pages the principal may not
see are left out of its score rather than counted as misses.
"""

from __future__ import annotations

import json
from pathlib import Path

from authz.client import OpenFGAClient
from authz.gate import Gate
from core.models import Principal
from core.settings import Settings
from evals.datasets import load_dataset
from evals.runner import SYSTEMS, ask, report
from navigator.navigator import Navigator
from navigator.store import Neo4jStore
from retrievers.factory import semantic_index
from retrievers.semantic import SemanticRetriever

DESIGN_DOCS_CHILD = "34019487"  # Correlation Optimizer, committers only (with all of DesignDocs)
QUESTIONS = [
    {"id": "metastore", "kind": "semantic", "question": "Which metastore servers does a client try when hive.metastore.uris lists several?", "gold_pages": ["27362076"]},
    {"id": "correlation", "kind": "semantic", "question": "correlation optimizer design", "gold_pages": [DESIGN_DOCS_CHILD]},
    {"id": "schema", "kind": "multihop", "question": "Which tool initializes the metastore schema, and which page explains metastore administration?", "gold_pages": ["34835119", "27362076"]},
    {"id": "tree", "kind": "navigation", "question": "children of the metastore page", "gold_pages": ["55156221"]},
]


async def test_each_system_is_scored_on_what_the_principal_may_see(indexed, services: Settings, tmp_path: Path):
    dataset = tmp_path / "questions.jsonl"
    dataset.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    questions = load_dataset(dataset)
    async with OpenFGAClient(services.openfga) as authorizer, Neo4jStore(services.neo4j) as graph, semantic_index(services) as index:
        navigator = Navigator(graph)
        retriever = SemanticRetriever(index, navigator, services.mcp.search_candidates)
        runs = {}
        for user in ("alice", "bob"):
            gate = Gate(authorizer, Principal(user=user))
            runs[user] = [await ask(gate, q, retriever, navigator, index) for q in questions if q.searchable]
            shown = {page for scored in runs[user] for ranked in scored.ranked.values() for page in ranked}
            assert shown and shown <= {r.object for r in gate.records if r.allowed}  # each was checked and allowed

    alice = {s.question.id: s for s in runs["alice"]}
    bob = {s.question.id: s for s in runs["bob"]}
    correlation = f"page:{DESIGN_DOCS_CHILD}"
    # alice (a committer) is scored on the design page; bob's score leaves it out, and no system
    # shows it to him
    assert alice["correlation"].gold == (correlation,) and alice["correlation"].ranked["wayfinder"][0] == correlation
    assert bob["correlation"].gold == () and bob["correlation"].left_out == (correlation,)
    assert all(correlation not in ranked for s in runs["bob"] for ranked in s.ranked.values())
    assert "page:27362076" in alice["metastore"].ranked["wayfinder"][:5]
    for scored in runs["alice"]:
        assert set(scored.ranked) == set(SYSTEMS) and all(len(r) <= 10 for r in scored.ranked.values())

    summary = report(dataset, "bob", [1, 5], questions, runs["bob"])
    assert summary["scored"] == 2 and summary["no_visible_gold"] == ["correlation"] and summary["not_searched"] == ["tree"]
    assert set(summary["systems"]) == set(SYSTEMS)
    assert set(summary["systems"]["wayfinder"]["by_kind"]) == {"semantic", "multihop"}
    assert {"recall@1", "recall@5", "mrr", "ndcg@10", "all_hops@5"} == set(summary["systems"]["wayfinder"]["all"])
