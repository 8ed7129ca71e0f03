"""``make bench-nav``: the navigator at company scale, the real gate against allow-all side by side.

A synthetic company, generated deterministically: 20 spaces of 8,500 pages (170,000; each tree
grown by preferential attachment, so a few index pages have hundreds of children, the deepest
pages sit 9 levels down and the mean depth is about 4, as in real spaces; 1% of pages restricted
to a group) and 20 Jira projects of 2,500 issues (50,000: 25 epics, 500 stories and 1,975 sub-tasks each; a tenth of the
epics and stories on a security level), with page links, issue links and page → issue mentions.
The trees go to Neo4j and the tuples, built by the same builders as a sync's, to OpenFGA (sqlite,
the default datastore), on a stack of its own; a later run reuses them.

Two users: one who sees everything and one who sees about 5% (one space and one project, less
their restricted and secured parts). Each asks every navigator tool over MCP (streamable HTTP)
about nodes it can see; every call runs once with the real gate and once with an allow-all
stand-in that exists only here, in rotating order, so machine noise hits both alike. Reported per
tool and user: p50/p95 per mode, their ratio, and OpenFGA round trips per call against the tree
levels the call touches (``tools``). The whole run is then repeated with OpenFGA's decision cache
on (``decision_cache_s``, off by default; its TTL is the revocation bound) in ``tools_decision_cache``.
JSON in ``.wayfinder/reports/bench-nav.json``.
"""

from __future__ import annotations

import asyncio
import json
import random
import secrets
import shutil
import statistics
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from fastmcp import Client
from rich.console import Console
from rich.table import Table

from authz.base import RelationTuple
from authz.client import OpenFGAClient
from authz.tuples import confluence_tuples, jira_tuples
from core.models import Issue, JiraPermissions, Page, Permissions, Project, Space
from core.settings import Settings
from devstack import stack
from devstack.bench_authz import AllowAll, Switch
from devstack.reports import percentiles, write_report
from devstack.serving import serving
from mcp_app.auth import StaticTokens, http_identity
from mcp_app.server import Services, create_server, open_services
from navigator.store import Neo4jStore

REPORT = "bench-nav.json"
GENERATOR = 1  # bump when the synthetic company changes: the next run loads it afresh
SEED = 170_050
SPACES, PAGES_PER_SPACE, MAX_DEPTH = 20, 8_500, 9
PROJECTS, EPICS, STORIES, SUBTASKS = 20, 25, 500, 1_975
RESTRICTED_SHARE, SECURED_SHARE = 0.01, 0.1
LEVEL = "10900"  # the security level of the secured epics and stories
FULL, NARROW = "nav-full", "nav-narrow"
USERS = {FULL: "full", NARROW: "five_percent"}
MODES = ("gate", "allow_all")
ROUNDS = 3
RATIO_TARGET = 1.3  # for the user who sees everything
DECISION_CACHE_S = 5.0  # the second measurement's OpenFGA check cache (shorter than a round of calls)
TUPLE_CHUNK, WRITERS = 10_000, 4
WORDS = (
    "release", "metastore", "schema", "compaction", "vectorization", "planner", "security", "replication",
    "upgrade", "runbook", "design", "meeting", "notes", "roadmap", "onboarding", "benchmark", "storage",
    "streaming", "catalog", "migration", "incident", "review", "testing", "backup", "cluster", "tuning",
)
_WHEN = datetime(2026, 11, 1, tzinfo=UTC)


@dataclass
class Company:
    spaces: list[Space]
    pages: dict[str, list[Page]]  # by space key, parents first
    permissions: Permissions
    projects: list[Project]
    issues: dict[str, list[Issue]]  # by project key, parents first
    jira_permissions: JiraPermissions
    mentions: dict[str, dict[str, list[str]]]  # space key → page id → issue ids
    children: Counter[str] = field(default_factory=Counter)  # node id → its children
    parent: dict[str, str] = field(default_factory=dict)  # node id → parent id (a container for a top node)
    title: dict[str, str] = field(default_factory=dict)  # node id → title (a container's key)

    def ancestors(self, node: str) -> list[str]:
        """Root (the container) first, parent last."""
        found = []
        while node in self.parent:
            node = self.parent[node]
            found.append(node)
        return found[::-1]


def company() -> Company:
    rng = random.Random(SEED)
    groups = {"staff": (f"user:{FULL}",), "leads": (f"user:{FULL}",), "team": (f"user:{NARROW}",)}
    viewers = {0: ("group:staff#member", "group:team#member")}
    made = Company([], {}, Permissions(space_viewers={}, page_restrictions={}, group_members=groups), [], {},
                   JiraPermissions(project_browsers={}, role_members={}, level_members={LEVEL: ("group:leads#member",)}, group_members=groups), {})
    for k in range(PROJECTS):
        project = Project(key=f"P{k:02d}", name=f"Project {k}", url=f"https://jira.example.com/projects/P{k:02d}")
        made.projects.append(project)
        made.jira_permissions.project_browsers[project.key] = viewers.get(k, ("group:staff#member",))
        made.issues[project.key] = _issues(rng, project, made)
    for k in range(SPACES):
        space = Space(key=f"S{k:02d}", name=f"Space {k}", url=f"https://wiki.example.com/spaces/S{k:02d}")
        made.spaces.append(space)
        made.permissions.space_viewers[space.key] = viewers.get(k, ("group:staff#member",))
        made.pages[space.key] = _pages(rng, space, k, made)
        project_issues = made.issues[made.projects[k % PROJECTS].key]
        made.mentions[space.key] = {
            page.id: sorted({rng.choice(project_issues).id for _ in range(rng.randint(1, 2))})
            for page in made.pages[space.key]
            if rng.random() < 0.05
        }
    return made


def _pages(rng: random.Random, space: Space, k: int, made: Company) -> list[Page]:
    base = (k + 1) * 1_000_000
    depth: dict[str, int] = {}
    slots: list[str] = []  # each page once, and its parent once more: preferential attachment
    pages = []
    for n in range(PAGES_PER_SPACE):
        page_id = str(base + n)
        parent: str | None = None
        if n >= 3 and rng.random() >= 0.001:
            parent = rng.choice(slots)
            if rng.random() < 0.15:  # now and then the shallower of two: mean depth ~4, as in real spaces
                parent = min(parent, rng.choice(slots), key=depth.__getitem__)
            while depth[parent] >= MAX_DEPTH:
                parent = made.parent[f"page:{parent}"].removeprefix("page:")
        depth[page_id] = 0 if parent is None else depth[parent] + 1
        slots.extend((page_id, parent) if parent else (page_id,))
        up = f"page:{parent}" if parent else space.id
        position = made.children[up]
        made.children[up] += 1
        title = "Home" if n == 0 else f"{rng.choice(WORDS).title()} {rng.choice(WORDS)} {n}"
        links = tuple(sorted({str(base + rng.randrange(PAGES_PER_SPACE)) for _ in range(rng.choice((0, 0, 1, 2, 3)))} - {page_id}))
        page = Page(
            page_id=page_id, space_key=space.key, title=title, parent_id=parent, position=position,
            url=f"{space.url}/pages/{page_id}", markdown=f"# {title}\n\nPage {n} of {space.name}.", links=links, updated_at=_WHEN,
        )
        pages.append(page)
        made.parent[page.id], made.title[page.id] = up, title
        made.permissions.page_restrictions[page_id] = ("group:leads#member",) if n and rng.random() < RESTRICTED_SHARE else ()
    made.title[space.id] = space.key
    return pages


def _issues(rng: random.Random, project: Project, made: Company) -> list[Issue]:
    issues: list[Issue] = []

    def add(kind: str, level: int, parent: Issue | None, secured: bool) -> Issue:
        key = f"{project.key}-{len(issues) + 1}"
        up = parent.id if parent else project.id
        summary = f"{rng.choice(WORDS).title()} {rng.choice(WORDS)} {kind.lower()} {len(issues) + 1}"
        issue = Issue(
            key=key, project_key=project.key, issue_type=kind, hierarchy_level=level, summary=summary,
            parent_key=parent.key if parent else None, position=made.children[up], url=f"https://jira.example.com/browse/{key}",
            markdown=f"# {summary}\n\n{kind} of {project.name}.",
            security_level=(parent.security_level if parent and level < 0 else LEVEL if secured else None), updated_at=_WHEN,
        )
        made.children[up] += 1
        made.parent[issue.id], made.title[issue.id] = up, summary
        issues.append(issue)
        return issue

    epics = [add("Epic", 1, None, rng.random() < SECURED_SHARE) for _ in range(EPICS)]
    stories = [add("Story", 0, rng.choice(epics), rng.random() < SECURED_SHARE) for _ in range(STORIES)]
    for _ in range(SUBTASKS):
        add("Sub-task", -1, rng.choice(stories), False)
    linked = {story.key: (rng.choice(stories).key,) for story in stories if rng.random() < 0.05}
    made.title[project.id] = project.key
    return [issue.model_copy(update={"links": linked[issue.key]}) if issue.key in linked else issue for issue in issues]


def visible_to(made: Company, user: str) -> set[str]:
    """The nodes (containers, pages, issues) ``user`` may see, by the model's rules, worked out
    here independently of OpenFGA: the workload asks only about these."""
    if user == FULL:
        return {s.id for s in made.spaces} | {p.id for p in made.projects} | set(made.parent)
    space, project = made.spaces[0], made.projects[0]
    seen = {space.id, project.id}
    for page in made.pages[space.key]:  # parents first
        if made.parent[page.id] in seen and not made.permissions.page_restrictions[page.page_id]:
            seen.add(page.id)
    for issue in made.issues[project.key]:
        if issue.security_level is None and (issue.parent_key is None or issue.hierarchy_level >= 0 or made.parent[issue.id] in seen):
            seen.add(issue.id)
    return seen


@dataclass(frozen=True)
class Call:
    tool: str
    args: dict[str, Any]
    levels: int  # tree levels the call touches: the most OpenFGA round trips it should cost


def workload(made: Company, seen: set[str], rng: random.Random) -> list[Call]:
    containers = [made.spaces[0].id, made.projects[0].id]  # the ones both users see
    pages = sorted(n for n in seen if n.startswith("page:"))
    issues = sorted(n for n in seen if n.startswith("issue:"))
    parents = [n for n in pages if made.children[n]]
    hubs = sorted(parents, key=lambda n: -made.children[n])[:8]
    epics = [n for n in issues if made.parent[n].startswith("project:") and made.children[n]]
    stories = [n for n in issues if made.parent[n] in epics and made.children[n]]
    deep = [n for n in pages if len(made.ancestors(n)) >= 4]
    linked = {page.id for pages_ in made.pages.values() for page in pages_ if page.links} | {
        page for mentions in made.mentions.values() for page in mentions
    }
    linked_issues = {issue.id for issues_ in made.issues.values() for issue in issues_ if issue.links}

    def some(nodes: Iterable[str], n: int) -> list[str]:
        nodes = list(nodes)
        return rng.sample(nodes, min(n, len(nodes)))

    def path(node: str) -> str:
        return "/".join(made.title[n] for n in [*made.ancestors(node), node])

    calls = [Call("list_spaces", {}, 1) for _ in range(3)]
    calls += [Call("list_children", {"id": n, "limit": 50}, 2) for n in containers + hubs + some(parents, 10) + some(epics, 5) + some(stories, 5)]
    calls += [Call("get_ancestors", {"id": n}, len(made.ancestors(n)) + 1) for n in some(deep, 10) + some(pages, 10) + some(issues, 10)]
    calls += [Call("get_tree", {"id": n, "depth": 2, "limit": 100}, 4) for n in containers + some(parents, 8) + some(epics, 5)]
    calls += [Call("get_tree", {"id": n, "depth": 1, "limit": 100}, 3) for n in hubs[:5]]
    whole = [n for n in [*pages, *issues] if seen.issuperset(made.ancestors(n))]  # a path names nothing through a hidden node
    calls += [Call("resolve_path", {"path": path(n)}, len(made.ancestors(n)) + 1) for n in some((n for n in whole if n.startswith("page:")), 20) + some((n for n in whole if n.startswith("issue:")), 5)]
    calls += [Call("related", {"id": n, "limit": 20}, 2) for n in some(linked & set(pages), 15) + some(linked_issues & set(issues), 5)]
    return calls


def bench_settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={
            "data_dir": settings.data_dir / "bench-nav",
            "openfga": settings.openfga.model_copy(
                update={"http_port": 26080, "grpc_port": 26081, "datastore": "sqlite", "store_name": "wayfinder-bench-nav"}
            ),
            "neo4j": settings.neo4j.model_copy(update={"bolt_port": 26687, "heap": "1g"}),
            "lightrag": settings.lightrag.model_copy(update={"storage": "files"}),
        }
    )


async def run_bench_nav(settings: Settings, console: Console) -> dict[str, Any]:
    own = bench_settings(settings)
    started = time.perf_counter()
    made = company()
    console.print(
        f"synthetic company: {sum(map(len, made.pages.values())):,} pages in {len(made.spaces)} spaces, "
        f"{sum(map(len, made.issues.values())):,} issues in {len(made.projects)} projects "
        f"({time.perf_counter() - started:.0f}s to generate)"
    )
    marker = own.data_dir / "bench-nav-loaded.json"
    fingerprint = {"generator": GENERATOR, "seed": SEED, "pages": SPACES * PAGES_PER_SPACE, "issues": PROJECTS * (EPICS + STORIES + SUBTASKS)}
    reuse = marker.exists() and json.loads(marker.read_text()) == fingerprint
    if not reuse and own.data_dir.exists():  # a partial or older load: start from empty stores
        stack.down(own, only={"openfga", "neo4j"})
        shutil.rmtree(own.data_dir)
    for status in stack.up(own, only={"openfga", "neo4j"}):
        console.print(f"{status.name}: {status.detail}")
    try:
        load_s = None
        if reuse:
            console.print(f"reusing the loaded company in {own.data_dir}")
            async with OpenFGAClient(own.openfga, provision=True):
                pass  # the shipped model, as a sync writes it, should it have changed since the load
        else:
            load_s = await _load(own, made, console)
            marker.write_text(json.dumps(fingerprint))
        users = await _measure(own, made, console)
        # Again with OpenFGA's decision cache on (off by default): what a bounded cache buys.
        stack.down(own, only={"openfga"})
        cached = own.model_copy(update={"openfga": own.openfga.model_copy(update={"decision_cache_s": DECISION_CACHE_S})})
        stack.up(cached, only={"openfga"})
        console.print(f"again with OpenFGA's decision cache on ({DECISION_CACHE_S:g} s, the revocation bound)")
        users_cached = await _measure(cached, made, console)
    finally:
        stack.down(own, only={"openfga", "neo4j"})
    report = {
        "pages": sum(map(len, made.pages.values())),
        "issues": sum(map(len, made.issues.values())),
        "spaces": len(made.spaces),
        "projects": len(made.projects),
        "load_s": load_s,
        "datastore": own.openfga.datastore,
        "rounds": ROUNDS,
        "ratio_target": RATIO_TARGET,
        "users": {name: {"user": u["user"], "visible_share": u["visible_share"]} for name, u in users.items()},
        "tools": _by_tool(users),
        "decision_cache_s": DECISION_CACHE_S,
        "tools_decision_cache": _by_tool(users_cached),
        "full_visibility_within_ratio_target": all(s["ratio"] <= RATIO_TARGET for s in users["full"]["tools"].values()),
        "round_trips_within_levels": all(s["calls_over_levels"] == 0 for u in users.values() for s in u["tools"].values()),
    }
    _show(report, console)
    console.print(f"report: {write_report(settings, REPORT, report)}")
    return report


async def _load(own: Settings, made: Company, console: Console) -> float:
    started = time.perf_counter()
    tuples: set[RelationTuple] = set()
    for space in made.spaces:
        tuples |= confluence_tuples(space.key, made.pages[space.key], made.permissions)
    for project in made.projects:
        tuples |= jira_tuples(project.key, made.issues[project.key], made.jira_permissions)
    console.print(f"loading the trees into Neo4j and {len(tuples):,} tuples into OpenFGA")

    async def trees() -> None:
        async with Neo4jStore(own.neo4j) as store:
            for project in made.projects:
                await store.sync_project(project, made.issues[project.key])
            for number, space in enumerate(made.spaces, 1):
                await store.sync_space(space, made.pages[space.key])
                await store.sync_mentions(space, made.mentions[space.key])
                console.print(f"  Neo4j: {number}/{len(made.spaces)} spaces ({time.perf_counter() - started:.0f}s)")

    async def relations() -> None:
        ordered = sorted(tuples, key=lambda t: t.key)
        chunks = [ordered[start : start + TUPLE_CHUNK] for start in range(0, len(ordered), TUPLE_CHUNK)]
        writers = asyncio.Semaphore(WRITERS)
        done = 0
        async with OpenFGAClient(own.openfga, provision=True) as fga:

            async def write(chunk: list[RelationTuple]) -> None:
                nonlocal done
                async with writers:
                    await fga.write_tuples(chunk, ())
                done += 1
                if done % 10 == 0 or done == len(chunks):
                    console.print(f"  OpenFGA: {done * TUPLE_CHUNK:,}/{len(ordered):,} tuples ({time.perf_counter() - started:.0f}s)")

            await asyncio.gather(*(write(chunk) for chunk in chunks))

    await asyncio.gather(trees(), relations())
    return round(time.perf_counter() - started, 1)


@dataclass
class Timings:
    ms: dict[str, list[float]] = field(default_factory=lambda: {mode: [] for mode in MODES})
    round_trips: list[int] = field(default_factory=list)
    levels: list[int] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)  # calls refused past the gate's deadline, per mode

    def summary(self) -> dict[str, float | int]:
        (p50, p95), (free_p50, free_p95) = percentiles(self.ms["gate"]), percentiles(self.ms["allow_all"])
        return {
            "p50_ms": round(p50, 1),
            "p95_ms": round(p95, 1),
            "p50_ms_unauthorized": round(free_p50, 1),
            "p95_ms_unauthorized": round(free_p95, 1),
            "ratio": round(p50 / free_p50, 2),
            "ratio_p95": round(p95 / free_p95, 2),
            "calls": len(self.ms["gate"]),
            "round_trips_per_call": round(statistics.mean(self.round_trips), 2),
            "levels_per_call": round(statistics.mean(self.levels), 2),
            "calls_over_levels": sum(trips > levels for trips, levels in zip(self.round_trips, self.levels, strict=True)),
            "authorization_timeouts": self.errors["gate"],
        }


async def _measure(own: Settings, made: Company, console: Console) -> dict[str, Any]:
    """Per user: who it is, the share of pages and issues it sees, and the figures per tool."""
    switch: Switch | None = None

    @asynccontextmanager
    async def services() -> AsyncIterator[Services]:
        nonlocal switch
        async with open_services(own) as real:
            switch = Switch({"gate": real.authorizer, "allow_all": AllowAll()})
            yield replace(real, authorizer=switch)

    tokens = {user: secrets.token_urlsafe(32) for user in USERS}
    server = create_server(services, http_identity, observe=lambda *_: None, auth=StaticTokens({t: u for u, t in tokens.items()}))
    users: dict[str, Any] = {}
    async with serving(server, own.mcp.host, 0) as url:
        for user, name in USERS.items():
            seen = visible_to(made, user)
            calls = workload(made, seen, random.Random(f"{SEED}-{user}"))
            timings: dict[str, Timings] = {}
            async with Client(url, auth=tokens[user]) as client:
                assert switch is not None
                for call in calls[:: max(1, len(calls) // 10)]:  # warm up every path (connections, caches)
                    for mode in MODES:
                        switch.mode = mode
                        await client.call_tool_mcp(call.tool, call.args)
                console.print(f"measuring {len(calls)} calls x {len(MODES)} modes x {ROUNDS} rounds as {user} ({name})")
                for round_number in range(ROUNDS):
                    for number, call in enumerate(calls):
                        entry = timings.setdefault(call.tool, Timings())
                        shift = (number + round_number) % len(MODES)
                        for mode in MODES[shift:] + MODES[:shift]:
                            switch.mode = mode
                            trips = switch.round_trips
                            began = time.perf_counter()
                            result = await client.call_tool_mcp(call.tool, call.args)
                            entry.ms[mode].append((time.perf_counter() - began) * 1000)
                            if result.is_error:
                                entry.errors[mode] += 1
                                text = getattr(result.content[0], "text", "") if result.content else ""
                                if not text.startswith("authorization_unavailable"):  # anything but the gate's deadline is a bug
                                    raise RuntimeError(f"{call.tool}({call.args}) failed for {user} in mode {mode}: {text}")
                            if mode == "gate":
                                entry.round_trips.append(switch.round_trips - trips)
                                entry.levels.append(call.levels)
            users[name] = {
                "user": user,
                "visible_share": round(sum(n.startswith(("page:", "issue:")) for n in seen) / len(made.parent), 4),
                "tools": {tool: t.summary() for tool, t in sorted(timings.items())},
            }
    return users


def _by_tool(users: dict[str, Any]) -> dict[str, Any]:
    """Tool → the full-visibility user's figures, with the 5% user's under ``five_percent``."""
    return {tool: {**summary, "five_percent": users["five_percent"]["tools"][tool]} for tool, summary in users["full"]["tools"].items()}


def _show(report: dict[str, Any], console: Console) -> None:
    table = Table(
        "tool", "user", "p50", "p95", "p50 allow-all", "ratio", "ratio p95", "trips", "levels", "over", "timeouts", "ratio cached",
        title=f"bench-nav: {report['pages']:,} pages, {report['issues']:,} issues (ms over MCP; OpenFGA on {report['datastore']}; "
        f"cached: its decision cache at {report['decision_cache_s']:g} s)",
    )
    for tool, full in report["tools"].items():
        cached = report["tools_decision_cache"][tool]
        for name, s, c in (("full", full, cached), ("5%", full["five_percent"], cached["five_percent"])):
            table.add_row(
                tool, name, str(s["p50_ms"]), str(s["p95_ms"]), str(s["p50_ms_unauthorized"]), str(s["ratio"]), str(s["ratio_p95"]),
                str(s["round_trips_per_call"]), str(s["levels_per_call"]), str(s["calls_over_levels"]), str(s["authorization_timeouts"]),
                str(c["ratio"]),
            )
    console.print(table, width=max(console.width, 160))  # a log file is 80 columns wide otherwise
