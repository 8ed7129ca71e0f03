"""The scripted agent of `wayfinder eval` against small MCP servers of known behaviour (FastMCP,
in memory): calls counted up to the gold page, the budget kept, refusals read and skipped, and
the tokens of the definitions and every answer summed."""

from __future__ import annotations

import asyncio
import json

from fastmcp import Client, FastMCP
from fastmcp.exceptions import ToolError

from evals.agent import MAX_CALLS, MCP_ATLASSIAN, WAYFINDER, run_episode, summarise, tool_definitions

PAGES = {f"page:{n}": f"text of page {n} " * n for n in range(1, 9)}


def wayfinder_like(ranking: list[str]) -> FastMCP:
    server = FastMCP("w")

    @server.tool
    def search(query: str, top_k: int = 10) -> dict:
        """Search."""
        return {"hits": [{"id": page, "title": page} for page in ranking[:top_k]]}

    @server.tool
    def fetch(id: str) -> dict:
        """Read a page."""
        if id not in PAGES:
            raise ValueError("not_found: no such page")
        return {"id": id, "text": PAGES[id]}

    return server


def atlassian_like(ranking: list[str]) -> FastMCP:
    server = FastMCP("a")

    @server.tool
    def confluence_search(query: str, limit: int = 10) -> str:
        """Search."""
        return json.dumps([{"id": page.removeprefix("page:"), "title": page} for page in ranking[:limit]])

    @server.tool
    def confluence_get_page(page_id: str) -> str:
        """Get a page."""
        return json.dumps({"metadata": {"id": page_id}, "content": PAGES[f"page:{page_id}"]})

    return server


def episode(server: FastMCP, toolset, gold: list[str], max_calls: int = MAX_CALLS):
    async def run():
        async with Client(server) as client:
            return await run_episode(client, toolset, "q", "a question", gold, max_calls), await tool_definitions(client)

    return asyncio.run(run())


def test_the_agent_opens_hits_in_order_until_a_gold_page() -> None:
    done, definitions = episode(wayfinder_like(["page:3", "page:1", "page:2"]), WAYFINDER, ["page:1"])
    assert (done.calls, done.solved_at, done.opened) == (3, 3, ["page:3", "page:1"])  # search, open 3, open 1
    assert "text of page 1" in done.texts[2] and json.loads(definitions)[0]["name"] in ("search", "fetch")
    first, _ = episode(atlassian_like(["page:2", "page:5"]), MCP_ATLASSIAN, ["page:2", "page:5"])
    assert (first.calls, first.solved_at, first.opened) == (2, 2, ["page:2"])  # any gold page solves it


def test_the_agent_keeps_its_budget_and_reads_refusals() -> None:
    ranking = ["page:1", "page:99", *(f"page:{n}" for n in range(2, 9))]
    done, _ = episode(wayfinder_like(ranking), WAYFINDER, ["page:8"])
    assert done.calls == MAX_CALLS and done.solved_at is None  # page:8 lies beyond the budget
    assert done.errors == 1 and "page:99" not in done.opened and "not_found" in done.texts[2]
    nothing, _ = episode(atlassian_like([]), MCP_ATLASSIAN, ["page:1"])
    assert (nothing.calls, nothing.solved_at) == (1, None)


def test_the_agent_waits_out_a_rate_limit_and_calls_again() -> None:
    server = wayfinder_like(["page:1"])
    refusals = iter(["rate_limited: more than 10 calls a second; retry after 0.1 s", "rate_limited: 8 of your calls are still running; retry when one has finished"])

    @server.tool(name="fetch")
    def limited_fetch(id: str) -> dict:
        """Read a page, after two refusals for going too fast."""
        refusal = next(refusals, None)
        if refusal is not None:
            raise ToolError(refusal)  # as Wayfinder's rate limit answers
        return {"id": id, "text": PAGES[id]}

    done, _ = episode(server, WAYFINDER, ["page:1"])
    assert (done.calls, done.errors, done.waits, done.solved_at) == (2, 0, 2, 2)
    assert "text of page 1" in done.texts[1]  # the refusals are not answers the agent read


def test_the_summary_counts_calls_and_tokens_per_solved_question() -> None:
    solved, definitions = episode(wayfinder_like(["page:2", "page:1"]), WAYFINDER, ["page:1"])
    missed, _ = episode(wayfinder_like(["page:2"]), WAYFINDER, ["page:7"])
    missed.question = "m"

    def count(texts: list[str]) -> list[int]:
        return [len(text.split()) for text in texts]  # a tokenizer of words, for known sums

    summary = summarise([solved, missed], definitions, count)
    words = len(definitions.split())
    answers = [sum(len(t.split()) for t in e.texts) for e in (solved, missed)]
    assert summary["tool_definition_tokens"] == words
    assert [q["tokens"] for q in summary["per_question"]] == [words + answers[0], words + answers[1]]
    assert summary["per_question"][0]["answer_tokens"] == [len(t.split()) for t in solved.texts]
    assert summary["tokens_per_solved"] == 2 * words + sum(answers)  # all the tokens, over one solved question
    assert (summary["solved"], summary["success_rate"], summary["median_calls_to_gold"], summary["calls"]) == (1, 0.5, 3, 5)
    assert summarise([], definitions, count) == {"questions": 0}
