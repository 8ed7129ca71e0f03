"""`wayfinder eval`'s parts: question files in both formats, the metrics and their intervals, the
pydantic_evals evaluators on hand-made cases with known answers, the run and the report."""

from __future__ import annotations

import asyncio
import json
import math
from datetime import date
from pathlib import Path

import pytest
from pydantic_evals import Case, Dataset

from core.errors import InvalidArgument
from evals import evaluators
from evals.datasets import Navigation, Question, load_dataset
from evals.gemini import NO_KEY
from evals.metrics import all_hops_at, bootstrap_ci, mean, ndcg_at, recall_at, reciprocal_rank
from evals.reporting import Run, build, dataset_name, plot_names, write
from evals.runner import EvalFailed, Outcome, Prepared, run_dataset

CORPORA = Path(__file__).resolve().parents[3] / "shared" / "corpora"


def test_metrics_of_one_ranking() -> None:
    ranked, gold = ["page:x", "page:a", "page:y", "page:b", "page:z", "page:c"], ["page:a", "page:b", "page:c"]
    assert recall_at(ranked, gold, 1) == 0.0
    assert recall_at(ranked, gold, 5) == pytest.approx(2 / 3)
    assert reciprocal_rank(ranked, gold) == 0.5
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at(ranked, gold) == pytest.approx((1 / math.log2(3) + 1 / math.log2(5) + 1 / math.log2(7)) / ideal)
    assert all_hops_at(ranked, gold) == 0.0
    assert all_hops_at(["page:b", "page:a"], ["page:a", "page:b"]) == 1.0
    assert [f([], ["page:a"]) for f in (lambda r, g: recall_at(r, g, 5), reciprocal_rank, ndcg_at, all_hops_at)] == [0.0, 0.0, 0.0, 0.0]
    assert mean([{"mrr": 1.0}, {"mrr": 0.0}, {"mrr": 0.5}]) == {"mrr": 0.5}


def test_the_bootstrap_interval_holds_the_mean_and_narrows_with_more_questions() -> None:
    few = [1.0, 0.0, 1.0, 1.0, 0.0]
    low, high = bootstrap_ci(few)
    assert low < 0.6 < high and 0.0 <= low and high <= 1.0
    many_low, many_high = bootstrap_ci(few * 20)
    assert low < many_low < 0.6 < many_high < high  # 100 questions pin the mean down more than 5
    assert bootstrap_ci(few) == (low, high)  # seeded: a report is reproducible
    assert bootstrap_ci([0.5, 0.5, 0.5]) == (0.5, 0.5)
    with pytest.raises(ValueError):
        bootstrap_ci([])


def _evaluated(case_evaluators, output: list[str], gold: list[str]) -> dict[str, float]:
    """The scores of one hand-made case, through pydantic_evals as the runs use it."""
    question = Question("q", "semantic", "?", tuple(gold))
    dataset = Dataset(name="t", cases=[Case(name="q", inputs=question, expected_output=gold)], evaluators=case_evaluators)

    async def task(_: Question) -> list[str]:
        return output

    report = asyncio.run(dataset.evaluate(task, progress=False))
    assert not report.failures and not report.cases[0].evaluator_failures
    return {name: result.value for name, result in report.cases[0].scores.items()}


def test_each_evaluator_scores_a_case_with_a_known_answer() -> None:
    got = _evaluated(evaluators.ranking([1, 3]), ["page:x", "page:a", "page:a", "page:b"], ["page:a", "page:b"])
    # the repeated page counts once: page:b is third, not fourth
    assert got == {"recall@1": 0.0, "recall@3": 1.0, "mrr": 0.5, "ndcg@10": pytest.approx((1 / math.log2(3) + 1 / math.log2(4)) / (1 + 1 / math.log2(3))), "all_hops@5": 1.0}
    missed = _evaluated(evaluators.ranking([1]), ["page:x", "page:y"], ["page:a"])
    assert missed == {"recall@1": 0.0, "mrr": 0.0, "ndcg@10": 0.0, "all_hops@5": 0.0}
    half = _evaluated([evaluators.AllHops(k=2)], ["page:a", "page:x", "page:b"], ["page:a", "page:b"])
    assert half == {"all_hops@2": 0.0}
    assert _evaluated([evaluators.NavigationExact()], ["page:a", "page:b"], ["page:a", "page:b"]) == {"exact": 1.0}
    assert _evaluated([evaluators.NavigationExact()], ["page:b", "page:a"], ["page:a", "page:b"]) == {"exact": 0.0}  # order counts
    assert _evaluated([evaluators.NavigationExact()], ["page:a"], ["page:a", "page:b"]) == {"exact": 0.0}


def _prepared(qid: str, kind: str, gold: tuple[str, ...], left_out: tuple[str, ...] = ()) -> Prepared:
    return Prepared(Question(qid, kind, f"question {qid}", gold + left_out), gold, left_out)


def test_a_run_scores_every_system_and_stops_when_one_fails() -> None:
    prepared = [_prepared("a", "semantic", ("page:1",)), _prepared("b", "multihop", ("page:2", "page:3")), _prepared("c", "semantic", (), ("page:9",))]

    async def good(q: Question) -> list[str]:
        return {"a": ["page:1"], "b": ["page:3", "page:0", "page:2"]}[q.id]

    async def poor(q: Question) -> list[str]:
        return ["page:0"]

    outcomes = asyncio.run(run_dataset("t", prepared, {"good": good, "poor": poor}, evaluators.ranking([1, 5])))
    assert set(outcomes["good"].scores) == {"a", "b"}  # c has no visible gold: not a case
    assert outcomes["good"].scores["b"]["recall@1"] == 0.5 and outcomes["good"].scores["b"]["all_hops@5"] == 1.0
    assert outcomes["good"].answers["b"] == ["page:3", "page:0", "page:2"]
    assert all(s["mrr"] == 0.0 for s in outcomes["poor"].scores.values())

    async def broken(q: Question) -> list[str]:
        raise RuntimeError("index down")

    with pytest.raises(EvalFailed, match="broken failed on 2 question.*index down"):
        asyncio.run(run_dataset("t", prepared, {"broken": broken}, evaluators.ranking([1])))


def test_the_report_has_means_intervals_kinds_navigation_agents_authorization_and_plots(tmp_path: Path) -> None:
    nav = Question("n", "navigation", "children?", ("page:5", "page:6"), Navigation("children", "page:4"))
    questions = [
        Question("a", "semantic", "?", ("page:1",)),
        Question("b", "multihop", "?", ("page:2", "page:3")),
        Question("c", "semantic", "?", ("page:9",)),
        nav,
        Question("t", "navigation", "?", ("page:7",)),
    ]
    prepared = [
        Prepared(questions[0], ("page:1",), ()),
        Prepared(questions[1], ("page:2",), ("page:3",)),
        Prepared(questions[2], (), ("page:9",)),
        Prepared(nav, ("page:5", "page:6"), ()),
        Prepared(questions[4], ("page:7",), ()),
    ]
    searched = {
        "wayfinder": Outcome({"a": ["page:1"], "b": ["page:0", "page:2"]}, {"a": {"recall@1": 1.0, "mrr": 1.0}, "b": {"recall@1": 0.0, "mrr": 0.5}}),
        "bm25": Outcome({"a": ["page:0"], "b": []}, {"a": {"recall@1": 0.0, "mrr": 0.0}, "b": {"recall@1": 0.0, "mrr": 0.0}}),
    }
    navigated = {"wayfinder": Outcome({"n": ["page:5", "page:6"]}, {"n": {"exact": 1.0}})}
    agents = {
        "wayfinder": {"questions": 2, "solved": 2, "success_rate": 1.0, "tokens_per_solved": 900, "per_question": [{"solved_at": 2, "opened": ["page:1"]}, {"solved_at": 3, "opened": ["page:0", "page:2"]}]},
        "mcp-atlassian": {"questions": 2, "solved": 1, "success_rate": 0.5, "tokens_per_solved": 4000, "per_question": [{"solved_at": 2, "opened": ["page:1"]}, {"solved_at": None, "opened": []}]},
    }
    visible = frozenset({"space:S", "page:0", "page:1", "page:2", "page:4", "page:5", "page:6", "page:7"})  # not 3 nor 9
    unauthorized = {"wayfinder": {"a": ["page:1", "page:9"], "b": ["page:2"]}, "bm25": {"a": ["page:0"], "b": ["page:3", "page:2"]}}
    red_team = {"targets": 3, "calls": 5, "refused": 1, "items_seen": 2, "recovered": 0, "recovered_items": []}
    alice = Run(prepared, searched, navigated, agents, {"mcp-atlassian": ["b"], "bm25": []}, unauthorized, visible, red_team, {"skipped": NO_KEY})
    judged = {
        "judge": "judge-v1",
        "answers": {"wayfinder": {"judge": "judge-v1", "questions": 2, "correct": 0.5, "partial": 0.0, "faithful": 1.0, "leak_probes": 1, "answer_leakage": 0.0}},
        "agent": {"wayfinder": {"questions": 2, "solved": 1, "success_rate": 0.5, "median_calls_to_gold": 2.0, "tokens_per_solved": 5000}},
    }
    leaky = Run(prepared[:2], {"wayfinder": Outcome({"a": ["page:9", "page:1"], "b": ["page:2"]}, searched["wayfinder"].scores)}, {}, visible=visible, gemini=judged)
    path = tmp_path / "apache-hive-wiki" / "questions_dev.jsonl"
    report = build(path, date(2026, 12, 3), questions, {"alice": alice, "mallory": leaky}) | {
        "judge_agreement": {"judge": "judge-v1", "correctness": {"n": 12, "agreement": 0.75, "kappa": 0.6}, "faithful": {"n": 12, "agreement": 0.9, "kappa": 0.7}}
    }

    assert report["report"] == "eval-apache-hive-wiki-2026-12-03" and report["questions"] == 5
    run = report["principals"]["alice"]
    assert run["scored"] == 2
    wayfinder = run["systems"]["wayfinder"]
    assert wayfinder["all"] == {"recall@1": 0.5, "mrr": 0.75}
    assert wayfinder["ci95"]["recall@1"] == [0.0, 1.0]
    assert wayfinder["by_kind"] == {"multihop": {"recall@1": 0.0, "mrr": 0.5}, "semantic": {"recall@1": 1.0, "mrr": 1.0}}
    assert wayfinder["recall_curve"][:2] == [0.5, 1.0] and run["systems"]["bm25"]["recall_curve"][-1] == 0.0
    assert run["navigation"]["exact"] == 1.0 and run["navigation"]["per_question"][0]["answer"] == ["page:5", "page:6"]
    assert run["no_visible_gold"] == ["c"] and run["not_asked"] == ["t"]
    assert run["left_out"] == {"b": ["page:3"], "c": ["page:9"]}
    assert run["per_question"][1]["ranks"] == {"wayfinder": [2], "bm25": [None]}
    assert run["agent"] == agents and run["refused"] == {"mcp-atlassian": ["b"]}
    authorization = run["authorization"]
    assert all(pages == [] for pages in authorization["leaks"].values()) and "agent:wayfinder" in authorization["leaks"]
    assert authorization["exposure_rate"] == {"wayfinder": 0.5, "bm25": 0.5}  # a hidden page drawn for one question of two
    # a: 1 of 1 gold reachable; b: 1 of 2 (page:3 hidden); c: none of 1 → (1 + 0.5 + 0) / 3
    assert authorization["oracle_recall@5"] == 0.5
    assert authorization["recall@5_all_gold"] == {"wayfinder": 0.5, "bm25": 0.0}
    assert report["principals"]["mallory"]["authorization"]["leaks"]["wayfinder"] == ["page:9"]  # shown though hidden

    (tmp_path / "reports" / report["report"]).mkdir(parents=True)
    (tmp_path / "reports" / report["report"] / "agent_calls-carol.png").write_bytes(b"an earlier run's")
    written = write(report, tmp_path / "reports")
    assert written.name == report["report"] and not (written / "agent_calls-carol.png").exists()
    assert json.loads((written / "report.json").read_text()) == report
    recall, calls, tokens = plot_names("alice")
    assert (written / recall).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (written / "report.md").read_text()
    assert "## As alice" in md and "## As mallory" in md
    assert "| wayfinder | all | 0.500 [0.00, 1.00] | 0.750" in md and f"![{recall}]({recall})" in md
    assert "Navigation exactness (wayfinder): **1.000**" in md
    assert "| mcp-atlassian | 2 | 1 | 0.5 | None | 4000 |" in md and "mcp-atlassian answered 1 question(s) with an error" in md
    assert authorization["red_team"] == red_team and "an attacker starting from their names recovered **0** in 5 calls" in md
    assert f"Gemini: {NO_KEY}." in md and "| wayfinder | 0.5 | 0.0 | 1.0 | 0.0 (1) |" in md and "| wayfinder | 1 | 0.5 | 2.0 | 5000 |" in md
    assert "correctness agreement 0.75 (kappa 0.6)" in md
    assert "leaks: **0**" in md and "**leaks: {'wayfinder': ['page:9']}**" in md
    for plot in (calls, tokens):
        assert (written / plot).stat().st_size > 1000 and f"![{plot}]({plot})" in md
    assert not (written / plot_names("mallory")[1]).exists()  # no agent ran as mallory
    assert dataset_name(tmp_path / "mine.jsonl") == "mine"


def test_the_hive_dev_set_loads_with_page_ids() -> None:
    questions = load_dataset(CORPORA / "apache-hive-wiki" / "questions_dev.jsonl")
    assert len(questions) == 20
    assert {q.kind for q in questions} == {"semantic", "multihop", "navigation"}
    assert sum(q.searchable for q in questions) == 15
    assert all(g.startswith("page:") for q in questions for g in q.gold)
    navigation = {q.id: q.nav for q in questions if not q.searchable}
    assert navigation["hive-012"] == Navigation("children", "page:27362076")
    assert navigation["hive-052"] == Navigation("resolve_path", "Home/Apache Hive 4.0.X/Hive Transactions (Hive ACID)")
    assert navigation["hive-065"] == Navigation("subtree", "page:282102245", depth=2)
    assert all(q.answer for q in questions)  # reference answers, for the judge


def test_the_musique_dev_set_finds_its_passages_among_the_pages() -> None:
    questions = load_dataset(CORPORA / "musique-100" / "questions_dev.json")
    assert len(questions) == 50
    first = questions[0]
    assert first.kind == "2hop" and len(set(first.gold)) == 2 and first.answer
    corpus = json.loads((CORPORA / "musique-100" / "corpus.json").read_text())
    # two passages of one article: told apart by their text, each its own page
    passages = [corpus[int(g.removeprefix("page:")) - 900_000_001] for g in first.gold]
    assert [p["title"] for p in passages] == ["Canon law", "Canon law"]
    assert passages[0]["text"].startswith("In the Church of England") and "Anglican Communion" in passages[1]["text"]


def test_a_malformed_file_is_refused_naming_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "q.jsonl"
    bad.write_text('{"id": "q1", "question": "x", "gold_pages": ["1"]}\n{"id": "q2"}\n')
    with pytest.raises(InvalidArgument, match=r"q\.jsonl:2"):
        load_dataset(bad)
    with pytest.raises(InvalidArgument, match="cannot read"):
        load_dataset(tmp_path / "none.jsonl")
    unknown = tmp_path / "nav.jsonl"
    unknown.write_text('{"id": "q1", "question": "x", "gold_pages": ["1"], "nav": {"op": "grandparents", "node": "1"}}\n')
    with pytest.raises(InvalidArgument, match=r"nav\.jsonl:1.*grandparents"):
        load_dataset(unknown)
    orphan = tmp_path / "musique.json"
    orphan.write_text("[]")
    with pytest.raises(InvalidArgument, match="corpus.json"):
        load_dataset(orphan)
