"""Agent efficiency: how many tool calls, and how many tokens of context, an agent spends to open
the page that answers a question, with Wayfinder's tools and with mcp-atlassian's.

The agent is a deterministic script, the same for every toolset: search with the question, then
open the hits in the order given until one is a gold page, within ``MAX_CALLS`` calls in all. A
question is solved when a gold page is opened. Its tokens are the toolset's tool definitions (the
``tools/list`` answer, which an agent holds in context) plus the text of every answer it read,
counted by a real tokenizer afterwards (:func:`summarise` takes the counter).
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mcp.types import TextContent

MAX_CALLS = 6  # a search and five pages opened
SEARCH_LIMIT = 10
# A refusal for going too fast ("rate_limited: ... retry after 0.1 s") is waited out and the call
# made again, as a model would, reading answers for seconds, never need to: it is not an answer.
RATE_LIMIT_RETRIES = 20
RATE_LIMIT_PAUSE_S = 0.2  # when the refusal names no wait (too many calls still running)
_RETRY_AFTER = re.compile(r"retry after ([0-9.]+) s")


class ToolClient(Protocol):
    async def call_tool(self, name: str, arguments: dict[str, Any], *, raise_on_error: bool = ...) -> Any: ...

    async def list_tools(self) -> list[Any]: ...


@dataclass(frozen=True)
class Toolset:
    """How the script uses one MCP server: the search tool, the tool that opens a page, and how a
    search answer names its pages (as ``page:<id>``)."""

    name: str
    search: Callable[[str], tuple[str, dict[str, Any]]]
    open: Callable[[str], tuple[str, dict[str, Any]]]
    hits: Callable[[Any], list[str]]
    page_of: Callable[[dict[str, Any]], str]  # the page an open call's arguments name


def _wayfinder_hits(result: Any) -> list[str]:
    return [hit["id"] for hit in (result.structured_content or {}).get("hits", [])]


def _atlassian_hits(result: Any) -> list[str]:
    return [f"page:{item['id']}" for item in json.loads(answer_text(result) or "[]") if item.get("id")]


WAYFINDER = Toolset(
    "wayfinder",
    search=lambda question: ("search", {"query": question, "top_k": SEARCH_LIMIT}),
    open=lambda page: ("fetch", {"id": page}),
    hits=_wayfinder_hits,
    page_of=lambda arguments: str(arguments.get("id", "")),
)
MCP_ATLASSIAN = Toolset(
    "mcp-atlassian",
    search=lambda question: ("confluence_search", {"query": question, "limit": SEARCH_LIMIT}),
    open=lambda page: ("confluence_get_page", {"page_id": page.removeprefix("page:")}),
    hits=_atlassian_hits,
    page_of=lambda arguments: f"page:{arguments.get('page_id', '')}",
)


def _rate_limited(result: Any) -> float | None:
    """The wait a ``rate_limited`` refusal asks for (seconds), or None for any other answer."""
    if not result.is_error:
        return None
    text = answer_text(result)
    if not text.startswith("rate_limited:"):
        return None
    after = _RETRY_AFTER.search(text)
    return float(after.group(1)) if after else RATE_LIMIT_PAUSE_S


def answer_text(result: Any) -> str:
    """What the agent reads of an answer: its text blocks."""
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


@dataclass
class Episode:
    question: str  # its id
    calls: int = 0
    solved_at: int | None = None  # the call that opened a gold page
    opened: list[str] = field(default_factory=list)
    errors: int = 0  # answers that were refusals
    waits: int = 0  # times the server said "rate_limited" and the call was made again after its wait
    texts: list[str] = field(default_factory=list)  # every answer read, in order


async def run_episode(client: ToolClient, toolset: Toolset, question_id: str, question: str, gold: Sequence[str], max_calls: int = MAX_CALLS) -> Episode:
    """The script on one question: search, then open hits in order until a gold page is open."""
    episode = Episode(question_id)

    async def call(tool: str, args: dict[str, Any]) -> Any:
        result = await client.call_tool(tool, args, raise_on_error=False)
        for _ in range(RATE_LIMIT_RETRIES):  # the script calls faster than any model would read
            wait = _rate_limited(result)
            if wait is None:
                break
            episode.waits += 1
            await asyncio.sleep(wait)
            result = await client.call_tool(tool, args, raise_on_error=False)
        episode.calls += 1
        episode.errors += bool(result.is_error)
        episode.texts.append(answer_text(result))
        return result

    found = await call(*toolset.search(question))
    pages = [] if found.is_error else list(dict.fromkeys(toolset.hits(found)))
    for page in pages:
        if episode.calls >= max_calls:
            break
        opened = await call(*toolset.open(page))
        if opened.is_error:
            continue
        episode.opened.append(page)
        if page in gold:
            episode.solved_at = episode.calls
            break
    return episode


async def tool_definitions(client: ToolClient) -> str:
    """The ``tools/list`` answer as an agent holds it: every tool's name, description and schemas."""
    tools = await client.list_tools()
    return json.dumps([tool.model_dump(mode="json", exclude_none=True) for tool in tools], ensure_ascii=False)


def summarise(episodes: Sequence[Episode], definitions: str, count: Callable[[list[str]], list[int]]) -> dict[str, Any]:
    """Success rate, calls to the gold page, and tokens, over one toolset's episodes."""
    if not episodes:
        return {"questions": 0}
    definition_tokens, *answer_tokens = count([definitions, *(text for e in episodes for text in e.texts)])
    per_call, at = [], 0
    for episode in episodes:
        per_call.append(answer_tokens[at : at + len(episode.texts)])
        at += len(episode.texts)
    per_question = [definition_tokens + sum(calls) for calls in per_call]
    solved = [e for e in episodes if e.solved_at is not None]
    return {
        "questions": len(episodes),
        "solved": len(solved),
        "success_rate": round(len(solved) / len(episodes), 3),
        "median_calls_to_gold": float(statistics.median(e.solved_at for e in solved)) if solved else None,
        "calls": sum(e.calls for e in episodes),
        "errors": sum(e.errors for e in episodes),
        "rate_limit_waits": sum(e.waits for e in episodes),
        "tool_definition_tokens": definition_tokens,
        "tokens": sum(per_question),
        "tokens_per_solved": round(sum(per_question) / len(solved)) if solved else None,
        "median_tokens_per_question": float(statistics.median(per_question)),
        "per_question": [
            {"id": e.question, "calls": e.calls, "solved_at": e.solved_at, "opened": e.opened, "tokens": tokens, "answer_tokens": calls}
            for e, tokens, calls in zip(episodes, per_question, per_call, strict=True)
        ],
    }
