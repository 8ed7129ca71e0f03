"""Retrieval quality on question files, Wayfinder beside its baselines, in one run
(``wayfinder eval``; its stack is :mod:`devstack.evaluation`).

Each question is asked as one principal of three systems, each authorized with that principal's
gate before anything is scored:

* ``wayfinder`` — the search the MCP tool runs (:class:`retrievers.semantic.SemanticRetriever`);
* ``bm25`` — the lexical channel alone, over the same chunks;
* ``lightrag`` — LightRAG's own ``aquery_data`` (``mix``), no fusion.

Gold pages the principal cannot see are left out of its score (and listed); a question left with
none is skipped. Metrics: page recall@k, MRR, nDCG@10 and all-hops recall@5, over all questions
and per kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from authz import policy
from authz.gate import Gate
from evals.datasets import Question
from evals.metrics import mean, score
from navigator.navigator import Navigator
from retrievers.lightrag_adapter import LightRAGIndex
from retrievers.semantic import SemanticRetriever

SYSTEMS = ("wayfinder", "bm25", "lightrag")
DEPTH = 10  # hits asked of each system at least (nDCG@10 needs ten); more when a recall@k needs them
BASELINE_CANDIDATES = 50  # a baseline's results before authorization; the visible ones are scored


@dataclass(frozen=True)
class Scored:
    question: Question
    gold: tuple[str, ...]  # the gold pages the principal may see
    left_out: tuple[str, ...]  # hidden from the principal, or not in the stores at all
    ranked: dict[str, list[str]]  # system → pages, best first


async def ask(
    gate: Gate, question: Question, retriever: SemanticRetriever, navigator: Navigator, index: LightRAGIndex, depth: int = DEPTH
) -> Scored:
    async def visible(pages: Sequence[str]) -> list[str]:
        shown = await policy.pages_in_visible_spaces(gate, await navigator.placed(list(pages)))
        return [p for p in pages if p in shown]

    gold = await visible(question.gold)
    found = await retriever.search(gate, question.question, top_k=depth)
    candidates = max(BASELINE_CANDIDATES, 5 * depth)
    ranked = {
        "wayfinder": [hit.id for hit in found.hits],
        "bm25": (await visible(index.plain_bm25(question.question, candidates)))[:depth],
        "lightrag": (await visible(await index.plain_lightrag(question.question, candidates)))[:depth],
    }
    return Scored(question, tuple(gold), tuple(g for g in question.gold if g not in gold), ranked)


def report(path: Path, user: str, ks: Sequence[int], questions: Sequence[Question], scored: Sequence[Scored]) -> dict[str, Any]:
    counted = [s for s in scored if s.gold]
    kinds = sorted({s.question.kind for s in counted})
    systems: dict[str, Any] = {}
    for system in SYSTEMS:
        rows = [(s.question.kind, score(s.ranked[system], s.gold, ks)) for s in counted]
        systems[system] = {
            "all": mean([r for _, r in rows]),
            "by_kind": {kind: mean([r for k, r in rows if k == kind]) for kind in kinds},
        }
    return {
        "report": f"eval-{path.parent.name}.json",
        "dataset": str(path),
        "principal": user,
        "questions": len(questions),
        "scored": len(counted),
        "not_searched": [q.id for q in questions if not q.searchable],  # navigation: the navigator's
        "no_visible_gold": [s.question.id for s in scored if not s.gold],
        "systems": systems,
        "per_question": [
            {
                "id": s.question.id,
                "kind": s.question.kind,
                "gold": list(s.gold),
                "left_out": list(s.left_out),
                "ranks": {system: [s.ranked[system].index(g) + 1 if g in s.ranked[system] else None for g in s.gold] for system in SYSTEMS},
            }
            for s in scored
        ],
    }


def show(report: dict[str, Any], console: Console) -> None:
    systems = report["systems"]
    metrics = list(systems[SYSTEMS[0]]["all"])
    table = Table(title=f"{report['dataset']} — {report['scored']} question(s) as {report['principal']}")
    table.add_column("system")
    table.add_column("kind")
    for metric in metrics:
        table.add_column(metric, justify="right")
    for system in SYSTEMS:
        for kind, values in [("all", systems[system]["all"]), *systems[system]["by_kind"].items()]:
            table.add_row(system, kind, *(f"{values[m]:.3f}" for m in metrics))
    console.print(table)
    if report["not_searched"]:
        console.print(f"not searched (navigation questions, answered by the navigator): {', '.join(report['not_searched'])}")
    if report["no_visible_gold"]:
        console.print(f"skipped, no gold page visible to {report['principal']}: {', '.join(report['no_visible_gold'])}")
