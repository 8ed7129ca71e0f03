"""Retrieval quality on question files, Wayfinder beside its baselines, in one run
(``wayfinder eval``; its stack is :mod:`devstack.evaluation`), on ``pydantic_evals`` datasets.

Each search question is asked as one principal of four systems, each authorized with that
principal's gate before anything is scored:

* ``wayfinder`` — the search the MCP tool runs (:class:`retrievers.semantic.SemanticRetriever`);
* ``bm25`` — the lexical channel alone, over the same chunks;
* ``dense`` — the chunk vectors alone (the offline embedder's cosine);
* ``lightrag`` — LightRAG's own ``aquery_data`` (``mix``), no fusion.

Navigation questions with a ``nav`` object are asked of the navigator (what the tools
``list_children``, ``get_tree`` and ``resolve_path`` run), scored by exactness; without one they
are listed as not asked. Gold pages the principal cannot see are left out of
its score (and listed); a question left with none is skipped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_evals import Case, Dataset
from pydantic_evals.reporting import EvaluationReport

from authz import policy
from authz.gate import Gate
from core.errors import WayfinderError
from evals.datasets import Question
from evals.evaluators import NavigationExact, ranking
from navigator.navigator import MAX_CHILDREN_LIMIT, Navigator, TreeNode
from retrievers.lightrag_adapter import LightRAGIndex
from retrievers.semantic import SemanticRetriever

SYSTEMS = ("wayfinder", "bm25", "dense", "lightrag")
NAVIGATOR = "wayfinder"  # the system that answers navigation questions
DEPTH = 10  # hits asked of each system at least (nDCG@10 needs ten); more when a recall@k needs them
BASELINE_CANDIDATES = 50  # a baseline's results before authorization; the visible ones are scored
TREE_LIMIT = 200  # nodes of a subtree read for a navigation question


class EvalFailed(WayfinderError):
    """The evaluation could not run: its stack could not be built, or a system failed on a
    question (the run stops rather than score a failure as a miss)."""


@dataclass(frozen=True)
class Prepared:
    question: Question
    gold: tuple[str, ...]  # the gold pages the principal may see, in the question's order
    left_out: tuple[str, ...]  # hidden from the principal, or not in the stores at all


@dataclass(frozen=True)
class Outcome:
    """One system's run over a dataset: per question, its answer (pages, best first) and scores."""

    answers: dict[str, list[str]]
    scores: dict[str, dict[str, float]]


Task = Callable[[Question], Awaitable[list[str]]]


class Systems:
    """The systems of one run, each asked as one principal through a fresh gate per question."""

    def __init__(
        self, gate: Callable[[], Gate], retriever: SemanticRetriever, navigator: Navigator, index: LightRAGIndex, depth: int = DEPTH
    ) -> None:
        self._gate, self._retriever, self._navigator, self._index, self._depth = gate, retriever, navigator, index, depth
        # system → question → the pages it drew before anything was authorized (a baseline's first
        # ``depth``, every channel's first ``depth`` for Wayfinder): what a retrieve-then-filter
        # system holds before its filter (the report's exposure)
        self.unauthorized: dict[str, dict[str, list[str]]] = {}

    def gate(self) -> Gate:
        """A fresh gate of the principal."""
        return self._gate()

    def _drew(self, system: str, q: Question, pages: Sequence[str]) -> None:
        self.unauthorized.setdefault(system, {})[q.id] = list(dict.fromkeys(pages))

    async def _visible(self, gate: Gate, pages: Sequence[str]) -> list[str]:
        shown = await policy.pages_in_visible_spaces(gate, await self._navigator.placed(list(pages)))
        return [p for p in pages if p in shown]

    async def prepare(self, question: Question) -> Prepared:
        gold = await self._visible(self._gate(), question.gold)
        return Prepared(question, tuple(gold), tuple(g for g in question.gold if g not in gold))

    def search(self) -> dict[str, Task]:
        candidates = max(BASELINE_CANDIDATES, 5 * self._depth)

        async def wayfinder(q: Question) -> list[str]:
            # Its channels with nothing authorized and no pre-filter, for the exposure only:
            raw = await self._index.query(q.question, self._depth)
            drawn = [hit.doc_id for hit in (*raw.lexical, *raw.chunks)] + [doc for hit in (*raw.entities, *raw.relations) for doc in sorted(hit.doc_ids)]
            self._drew("wayfinder", q, drawn)
            return [hit.id for hit in (await self._retriever.search(self._gate(), q.question, top_k=self._depth)).hits]

        async def bm25(q: Question) -> list[str]:
            return self._index.plain_bm25(q.question, candidates)

        return {
            "wayfinder": wayfinder,
            "bm25": self.authorized("bm25", bm25),
            "dense": self.authorized("dense", lambda q: self._index.plain_dense(q.question, candidates)),
            "lightrag": self.authorized("lightrag", lambda q: self._index.plain_lightrag(q.question, candidates)),
        }

    def authorized(self, system: str, ranked: Task) -> Task:
        """A baseline as a task: its pages for the question, the first ``depth`` of them the
        principal may see."""

        async def task(q: Question) -> list[str]:
            pages = await ranked(q)
            self._drew(system, q, pages[: self._depth])
            return (await self._visible(self._gate(), pages))[: self._depth]

        return task

    async def navigate(self, q: Question) -> list[str]:
        """The navigator's answer to a navigation question, as the tools give it to the principal."""
        nav = q.nav
        if nav is None:
            raise EvalFailed(f"navigation question {q.id!r} has no nav object to ask the navigator")
        gate = self._gate()
        if nav.op == "resolve_path":
            resolved = await self._navigator.resolve_path(gate, nav.node)
            return [resolved.id] if resolved.id else []
        if nav.op == "children":
            found: list[str] = []
            cursor: str | None = None
            while True:
                page = await self._navigator.list_children(gate, nav.node, cursor, MAX_CHILDREN_LIMIT)
                found.extend(child.id for child in page.items)
                if page.next_cursor is None:
                    return found
                cursor = page.next_cursor
        tree = await self._navigator.get_tree(gate, nav.node, nav.depth, TREE_LIMIT)

        def below(node: TreeNode) -> list[str]:
            return [n for child in node.children for n in (child.id, *below(child))]

        return below(tree.root)


async def run_dataset(name: str, prepared: Sequence[Prepared], tasks: dict[str, Task], evaluators: list[Any]) -> dict[str, Outcome]:
    """Each system's answers and scores on the questions with visible gold pages (a
    ``pydantic_evals`` dataset, run with a progress bar). A question a system fails on stops the
    run (a failure is not a miss)."""
    dataset: Dataset[Question, list[str], dict[str, Any]] = Dataset(
        name=name,
        cases=[Case(name=p.question.id, inputs=p.question, expected_output=list(p.gold), metadata={"kind": p.question.kind}) for p in prepared if p.gold],
        evaluators=evaluators,
    )
    outcomes = {}
    for system, task in tasks.items():
        result: EvaluationReport[Question, list[str], dict[str, Any]] = await dataset.evaluate(task, name=system, task_name=system, max_concurrency=1)
        if result.failures:
            first = result.failures[0]
            raise EvalFailed(f"{system} failed on {len(result.failures)} question(s) of {name}; {first.name}: {first.error_message}")
        broken = [(case.name, failure.error_message) for case in result.cases for failure in case.evaluator_failures]
        if broken:
            raise EvalFailed(f"scoring {system} on {name} failed: {broken[0][0]}: {broken[0][1]}")
        outcomes[system] = Outcome(
            answers={case.name: list(case.output) for case in result.cases},
            scores={case.name: {key: float(value.value) for key, value in case.scores.items()} for case in result.cases},
        )
    return outcomes


async def evaluate(
    name: str, systems: Systems, questions: Sequence[Question], ks: Sequence[int], peers: dict[str, Task] | None = None
) -> tuple[list[Prepared], dict[str, Outcome], dict[str, Outcome]]:
    """Search questions through every system (and ``peers``, other programs' searches as tasks),
    navigation questions through the navigator. A search question with no gold page the principal
    may see is asked too, unscored: its answers join the others (the leak check reads them all)."""
    prepared = [await systems.prepare(q) for q in questions]
    tasks = systems.search() | (peers or {})
    searched = await run_dataset(name, [p for p in prepared if p.question.searchable], tasks, ranking(ks))
    for p in prepared:
        if p.question.searchable and not p.gold:
            for system, task in tasks.items():
                searched[system].answers[p.question.id] = await task(p.question)
    navigation = [p for p in prepared if p.question.nav is not None]
    navigated = await run_dataset(f"{name} navigation", navigation, {NAVIGATOR: systems.navigate}, [NavigationExact()]) if navigation else {}
    return prepared, searched, navigated
