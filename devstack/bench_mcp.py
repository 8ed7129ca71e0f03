"""``make bench-mcp``: many MCP clients at once over HTTP, each a user of its own, for a minute,
every answer checked against the leak oracle; the report goes to ``.wayfinder/reports/bench-mcp.json``.

It runs on the leak suite's stack and index (``<data dir>/leak-suite``, the Hive space with a
canary in each restricted page), so only the first of the two to run pays for indexing. The
emulated site gains load users spread over the space's groups — committers (see every page),
users (all but the committers' design documents and bob's own page) and no group (see nothing)
— beside alice, bob and carol. The MCP server is ``wayfinder serve`` in a process of its own with
the production limits; its peak resident memory is read from ``/proc``.

Each client calls, in a closed loop, a weighted mix of ``search`` (the Hive dev questions and
page titles), ``fetch``, ``list_children``, ``get_ancestors``, ``related`` and ``list_spaces`` on
pages drawn from the whole space, so about half of the calls of a user in the smaller groups
name a page they may not see, and ``explore`` (one or two hops) from entities of the index drawn
the same way. The oracle decides each answer, for explore with the index's own record of the
pages behind each entity and relation:

* a leak: an answer holding the id of a page the user may not see or the canary planted in it, a
  tool's result (not a refusal) for such a page or for an entity such a page supports, or an
  entity or relation shown that such a page supports;
* an error: a refusal other than ``not_found`` for such a page or entity, any refusal for a page
  or entity the user may see or of a search (``unavailable``, a denial), a transport failure, and a
  ``rate_limited`` that persists after the client has waited as told (``MAX_RETRIES`` times; the
  waits count in the latency and as ``throttled``).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import secrets
import signal
import time
from dataclasses import dataclass, field
from typing import Any

from fastmcp import Client
from rich.console import Console
from rich.table import Table

from authz.client import OpenFGAClient
from core.settings import Settings
from devstack.atlassian.hive import account_id
from devstack.atlassian.site import Site, User
from devstack.atlassian.view import site_view
from devstack.demo import resident_mib, start_server, wait_for_port
from devstack.leaks import JIRA_OBJECTS, StackEnvironment, suite_site, synced_suite_stack
from devstack.reports import percentiles, write_report
from evals.leaks.canaries import Canary
from evals.leaks.oracle import Oracle
from evals.leaks.suite import Answer, call_tool, explorable, explored_beyond, exposed
from retrievers.factory import semantic_index

REPORT = "bench-mcp.json"
CLIENTS = 50
DURATION_S = 60.0
MAX_RETRIES = 3
LOAD_GROUPS = ("hive-committers", "hive-users", None)
NAMED_USERS = ("alice", "bob", "carol")
WORKLOAD = {"search": 3, "fetch": 3, "list_children": 2, "get_ancestors": 1, "related": 1, "list_spaces": 1, "explore": 1}
EXPLORED = 400  # entities explore starts from, drawn evenly from the index's (names alone)
NOT_FOUND = "not_found:"
_RETRY_AFTER = re.compile(r"retry after ([\d.]+) s")


def _issues_of(site: Site, login: str) -> set[str]:
    """The issues Jira shows ``login``: entities and snippets may stand on them too."""
    user = site.user_by_login(login)
    return {f"issue:{issue.key}" for issue in site.jira.visible_issues(user)} if user is not None else set()


def add_load_users(site: Site, count: int) -> list[str]:
    """``count`` users named ``load-NN``, spread in turn over the committers, the users and no group."""
    names = []
    for n in range(count):
        login = f"load-{n:02d}"
        site.add_user(User(account_id(login), login, f"Load {n:02d}", f"{login}@example.com", secrets.token_urlsafe(24)))
        group = LOAD_GROUPS[n % len(LOAD_GROUPS)]
        if group is not None:
            site.add_member(group, account_id(login))
        names.append(login)
    return names


@dataclass
class Tally:
    requests: int = 0
    errors: int = 0
    leaks: int = 0
    throttled: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    by_tool: dict[str, list[float]] = field(default_factory=dict)  # tool → latencies (ms)
    examples: list[str] = field(default_factory=list)

    def note(self, kind: str, what: str) -> None:
        if len(self.examples) < 20:
            self.examples.append(f"{kind}: {what}")


@dataclass(frozen=True)
class Load:
    """What every client draws from, and the oracle's answers."""

    url: str
    oracle: Oracle
    canaries: tuple[Canary, ...]
    queries: tuple[str, ...]
    nodes: tuple[str, ...]  # every page and space id, visible or not
    pages: tuple[str, ...]  # every page id, visible or not
    issues: tuple[str, ...]  # every issue id, visible or not
    evidence: dict[str, frozenset[str]]  # entity or relation → the pages supporting it, as the index records
    entities: tuple[str, ...]  # what explore starts from, visible or not
    visible: dict[str, frozenset[str]]  # user → typed ids the user may see


async def run_bench_mcp(settings: Settings, console: Console, *, clients: int = CLIENTS, duration_s: float = DURATION_S) -> dict[str, Any]:
    site, _, canaries = await suite_site(settings)  # the leak suite's site, so the two share an index
    users = [*NAMED_USERS, *add_load_users(site, max(0, clients - len(NAMED_USERS)))][:clients]
    view = site_view(site, ["HIVE"])
    async with synced_suite_stack(settings, site, console) as (own, _):
        async with OpenFGAClient(own.openfga, provision=True) as store:  # the oracle's word, as the leak suite writes it
            kept = frozenset(t for t in await store.read_tuples() if t.object.startswith(JIRA_OBJECTS))
            await StackEnvironment(own, store, list(view.spaces), list(view.pages), kept).apply(view.permissions)
        oracle = Oracle.of(view.spaces, view.pages, view.permissions)
        async with semantic_index(own, queries_only=True) as index:  # read before the server opens it
            evidence = await index.graph_evidence()
        load = Load(
            url=f"http://{own.mcp.host}:{own.mcp.port}/mcp",
            oracle=oracle,
            canaries=tuple(canaries),
            queries=_queries(settings, oracle),
            nodes=tuple([s.id for s in oracle.spaces] + sorted(p.id for p in oracle.pages)),
            pages=tuple(sorted(p.id for p in oracle.pages)),
            issues=tuple(sorted(f"issue:{key}" for key in site.jira.issues)),
            evidence=evidence,
            entities=_starts(evidence),
            visible={user: frozenset(oracle.visible(user) | _issues_of(site, user)) for user in users},
        )
        report = await _measure(own, load, users, duration_s, console)
    path = write_report(settings, REPORT, report)
    _show(report, console)
    console.print(f"report: {path}")
    return report


def _starts(evidence: dict[str, frozenset[str]]) -> tuple[str, ...]:
    """Entities to explore from: every n-th by name, so all sizes and permissions come up."""
    names = sorted(name for name in evidence if " -> " not in name)
    return tuple(names[:: max(1, len(names) // EXPLORED)])


def _queries(settings: Settings, oracle: Oracle) -> tuple[str, ...]:
    questions = [json.loads(line)["question"] for line in (settings.corpus_dir / "questions_dev.jsonl").read_text().splitlines() if line.strip()]
    return tuple(questions + sorted({page.title for page in oracle.pages}))


async def _measure(settings: Settings, load: Load, users: list[str], duration_s: float, console: Console) -> dict[str, Any]:
    tokens = {secrets.token_urlsafe(32): user for user in users}
    server = start_server(settings.model_copy(update={"mcp": settings.mcp.model_copy(update={"tokens": tokens})}))
    try:
        wait_for_port(settings.mcp.host, settings.mcp.port, server, timeout=180)
        async with Client(load.url, auth=next(iter(tokens))) as warm:  # the index loads on first use
            await warm.call_tool("search", {"query": "warm up"})
        console.print(f"{len(users)} clients for {duration_s:.0f} s at {load.url}")
        tally = Tally()
        until = time.monotonic() + duration_s
        await asyncio.gather(*(
            _client(load, token, user, random.Random(n), until, tally) for n, (token, user) in enumerate(tokens.items())
        ))
        rss = resident_mib(server.pid, "VmHWM")
        if rss is None:
            raise RuntimeError("the MCP server's memory could not be read")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    p50, p95 = percentiles(tally.latencies_ms) if tally.latencies_ms else (0.0, 0.0)  # none answered: all errors
    return {
        "clients": len(users),
        "requests": tally.requests,
        "errors": tally.errors,
        "leaks": tally.leaks,
        "p50_ms": round(p50, 1),
        "p95_ms": round(p95, 1),
        "rss_mib": round(rss, 1),
        "duration_s": duration_s,
        "requests_per_s": round(tally.requests / duration_s, 2),
        "throttled": tally.throttled,
        "by_tool": {tool: _summary(values) for tool, values in sorted(tally.by_tool.items())},
        "examples": tally.examples,
    }


def _summary(latencies_ms: list[float]) -> dict[str, float]:
    p50, p95 = percentiles(latencies_ms)
    return {"requests": len(latencies_ms), "p50_ms": round(p50, 1), "p95_ms": round(p95, 1), "max_ms": round(max(latencies_ms), 1)}


async def _client(load: Load, token: str, user: str, rng: random.Random, until: float, tally: Tally) -> None:
    """One user's session: calls until the time is up, each judged by the oracle."""
    tools, weights = list(WORKLOAD), list(WORKLOAD.values())
    visible = load.visible[user]
    hidden = (set(load.pages) | set(load.issues)) - visible
    async with Client(load.url, auth=token, timeout=120) as client:
        while time.monotonic() < until:
            tool = rng.choices(tools, weights)[0]
            arguments = _arguments(tool, load, rng)
            started = time.perf_counter()
            try:
                answer = await _call(client, tool, arguments, tally)
            except Exception as exc:  # a transport failure is an error of the run, not of this client
                tally.requests += 1
                tally.errors += 1
                tally.note("error", f"{user} {tool} {arguments}: {type(exc).__name__}: {exc}")
                continue
            elapsed = (time.perf_counter() - started) * 1000
            tally.latencies_ms.append(elapsed)
            tally.by_tool.setdefault(tool, []).append(elapsed)
            tally.requests += 1
            if tool == "explore":
                _judge_walk(tally, user, arguments, answer, visible, hidden, load)
            else:
                _judge(tally, user, tool, arguments, answer, visible, hidden, load.canaries)


async def _call(client: Client, tool: str, arguments: dict[str, Any], tally: Tally) -> Answer:
    """The call, waited on and repeated as a ``rate_limited`` refusal says."""
    for _ in range(MAX_RETRIES):
        answer = await call_tool(client, tool, arguments)
        if not (answer.error or "").startswith("rate_limited:"):
            return answer
        tally.throttled += 1
        hint = _RETRY_AFTER.search(answer.error or "")
        await asyncio.sleep(float(hint[1]) if hint else 1.0)
    return await call_tool(client, tool, arguments)


def _arguments(tool: str, load: Load, rng: random.Random) -> dict[str, Any]:
    if tool == "search":
        return {"query": rng.choice(load.queries), "top_k": 10}
    if tool == "list_spaces":
        return {}
    if tool == "list_children":
        return {"id": rng.choice(load.nodes), "limit": 20}
    if tool == "fetch":
        return {"id": rng.choice(load.pages), "max_tokens": 2000}
    if tool == "explore":
        return {"entity": rng.choice(load.entities), "hops": rng.choice((1, 2)), "limit": 20}
    return {"id": rng.choice(load.pages)}


def _judge_walk(
    tally: Tally, user: str, arguments: dict[str, Any], answer: Answer, visible: frozenset[str], hidden: set[str], load: Load
) -> None:
    """explore's answer against the index's record of the pages behind each entity and relation:
    an entity the user may not explore is refused with ``not_found``, and everything shown
    stands on pages the user may see."""
    what = f"{user} explore {arguments}"
    may_explore = explorable(arguments["entity"], visible, load.evidence)
    if answer.error is not None:
        if may_explore or not answer.error.startswith(NOT_FOUND):
            tally.errors += 1
            tally.note("error", f"{what}: {answer.error[:160]}")
        return
    bad = explored_beyond(answer, visible, load.evidence) + exposed(answer, hidden, load.canaries)
    if not may_explore or bad:
        tally.leaks += 1
        tally.note("leak", f"{what} showed {bad[:3] or 'an entity the user may not explore'}")


def _judge(
    tally: Tally, user: str, tool: str, arguments: dict[str, Any], answer: Answer, visible: frozenset[str], hidden: set[str], canaries: tuple[Canary, ...]
) -> None:
    what = f"{user} {tool} {arguments}"
    shown = exposed(answer, hidden, canaries)
    target = arguments.get("id")
    if shown:
        tally.leaks += 1
        tally.note("leak", f"{what} exposed {shown[:3]}")
    elif target is not None and target not in visible:
        if answer.error is None:
            tally.leaks += 1
            tally.note("leak", f"{what} answered {answer.raw[:120]!r} for a page the user may not see")
        elif not answer.error.startswith(NOT_FOUND):
            tally.errors += 1
            tally.note("error", f"{what}: {answer.error[:160]} (for a page the user may not see: not_found expected)")
    elif answer.error is not None:  # a search, or a page the user may see
        tally.errors += 1
        tally.note("error", f"{what}: {answer.error[:160]}")


def _show(report: dict[str, Any], console: Console) -> None:
    table = Table(title="bench-mcp")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key in ("clients", "requests", "errors", "leaks", "p50_ms", "p95_ms", "rss_mib", "requests_per_s", "throttled"):
        table.add_row(key, str(report[key]))
    console.print(table)
    for tool, summary in report["by_tool"].items():
        console.print(f"  {tool}: {summary}")
    for example in report["examples"]:
        console.print(f"  {example}")
