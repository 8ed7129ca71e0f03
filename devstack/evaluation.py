"""The stack of ``wayfinder eval`` (``make eval``): its own data directory (``<data dir>/eval``) and
ports, the Confluence emulator seeded with the Hive space and the MuSiQue passages, synced like
any site — the first run indexes both (2,195 pages), later runs find nothing changed. Then
:mod:`evals.runner` asks each dataset's questions of Wayfinder and the baselines, mcp-atlassian
(the PyPI server over stdio, as the principal, against the same emulated site) among them, and
:mod:`evals.agent`'s script walks to the gold pages with Wayfinder's MCP server (``wayfinder
serve`` over HTTP, a process of its own on the same stores) and with mcp-atlassian; the report in
``<data dir>/reports/eval-<dataset>-<date>/`` (:mod:`evals.reporting`).
"""

from __future__ import annotations

import dataclasses
import secrets
import shutil
import signal
from datetime import UTC, datetime
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from rich.console import Console
from rich.progress import Progress

from authz.client import OpenFGAClient
from authz.gate import Gate
from authz.prefilter import ACL_FILE, AclFile
from core.errors import InvalidArgument
from core.models import Principal
from core.providers.base import Usage
from core.providers.gemini import GeminiAnswers, GeminiToolAgent
from core.settings import Settings
from devstack import stack
from devstack.atlassian.admin import Emulator
from devstack.atlassian.hive import SYNC_LOGIN, TOKENS, seed_hive
from devstack.atlassian.musique import SPACE_KEY as MUSIQUE
from devstack.atlassian.musique import seed_musique
from devstack.atlassian.runner import serving
from devstack.atlassian.site import Site
from devstack.atlassian.view import site_view
from devstack.demo import start_server, wait_for_port
from devstack.leaks import synced_from
from devstack.peers import count_tokens, mcp_atlassian, mcp_atlassian_environment
from evals.agent import MCP_ATLASSIAN, WAYFINDER, Toolset, run_episode, summarise, tool_definitions
from evals.datasets import Question, load_dataset
from evals.leaks.oracle import Oracle
from evals.gemini import AGENT_INSTRUCTION, JUDGE_VERSION, NO_KEY, GeminiJudge, agent_episode, answer_quality, judge_agreement, load_sample, summarise_gemini
from evals.redteam import BUDGET, extract_graph
from evals.reporting import Run, build, dataset_name, show, write
from evals.runner import BASELINE_CANDIDATES, DEPTH, EvalFailed, Outcome, Prepared, Systems, evaluate
from navigator.navigator import Navigator
from navigator.store import Neo4jStore
from pipeline.raw_store import RawStore
from pipeline.sources.confluence_rest import ConfluenceRestSource
from pipeline.sync import run_sync
from retrievers.factory import semantic_index
from retrievers.semantic import SemanticRetriever

EMULATOR_PORT = 25490  # fixed, like the site of a real deployment: the sync remembers what it read
MCP_PORT = 25465  # Wayfinder's MCP server, asked by the scripted agent over HTTP
ANSWER_PAGES = 3  # a system's first pages an answer is composed from
ANSWER_PAGE_TOKENS = 2000  # of each


def default_datasets(settings: Settings) -> list[Path]:
    """The two dev sets: the Hive wiki's questions and MuSiQue's."""
    return [settings.corpus_dir / "questions_dev.jsonl", settings.corpus_dir.parent / "musique-100" / "questions_dev.json"]


def eval_settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={
            "data_dir": settings.data_dir / "eval",
            "openfga": settings.openfga.model_copy(update={"http_port": 25480, "grpc_port": 25481, "datastore": "sqlite", "store_name": "wayfinder-eval"}),
            "neo4j": settings.neo4j.model_copy(update={"bolt_port": 25887}),
            "postgres": settings.postgres.model_copy(update={"port": 25532}),
        }
    )


async def run_eval(settings: Settings, console: Console, datasets: Sequence[Path], users: Sequence[str], ks: Sequence[int]) -> list[dict[str, Any]]:
    unknown = [user for user in users if user not in TOKENS or user == SYNC_LOGIN]
    if unknown or not users:
        raise InvalidArgument(f"the emulated site has no user {', '.join(map(repr, unknown))}; try {', '.join(sorted(set(TOKENS) - {SYNC_LOGIN}))}")
    loaded = {path: load_dataset(path) for path in datasets}  # bad files fail before any service starts
    own = eval_settings(settings)
    site = Site()
    await seed_hive(site, settings.corpus_dir)
    seed_musique(site, settings.corpus_dir.parent / "musique-100" / "corpus.json")
    view = site_view(site, ["HIVE", MUSIQUE])
    oracle = Oracle.of(view.spaces, view.pages, view.permissions)  # who may see what, from the site itself
    with serving(Emulator(site, secrets.token_urlsafe(32)), port=EMULATOR_PORT) as url:
        own = synced_from(own, url)
        own = own.model_copy(update={"confluence": own.confluence.model_copy(update={"spaces": ["HIVE", MUSIQUE]})})
        for status in stack.up(own):
            console.print(f"{status.name}: {status.detail}")
        try:
            async with RawStore.for_settings(own) as store:
                synced = await run_sync(own, ConfluenceRestSource(own.confluence, own.confluence.url or ""), store, console)
            if synced.failed:
                raise EvalFailed(f"the evaluation's sync could not convert {len(synced.failed)} page(s); see the log above")
            token_of = {user: secrets.token_urlsafe(32) for user in users}
            served = own.model_copy(update={"mcp": own.mcp.model_copy(update={"port": MCP_PORT, "tokens": {t: u for u, t in token_of.items()}})})
            server = start_server(served)
            try:
                wait_for_port(served.mcp.host, served.mcp.port, server, timeout=180)
                runs: dict[Path, dict[str, Run]] = {path: {} for path in loaded}
                gemini = _gemini(settings, console)
                async with OpenFGAClient(own.openfga) as authorizer, Neo4jStore(own.neo4j) as graph, semantic_index(own) as index:
                    navigator = Navigator(graph)
                    retriever = SemanticRetriever(index, navigator, own.mcp.search_candidates, AclFile(own.index_dir / ACL_FILE))
                    evidence = await index.graph_evidence()  # the pages behind every entity and relation
                    for user in users:
                        principal = Principal(user=user)
                        visible = frozenset(oracle.visible(user))
                        hidden_text = {f"page:{page.page_id}": (page.title, page.markdown) for page in view.pages if f"page:{page.page_id}" not in visible}
                        hidden_titles = sorted(title for title, _ in hidden_text.values())
                        async with (
                            Client(f"http://{served.mcp.host}:{served.mcp.port}/mcp", auth=token_of[user], timeout=120) as wayfinder_mcp,
                            Client(_peer(settings, own, url, user), timeout=120) as atlassian_mcp,
                        ):
                            toolsets = ((WAYFINDER, wayfinder_mcp), (MCP_ATLASSIAN, atlassian_mcp))
                            for path, questions in loaded.items():
                                console.print(f"{path}: {len(questions)} question(s) as {user}")
                                systems = Systems(
                                    lambda principal=principal: Gate(authorizer, principal, deadline_s=own.openfga.check_timeout_s),
                                    retriever,
                                    navigator,
                                    index,
                                    max(DEPTH, *ks),
                                )
                                run = await _ask(dataset_name(path), questions, ks, systems, navigator, toolsets, gemini, settings, console, hidden_text)
                                runs[path][user] = dataclasses.replace(run, visible=visible)
                            console.print(f"graph extraction red-team as {user}: {BUDGET} calls at most")
                            attack = (await extract_graph(wayfinder_mcp, evidence, visible, hidden_titles)).summary()
                            console.print(f"as {user}: {attack['recovered']} of {attack['targets']} hidden-only entities and relations recovered in {attack['calls']} calls")
                            for path in loaded:
                                runs[path][user] = dataclasses.replace(runs[path][user], red_team=attack)
                agreement = await judge_agreement(gemini[1], load_sample()) if gemini is not None else {"skipped": NO_KEY}
                reports = []
                for path, questions in loaded.items():
                    result = build(path, datetime.now(UTC).date(), questions, runs[path]) | {"judge_agreement": agreement}
                    show(result, console)
                    console.print(f"report: {write(result, settings.data_dir / 'reports')}")
                    reports.append(result)
                return reports
            finally:
                server.send_signal(signal.SIGTERM)
                server.wait(timeout=30)
        finally:
            stack.down(own)


async def _ask(
    name: str,
    questions: Sequence[Question],
    ks: Sequence[int],
    systems: Systems,
    navigator: Navigator,
    toolsets: Sequence[tuple[Toolset, Client]],
    gemini: Gemini | None,
    settings: Settings,
    console: Console,
    hidden_text: Mapping[str, tuple[str, str]],
) -> Run:
    """One dataset as one principal: every system (mcp-atlassian through its own search tool), the
    navigator, the scripted agent with each toolset, and with Gemini the judge and its agent."""
    atlassian = dict(toolsets)[MCP_ATLASSIAN]
    refused: list[str] = []

    async def atlassian_search(q: Question) -> list[str]:
        # It refuses some questions (a double quote breaks the CQL it writes): as an agent would,
        # take no pages, and list the question.
        found = await atlassian.call_tool("confluence_search", {"query": q.question, "limit": BASELINE_CANDIDATES}, raise_on_error=False)
        if found.is_error:
            refused.append(q.id)
            return []
        return MCP_ATLASSIAN.hits(found)

    peers = {MCP_ATLASSIAN.name: systems.authorized(MCP_ATLASSIAN.name, atlassian_search)}
    prepared, searched, navigated = await evaluate(name, systems, questions, ks, peers)
    agents = {toolset.name: await _agent(toolset, client, prepared, settings, console) for toolset, client in toolsets}
    judged = await _judged(gemini, prepared, searched, navigator, systems, toolsets, console, hidden_text) if gemini is not None else {"skipped": NO_KEY}
    return Run(prepared, searched, navigated, agents, {MCP_ATLASSIAN.name: refused}, systems.unauthorized, gemini=judged)


Gemini = tuple[GeminiAnswers, GeminiJudge, GeminiToolAgent]


def _gemini(settings: Settings, console: Console) -> Gemini | None:
    """Gemini's answer writer, judge and agent model when a key is set; else say what is skipped."""
    if settings.gemini.api_key is None:
        console.print(NO_KEY)
        return None
    usage = Usage()
    return GeminiAnswers(settings.gemini, usage), GeminiJudge(settings.gemini, usage), GeminiToolAgent(settings.gemini, usage, AGENT_INSTRUCTION)


async def _judged(
    gemini: Gemini,
    prepared: Sequence[Prepared],
    searched: dict[str, Outcome],
    navigator: Navigator,
    systems: Systems,
    toolsets: Sequence[tuple[Toolset, Client]],
    console: Console,
    hidden_text: Mapping[str, tuple[str, str]],
) -> dict[str, Any]:
    """Answers composed from each system's first three pages (as the principal reads them), graded,
    and checked for leaks where the question's gold pages are hidden (``hidden_text``: page →
    title and text of the pages hidden from the principal, from the source); and the Gemini agent
    loop with each toolset."""
    answers, judge, agent_model = gemini
    asked = [p for p in prepared if p.question.searchable and p.gold and p.question.answer]
    probed = [p for p in prepared if p.question.searchable and any(page in hidden_text for page in p.left_out)]
    quality = {}
    for system, outcome in searched.items():
        console.print(f"answers from {system}'s pages, graded ({len(asked)} questions, {len(probed)} leak probes)")

        async def sources_of(p: Prepared, outcome: Outcome = outcome) -> list[tuple[str, str]]:
            found = []
            for page in outcome.answers.get(p.question.id, [])[:ANSWER_PAGES]:
                view = await navigator.read_page(systems.gate(), page, None, max_tokens=ANSWER_PAGE_TOKENS)
                found.append((view.title, view.markdown))
            return found

        inputs = [(p.question.question, p.question.answer, await sources_of(p)) for p in asked]
        probes = [(p.question.question, await sources_of(p), [hidden_text[page] for page in p.left_out if page in hidden_text]) for p in probed]
        quality[system] = await answer_quality(answers, judge, inputs, probes)
    loops = {}
    for toolset, client in toolsets:
        tools = await client.list_tools()
        console.print(f"the Gemini agent with {toolset.name}'s tools ({len(asked)} questions)")
        loops[toolset.name] = summarise_gemini(
            [await agent_episode(agent_model, client, toolset, p.question.id, p.question.question, p.gold, tools) for p in asked]
        )
    return {"judge": JUDGE_VERSION, "answers": quality, "agent": loops}


def _peer(settings: Settings, own: Settings, url: str, user: str) -> StdioTransport:
    """mcp-atlassian over stdio as ``user`` of the emulated site (its Data Center face)."""
    return StdioTransport(
        str(mcp_atlassian(settings)),
        ["--transport", "stdio"],
        env=mcp_atlassian_environment(f"{url}/confluence", token=TOKENS[user]),
        cwd=str(_empty_dir(own)),
        log_file=own.data_dir / "mcp-atlassian.log",  # its banner and warnings, not the console
    )


async def _agent(toolset: Toolset, client: Client, prepared: Sequence[Prepared], settings: Settings, console: Console) -> dict[str, Any]:
    """The scripted agent on every search question with a visible gold page, with a progress bar."""
    asked = [p for p in prepared if p.question.searchable and p.gold]
    episodes = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"agent with {toolset.name}'s tools", total=len(asked))
        for p in asked:
            episodes.append(await run_episode(client, toolset, p.question.id, p.question.question, p.gold))
            progress.advance(task)
    return summarise(episodes, await tool_definitions(client), lambda texts: count_tokens(settings, texts))


def _empty_dir(settings: Settings) -> Path:
    """A working directory of nothing for mcp-atlassian, which reads ``./.env`` over its environment."""
    empty = settings.data_dir / "mcp-atlassian"
    shutil.rmtree(empty, ignore_errors=True)
    empty.mkdir(parents=True)
    return empty
