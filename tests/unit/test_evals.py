"""`wayfinder eval`'s parts: question files in both formats, and the metrics."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from core.errors import InvalidArgument
from evals.datasets import load_dataset
from evals.metrics import mean, score

CORPORA = Path(__file__).resolve().parents[3] / "shared" / "corpora"


def test_metrics_of_one_ranking() -> None:
    got = score(["page:x", "page:a", "page:y", "page:b", "page:z", "page:c"], ["page:a", "page:b", "page:c"], [1, 5])
    assert got["recall@1"] == 0.0
    assert got["recall@5"] == pytest.approx(2 / 3)
    assert got["mrr"] == 0.5
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert got["ndcg@10"] == pytest.approx((1 / math.log2(3) + 1 / math.log2(5) + 1 / math.log2(7)) / ideal)
    assert got["all_hops@5"] == 0.0
    assert score(["page:b", "page:a"], ["page:a", "page:b"], [5])["all_hops@5"] == 1.0
    assert score([], ["page:a"], [5]) == {"recall@5": 0.0, "mrr": 0.0, "ndcg@10": 0.0, "all_hops@5": 0.0}
    assert mean([{"mrr": 1.0}, {"mrr": 0.0}, {"mrr": 0.5}]) == {"mrr": 0.5}


def test_the_hive_dev_set_loads_with_page_ids() -> None:
    questions = load_dataset(CORPORA / "apache-hive-wiki" / "questions_dev.jsonl")
    assert len(questions) == 20
    assert {q.kind for q in questions} == {"semantic", "multihop", "navigation"}
    assert sum(q.searchable for q in questions) == 15
    assert all(g.startswith("page:") for q in questions for g in q.gold)


def test_the_musique_dev_set_finds_its_passages_among_the_pages() -> None:
    questions = load_dataset(CORPORA / "musique-100" / "questions_dev.json")
    assert len(questions) == 50
    first = questions[0]
    assert first.kind == "2hop" and len(set(first.gold)) == 2
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
    orphan = tmp_path / "musique.json"
    orphan.write_text("[]")
    with pytest.raises(InvalidArgument, match="corpus.json"):
        load_dataset(orphan)
