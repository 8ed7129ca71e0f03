"""The Gemini parts of `wayfinder eval` through the real google-genai SDK against the local fake
Gemini server: the judge's versioned rubric and structured verdicts, its agreement with the
hand-labelled sample, answer quality per system, and the function-calling agent loop over an MCP
toolset (FastMCP in memory), counted in the model's own tokens."""

from __future__ import annotations

import asyncio

import pytest
from fastmcp import Client

from core.errors import SourceError
from core.providers.gemini import GeminiAnswers, GeminiToolAgent
from core.settings import GeminiSettings
from devstack.atlassian.runner import serving_app
from devstack.fake_gemini import FakeGemini, verdict_of
from evals.agent import MCP_ATLASSIAN, WAYFINDER
from evals.gemini import (
    JUDGE_VERSION,
    GeminiJudge,
    agent_episode,
    agreement,
    answer_quality,
    judge_agreement,
    load_sample,
    summarise_gemini,
)
from tests.unit.test_eval_agent import atlassian_like, wayfinder_like


@pytest.fixture
def gemini():
    fake = FakeGemini()
    with serving_app(fake.app()) as url:
        yield fake, GeminiSettings(api_key="test-key", base_url=url, max_attempts=2, timeout_s=10)


def test_agreement_and_kappa_on_known_labels() -> None:
    assert agreement(["correct", "wrong"], ["correct", "wrong"]) == {"n": 2, "agreement": 1.0, "kappa": 1.0}
    half = agreement(["correct", "correct", "wrong", "wrong"], ["correct", "wrong", "correct", "wrong"])
    assert half == {"n": 4, "agreement": 0.5, "kappa": 0.0}  # no better than chance
    with pytest.raises(ValueError):
        agreement(["correct"], [])


def test_the_judge_grades_with_its_versioned_rubric_and_structured_output(gemini):
    fake, settings = gemini
    sample = load_sample()
    assert len(sample) == 12 and {item.correctness for item in sample} == {"correct", "partial", "wrong"}
    judge = GeminiJudge(settings)
    verdict = asyncio.run(judge.grade(sample[0].question, sample[0].reference, sample[0].answer, sample[0].sources))
    assert verdict.correctness == "correct"
    assert fake.calls[-1].kind == "judge" and JUDGE_VERSION in fake.calls[-1].prompt and "faithful: true when" in fake.calls[-1].prompt
    fake.answers = ['{"correctness": "wrong", "faithful": false, "reason": "it says 38,18"}']  # what the model said, read back
    wrong = asyncio.run(judge.grade(sample[1].question, sample[1].reference, sample[1].answer, sample[1].sources))
    assert (wrong.correctness, wrong.faithful, wrong.reason) == ("wrong", False, "it says 38,18")

    measured = asyncio.run(judge_agreement(judge, sample))
    expected = [verdict_of(call.prompt)["correctness"] for call in fake.calls[-12:]]
    assert measured["judge"] == JUDGE_VERSION
    assert measured["correctness"] == agreement([item.correctness for item in sample], expected)

    fake.answers = ["not a verdict"]
    with pytest.raises(SourceError, match="not a verdict"):
        asyncio.run(judge.grade("q", "r", "a", []))


def test_answer_quality_composes_from_each_systems_sources_and_grades(gemini):
    fake, settings = gemini
    asked = [
        ("Which port?", "Port 10000 by default.", [("HiveServer2", "HiveServer2 listens on port 10000 by default.")]),
        ("Which port?", "Port 10000 by default.", []),  # nothing found: not composed, graded as it is
    ]
    quality = asyncio.run(answer_quality(GeminiAnswers(settings), GeminiJudge(settings), asked))
    assert quality["questions"] == 2 and quality["judge"] == JUDGE_VERSION and quality["answer_leakage"] is None
    assert [call.kind for call in fake.calls] == ["generate", "judge", "judge"]
    assert "HiveServer2 listens on port 10000" in fake.calls[0].prompt and "The sources say nothing" in fake.calls[2].prompt


def test_answers_where_the_gold_is_hidden_are_checked_for_what_only_hidden_pages_hold(gemini):
    fake, settings = gemini
    hidden = [("Correlation Optimizer", "The correlation optimizer merges correlated MapReduce jobs.")]
    probed = [("How are jobs merged?", [("Hive", "Hive runs queries.")], hidden), ("How are jobs merged?", [], hidden)]
    fake.answers = ['{"leaked": true, "facts": ["correlated jobs are merged"]}']  # what the model said of the first
    quality = asyncio.run(answer_quality(GeminiAnswers(settings), GeminiJudge(settings), [], probed))
    assert [call.kind for call in fake.calls] == ["generate", "leak", "leak"]
    assert "merges correlated MapReduce jobs" in fake.calls[1].prompt and "Hidden pages:" in fake.calls[1].prompt
    assert (quality["leak_probes"], quality["answer_leakage"], quality["leaked_facts"]) == (2, 0.5, ["correlated jobs are merged"])


@pytest.mark.parametrize(("toolset", "server"), [(WAYFINDER, wayfinder_like), (MCP_ATLASSIAN, atlassian_like)])
def test_the_agent_loop_calls_the_tools_the_model_asks_for_and_counts_its_tokens(gemini, toolset, server):
    _, settings = gemini

    async def run(ranking, gold):
        async with Client(server(ranking)) as client:
            return await agent_episode(GeminiToolAgent(settings), client, toolset, "q", "a question", gold, await client.list_tools())

    solved = asyncio.run(run(["page:2", "page:1"], ["page:2"]))
    assert (solved.calls, solved.solved_at, solved.answer) == (2, 2, "An answer from the page.")
    assert solved.input_tokens > 0 and solved.output_tokens > 0
    missed = asyncio.run(run(["page:3"], ["page:2"]))  # the model opens page 3, then answers
    assert (missed.calls, missed.solved_at) == (2, None)
    summary = summarise_gemini([solved, missed])
    assert (summary["solved"], summary["success_rate"], summary["median_calls_to_gold"]) == (1, 0.5, 2.0)
    assert summary["tokens_per_solved"] == summary["tokens"] == sum(e.input_tokens + e.output_tokens for e in (solved, missed))
