"""The parts of an evaluation that need a Gemini key (``WAYFINDER_GEMINI__API_KEY``): answers
composed from each system's context and graded by an LLM judge, answers to questions whose gold
pages are hidden checked for what only those pages hold (answer leakage), the judge's agreement
with a hand-labelled sample, and a real agent loop (function calling) over each MCP toolset. The
SDK itself stays in :mod:`core.providers.gemini`. Without a key none of it runs and the report
says so; nothing is ever faked.

The judge's prompt is versioned (:data:`JUDGE_VERSION`): change the rubric, bump the version, and
reports say which rubric graded them.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from core.errors import InvalidArgument
from core.providers.base import Usage
from core.providers.gemini import GeminiAnswers, GeminiGrader, GeminiToolAgent
from core.settings import GeminiSettings
from evals.agent import Toolset, answer_text

JUDGE_VERSION = "judge-v1"
JUDGE_SAMPLE = Path(__file__).parent / "judge_sample.jsonl"
AGENT_TURNS = 8  # model turns per question in the agent loop
NO_KEY = "no Gemini key (WAYFINDER_GEMINI__API_KEY): the answer judge and the Gemini agent loop did not run"

JUDGE_PROMPT = """You grade an answer to a question about a company's internal wiki.

Rubric ({version}):
- correctness: "correct" when the answer states what the reference answer states (other words are
  fine; extra true detail is fine), "partial" when it gets part of it or hedges between options,
  "wrong" when it misses it, contradicts it or says it cannot tell.
- faithful: true when every claim in the answer is supported by the sources shown; false when
  anything it claims is not in them, even if true.
Judge only by the reference and the sources, not by what you know.

Question: {question}

Reference answer: {reference}

Sources:
{sources}

Answer to grade: {answer}"""


LEAK_PROMPT = """You check whether an answer given to a reader of a company wiki reveals what the
reader may not know. The reader may see the visible sources; the hidden pages are off limits.

Rubric ({version}): leaked is true when the answer states a fact, name, number or identifier that
the hidden pages hold and the visible sources and the question do not; false otherwise. List the
leaked facts, each in a few words.

Question: {question}

Visible sources:
{sources}

Hidden pages:
{hidden}

Answer: {answer}"""


class LeakVerdict(BaseModel):
    leaked: bool
    facts: list[str] = Field(default_factory=list, description="The facts only the hidden pages hold.")


class Verdict(BaseModel):
    correctness: Literal["correct", "partial", "wrong"]
    faithful: bool
    reason: str = Field(description="One sentence on why.")


def _numbered(sources: Sequence[tuple[str, str]]) -> str:
    return "\n\n".join(f"[{n}] {title}\n{text}" for n, (title, text) in enumerate(sources, start=1)) or "(none)"


class GeminiJudge:
    """Grades answers by the rubric, with structured output (:class:`Verdict`), at temperature 0."""

    def __init__(self, settings: GeminiSettings, usage: Usage | None = None) -> None:
        self._grader = GeminiGrader(settings, usage)

    async def grade(self, question: str, reference: str, answer: str, sources: Sequence[tuple[str, str]]) -> Verdict:
        prompt = JUDGE_PROMPT.format(version=JUDGE_VERSION, question=question, reference=reference, sources=_numbered(sources), answer=answer)
        return await self._grader.grade(prompt, Verdict)

    async def leaked(self, question: str, answer: str, sources: Sequence[tuple[str, str]], hidden: Sequence[tuple[str, str]]) -> LeakVerdict:
        prompt = LEAK_PROMPT.format(version=JUDGE_VERSION, question=question, sources=_numbered(sources), hidden=_numbered(hidden), answer=answer)
        return await self._grader.grade(prompt, LeakVerdict)


@dataclass(frozen=True)
class Labelled:
    question: str
    reference: str
    answer: str
    sources: tuple[tuple[str, str], ...]
    correctness: str  # the hand label
    faithful: bool


def load_sample(path: Path = JUDGE_SAMPLE) -> list[Labelled]:
    items = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            items.append(
                Labelled(row["question"], row["reference"], row["answer"], tuple((s[0], s[1]) for s in row["sources"]), row["correctness"], bool(row["faithful"]))
            )
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise InvalidArgument(f"{path}:{number}: not a labelled answer ({exc})") from exc
    return items


def agreement(labels: Sequence[str], verdicts: Sequence[str]) -> dict[str, Any]:
    """How often the judge gave the hand label, and Cohen's kappa (agreement beyond chance)."""
    if len(labels) != len(verdicts) or not labels:
        raise ValueError("agreement needs as many verdicts as labels, at least one")
    n = len(labels)
    observed = sum(a == b for a, b in zip(labels, verdicts, strict=True)) / n
    classes = set(labels) | set(verdicts)
    expected = sum((labels.count(c) / n) * (verdicts.count(c) / n) for c in classes)
    kappa = 1.0 if expected == 1 else (observed - expected) / (1 - expected)
    return {"n": n, "agreement": round(observed, 3), "kappa": round(kappa, 3)}


async def judge_agreement(judge: GeminiJudge, sample: Sequence[Labelled]) -> dict[str, Any]:
    verdicts = [await judge.grade(item.question, item.reference, item.answer, item.sources) for item in sample]
    return {
        "judge": JUDGE_VERSION,
        "correctness": agreement([item.correctness for item in sample], [v.correctness for v in verdicts]),
        "faithful": agreement([str(item.faithful) for item in sample], [str(v.faithful) for v in verdicts]),
    }


Sources = Sequence[tuple[str, str]]  # (title, text)
NOTHING = "The sources say nothing about this."


async def _composed(answers: GeminiAnswers, question: str, sources: Sources) -> str:
    return await answers.compose(question, sources) if sources else NOTHING


async def answer_quality(
    answers: GeminiAnswers, judge: GeminiJudge, asked: Sequence[tuple[str, str, Sources]], probed: Sequence[tuple[str, Sources, Sources]] = ()
) -> dict[str, Any]:
    """For one system: answers composed from its sources for (question, reference, sources),
    graded; and for (question, sources, hidden pages) — questions whose gold pages are hidden from
    the principal — answers composed the same way, checked for facts only the hidden pages hold
    (``answer_leakage``: the share that leaked, must be 0)."""
    graded = [await judge.grade(question, reference, await _composed(answers, question, sources), sources) for question, reference, sources in asked]
    leaks = [await judge.leaked(question, await _composed(answers, question, sources), sources, hidden) for question, sources, hidden in probed]
    n = len(graded) or 1
    return {
        "judge": JUDGE_VERSION,
        "questions": len(graded),
        "correct": round(sum(v.correctness == "correct" for v in graded) / n, 3),
        "partial": round(sum(v.correctness == "partial" for v in graded) / n, 3),
        "faithful": round(sum(v.faithful for v in graded) / n, 3),
        "leak_probes": len(leaks),
        "answer_leakage": round(sum(v.leaked for v in leaks) / len(leaks), 3) if leaks else None,
        "leaked_facts": [fact for v in leaks for fact in v.facts],
    }


# -- the agent loop -------------------------------------------------------------------------------

AGENT_INSTRUCTION = "Answer the question from the company wiki, using the tools. Open the page that answers it before you answer."


@dataclass
class GeminiEpisode:
    question: str
    calls: int = 0
    solved_at: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    answer: str = ""


async def agent_episode(agent: GeminiToolAgent, client: Any, toolset: Toolset, question_id: str, question: str, gold: Sequence[str], tools: Sequence[Any]) -> GeminiEpisode:
    """A Gemini model answering ``question`` with the toolset's MCP tools (``client``); solved
    when it opened a gold page with the toolset's open tool (the call's number then)."""
    open_tool = toolset.open("page:0")[0]
    refused: list[bool] = []

    async def call_tool(name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        result = await client.call_tool(name, arguments, raise_on_error=False)
        refused.append(bool(result.is_error))
        return answer_text(result), refused[-1]

    run = await agent.run(question, tools, call_tool, AGENT_TURNS)
    opened = [(n, toolset.page_of(arguments)) for n, (name, arguments) in enumerate(run.calls, start=1) if name == open_tool and not refused[n - 1]]
    solved = next((n for n, page in opened if page in gold), None)
    return GeminiEpisode(question_id, len(run.calls), solved, run.input_tokens, run.output_tokens, run.answer)


def summarise_gemini(episodes: Sequence[GeminiEpisode]) -> dict[str, Any]:
    solved = [e for e in episodes if e.solved_at is not None]
    tokens = sum(e.input_tokens + e.output_tokens for e in episodes)
    return {
        "questions": len(episodes),
        "solved": len(solved),
        "success_rate": round(len(solved) / len(episodes), 3) if episodes else None,
        "median_calls_to_gold": float(statistics.median(e.solved_at for e in solved)) if solved else None,
        "tokens": tokens,
        "tokens_per_solved": round(tokens / len(solved)) if solved else None,
        "per_question": [{"id": e.question, "calls": e.calls, "solved_at": e.solved_at, "tokens": e.input_tokens + e.output_tokens} for e in episodes],
    }
