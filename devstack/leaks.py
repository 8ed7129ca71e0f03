"""``make leak-suite``: the whole Hive space with canaries, and the HIVE Jira project, synced over
REST from the emulator, served over HTTP on a stack of its own and probed as every principal; the
report goes to ``.wayfinder/reports/leak-suite.json``. Identities, a page of links and an image
on a restricted page are planted first (:mod:`devstack.leak_plants`), and a fake Slack workspace
asks the bot's audience decision over the stack's OpenFGA.

The canaries are planted in the emulated site (an edit of each restricted page), so they travel
the whole path a real page's text does. The oracle is read from the site's own state, never
through the sync. The suite's stack (OpenFGA on the memory datastore, Neo4j, the LightRAG index)
lives under ``<data dir>/leak-suite`` on ports of its own, so the demo stack is never touched; the
index is kept between runs, so only the first run pays for indexing.
"""

from __future__ import annotations

import asyncio
import html
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from functools import partial

from pydantic import SecretStr
from rich.console import Console

from authz.base import RelationTuple, TupleStore
from authz.client import OpenFGAClient
from authz.tuples import confluence_tuples
from core import ids
from core.models import Page, Permissions, Principal, Space
from core.settings import JiraSettings, Settings, TokenPrincipal
from devstack import leak_plants, stack
from devstack.serving import serving
from devstack.atlassian.admin import Emulator
from devstack.atlassian.export import DESIGN_DOCS_PAGE, SINGLE_USER_PAGE
from devstack.atlassian.hive import SYNC_LOGIN, TOKENS, seed_hive
from devstack.atlassian.hive_jira import seed_hive_jira
from devstack.atlassian.runner import serving as serving_site
from devstack.atlassian.site import Site
from devstack.atlassian.view import SiteView, site_view
from evals.leaks.canaries import Canary, canary_note, make_canaries, restricted_pages
from evals.leaks.fidelity import LinkPlant, Timed
from evals.leaks.oracle import Oracle
from evals.leaks.report import Report
from evals.leaks.suite import ACTORS, EXPIRING, Actor, LeakSuite, Target
from mcp_app.auth import StaticTokens, http_identity
from mcp_app.server import Services, create_server, open_services
from pipeline.raw_store import RawStore
from pipeline.sinks.openfga import sync_tuples
from pipeline.sources.confluence_rest import ConfluenceRestSource
from pipeline.sources.jira_rest import JiraRestSource
from pipeline.sync import SyncReport, run_sync
from retrievers.factory import semantic_index

REPORT = "leak-suite.json"
# The share of a space one sync may purge while revocation_stall locks a subtree: any subtree of
# more than 20 pages then vanishes instead, and must be hidden with its content kept.
STALL_SHARE = 0.05
# Objects whose tuples the Jira half of a sync writes (and a Jira group's own): kept as they are
# when the suite applies Confluence permissions of its own.
JIRA_OBJECTS = ("project:", "issue:", "comment:", "security_level:", "project_role:", "group:x-jira-")
IDENTITIES = (
    Actor("john smith", Principal(user=ids.user_name(leak_plants.JOHN)), username=leak_plants.JOHN),
    Actor("named like john's id", Principal(user=ids.user_name(leak_plants.IMPOSTOR)), username=leak_plants.IMPOSTOR),
)


def suite_settings(settings: Settings) -> Settings:
    """The suite's own stack: its own directory and ports, OpenFGA in memory (it is stopped mid-run)."""
    return settings.model_copy(
        update={
            "data_dir": settings.data_dir / "leak-suite",
            "openfga": settings.openfga.model_copy(
                update={"http_port": 24080, "grpc_port": 24081, "datastore": "memory", "store_name": "wayfinder-leaks"}
            ),
            "neo4j": settings.neo4j.model_copy(update={"bolt_port": 24687}),
            "mcp": settings.mcp.model_copy(update={"port": 24765}),
            "confluence": settings.confluence.model_copy(update={"emulator_port": 24190}),
        }
    )


@dataclass
class StackEnvironment:
    """The suite's levers on a running stack: permissions applied as an index run would, a change
    at the source followed by a real sync, and a way to stop OpenFGA."""

    settings: Settings
    store: TupleStore
    spaces: Sequence[Space]
    pages: Sequence[Page]
    kept: frozenset[RelationTuple] = frozenset()  # the Jira half's tuples, left as the sync wrote them
    site: Site | None = None
    sync: Callable[[float], Awaitable[SyncReport]] | None = None  # a sync purging at most this share
    _locked: dict[str, tuple[set[str], set[str]]] = field(default_factory=dict)

    async def apply(self, permissions: Permissions) -> None:
        synced = as_synced(permissions)
        desired = set(self.kept)
        for space in self.spaces:
            desired |= confluence_tuples(space.key, [p for p in self.pages if p.space_key == space.key], synced)
        await sync_tuples(self.store, desired)

    async def stop_authorization(self) -> None:
        await asyncio.to_thread(stack.down, self.settings, only={"openfga"})

    async def lock_subtree(self, root: str) -> tuple[list[str], list[str]]:
        assert self.site is not None and self.sync is not None, "a lock needs the emulated site and a sync"
        page = self.site.pages[root.removeprefix("page:")]
        self._locked[root] = (set(page.read_users), set(page.read_groups))
        if "lockdown" not in self.site.groups:
            self.site.add_group("lockdown", {self.site.user_by_login("hive-admin").account_id})  # none the suite acts as
        self.site.set_read_restrictions(page.id, users=set(), groups={"lockdown"})
        report = await self.sync(STALL_SHARE)
        return [f"page:{p}" for p in report.vanished], [f"page:{p}" for p in report.deleted]

    async def unlock_subtree(self, root: str) -> None:
        assert self.site is not None and self.sync is not None
        users, groups = self._locked.pop(root)
        self.site.set_read_restrictions(root.removeprefix("page:"), users=users, groups=groups)
        await self.sync(self.settings.confluence.max_deleted_share)


def as_synced(permissions: Permissions) -> Permissions:
    """The site's permissions (users by username, groups by name) spelled as the sync spells them:
    users through the one identity function, groups through ``safe_name``."""

    def subject(raw: str) -> str:
        kind, _, name = raw.partition(":")
        if kind == "user" and name != "*":
            return f"user:{ids.user_name(name)}"
        if kind == "group":
            return f"group:{ids.safe_name(name.removesuffix('#member'))}#member"
        return raw

    return Permissions(
        space_viewers={k: tuple(map(subject, v)) for k, v in permissions.space_viewers.items()},
        page_restrictions={k: tuple(map(subject, v)) for k, v in permissions.page_restrictions.items()},
        group_members={ids.safe_name(k): tuple(map(subject, v)) for k, v in permissions.group_members.items()},
    )


@dataclass(frozen=True)
class Plants:
    """What was planted in the site before its sync, for the categories that need it."""

    links: LinkPlant
    hidden_image: str
    johns_page: str


def plant_fidelity(site: Site, space_key: str) -> Plants:
    """Identities, a page of links to hidden pages and issues, and an image on a restricted page.
    Needs the Jira project seeded."""
    johns = leak_plants.plant_identities(site, space_key)
    open_pages = sorted(p.id for p in site.pages.values() if p.space_key == space_key and p.id != johns and leak_plants.is_open(site, p.id))
    hidden_pages = [f"page:{p}" for p in (DESIGN_DOCS_PAGE, SINGLE_USER_PAGE) if p in site.pages]
    issues = [leak_plants.secured_issue(site), leak_plants.open_issue(site)]
    links = leak_plants.plant_links(site, open_pages[len(open_pages) // 3], hidden_pages, issues)
    return Plants(links, leak_plants.plant_hidden_image(site, DESIGN_DOCS_PAGE), johns)


ServicesFactory = Callable[[], AbstractAsyncContextManager[Services]]


def plant_canaries(site: Site, space_keys: Sequence[str]) -> list[Canary]:
    """Edit every restricted page of the site (its own restriction or an ancestor's) to start
    with a canary note, as an author would."""
    view = site_view(site, space_keys)
    canaries = make_canaries(restricted_pages(view.pages, view.permissions))
    admin = site.user_by_login("hive-admin")
    for canary in canaries:
        page = site.pages[canary.page_id.removeprefix("page:")]
        site.edit_page(page.id, by=admin.account_id if admin else page.version.by, body=f"<p>{html.escape(canary_note(canary))}</p>" + page.body)
    return canaries


def synced_from(settings: Settings, url: str) -> Settings:
    """``settings`` reading the emulated site at ``url`` as its sync account."""
    confluence = settings.confluence.model_copy(
        update={"url": f"{url}/confluence", "username": SYNC_LOGIN, "token": SecretStr(TOKENS[SYNC_LOGIN])}
    )
    return settings.model_copy(update={"confluence": confluence})


@asynccontextmanager
async def leak_target(
    settings: Settings,
    view: SiteView,
    canaries: Sequence[Canary],
    services: ServicesFactory | None = None,
    *,
    site: Site | None = None,
    site_url: str | None = None,
    plants: Plants | None = None,
    not_found_floor_s: float | None = None,
) -> AsyncIterator[tuple[Target, StackEnvironment]]:
    """Serve the synced site over HTTP with a token per actor; yield the target and levers. ``view``
    is the site's own word on who may see what: the oracle.

    ``services`` replaces the real backends (a benchmark's or a test's own authorizer). With the
    emulated ``site`` (served at ``site_url``, synced with its Jira project) and its ``plants``,
    the target holds what the categories of :mod:`evals.leaks.fidelity` need.
    ``not_found_floor_s`` replaces the server's least time for ``not_found`` (a test that does not
    time answers may spare it).
    """
    spaces, pages, permissions = list(view.spaces), list(view.pages), view.permissions
    async with semantic_index(settings) as index:  # read before the server opens it: one per process
        evidence = await index.graph_evidence()
    actors = [*ACTORS, EXPIRING, *(IDENTITIES if plants else ())]
    tokens = {actor.name: secrets.token_urlsafe(32) for actor in actors}
    verifier = StaticTokens({tokens[a.name]: TokenPrincipal(user=a.login, agent=a.principal.agent, task=a.principal.task) for a in actors})
    server = create_server(
        services or partial(open_services, settings), http_identity, observe=lambda *_: None, auth=verifier,
        **({} if not_found_floor_s is None else {"not_found_floor_s": not_found_floor_s}),
    )
    async with AsyncExitStack() as stack_of, OpenFGAClient(settings.openfga, provision=True) as store:
        oracle = Oracle.of(spaces, pages, permissions)
        extra: dict[str, object] = {}
        kept: frozenset[RelationTuple] = frozenset()
        if site is not None and site_url is not None and plants is not None:
            kept = frozenset(t for t in await store.read_tuples() if t.object.startswith(JIRA_OBJECTS))
            logins = [a.login for a in actors if a.principal.agent is None]
            tokens_of = TOKENS | {login: leak_plants.identity_token(login) for login in (leak_plants.JOHN, leak_plants.IMPOSTOR)}
            extra = {
                "jira": await leak_plants.jira_truth(site_url, logins, tokens_of, site) if site.jira.issues else None,
                "links": plants.links,
                "identity": IDENTITIES,
                "timed": _timed(oracle, evidence, plants, "bob"),
                "stall_root": _largest_subtree(oracle),
                "slack": await stack_of.enter_async_context(leak_plants.slack_audience(store, settings.openfga.check_timeout_s)),
            }
        environment = StackEnvironment(settings, store, spaces, pages, kept, site, partial(_resync, settings) if site is not None else None)
        await environment.apply(permissions)
        async with serving(server, settings.mcp.host, settings.mcp.port) as url:
            yield Target(url, oracle, tokens, list(canaries), evidence, settings.openfga.check_timeout_s, **extra), environment  # type: ignore[arg-type]


def _timed(oracle: Oracle, evidence: dict[str, frozenset[str]], plants: Plants, login: str) -> Timed:
    """Ids ``login`` may not see, for each timed tool: restricted pages, the planted image, the
    title paths of those pages, and entities only those pages support."""
    visible = oracle.visible(login)
    by_id = {page.id: page for page in oracle.pages}
    hidden = [p.id for p in oracle.pages if f"space:{p.space_key}" in visible and p.id not in visible]

    def path(page_id: str) -> str:
        titles, node = [], by_id[page_id]
        while True:
            titles.append(node.title.replace("/", "\\/"))
            if node.parent_id is None:
                return "/".join([node.space_key, *reversed(titles)])
            node = by_id[f"page:{node.parent_id}"]

    entities = sorted(name for name, docs in evidence.items() if " -> " not in name and docs and docs <= set(hidden) and len(docs) <= 100)
    return Timed(hidden, [plants.hidden_image], [path(p) for p in hidden], entities[:20])


def _largest_subtree(oracle: Oracle) -> str:
    """The top-level page with the most pages under it."""
    below: dict[str, int] = {}
    parent_of = {p.page_id: p.parent_id for p in oracle.pages}
    for page in oracle.pages:
        node: str | None = page.page_id
        while node is not None:
            below[node] = below.get(node, 0) + 1
            node = parent_of[node]
    roots = [p.page_id for p in oracle.pages if p.parent_id is None]
    return f"page:{max(roots, key=lambda r: (below[r], r))}"


async def _resync(settings: Settings, max_share: float) -> SyncReport:
    """A permissions-only sync of the suite's site (the scheduled kind: the server keeps the index
    open meanwhile), purging at most ``max_share`` of a space."""
    own = settings.model_copy(update={"confluence": settings.confluence.model_copy(update={"max_deleted_share": max_share})})
    async with RawStore.for_settings(own) as store:
        source = ConfluenceRestSource(own.confluence, own.confluence.url or "")
        return await run_sync(own, source, store, Console(quiet=True), jira=jira_source(own), permissions_only=True)


def jira_source(settings: Settings) -> JiraRestSource:
    """The emulated site's Jira, read as the sync account (Data Center, beside its Confluence)."""
    site = (settings.confluence.url or "").removesuffix("/confluence")
    jira = JiraSettings(url=f"{site}/jira", username=SYNC_LOGIN, token=SecretStr(TOKENS[SYNC_LOGIN]), page_size=100)
    return JiraRestSource(jira, jira.url or "")


@asynccontextmanager
async def synced_suite_stack(settings: Settings, site: Site, console: Console) -> AsyncIterator[tuple[Settings, str]]:
    """Serve ``site`` from the emulator, start the suite's stack and sync the site (and its Jira
    project, if it has one) onto it; yield the stack's settings and the site's URL, and stop the
    stack when the block ends."""
    with serving_site(Emulator(site, secrets.token_urlsafe(32))) as site_url:
        own = synced_from(suite_settings(settings), site_url)
        for status in stack.up(own):
            console.print(f"{status.name}: {status.detail}")
        try:
            async with RawStore.for_settings(own) as store:
                jira = jira_source(own) if site.jira.issues else None
                await run_sync(own, ConfluenceRestSource(own.confluence, own.confluence.url or ""), store, console, jira=jira)
            yield own, site_url
        finally:
            stack.down(own)


async def suite_site(settings: Settings) -> tuple[Site, Plants, list[Canary]]:
    """The site the suite's stack holds (``make bench-mcp`` shares it): the Hive space and its Jira
    project, with the plants and the canaries."""
    site = Site()
    await seed_hive(site, settings.corpus_dir)
    await seed_hive_jira(site, settings.corpus_dir)
    plants = plant_fidelity(site, "HIVE")
    return site, plants, plant_canaries(site, ["HIVE"])


async def run_leak_suite(settings: Settings, console: Console) -> Report:
    """Sync the emulated Hive space (with canaries and the other plants) and its Jira project onto
    the suite's own stack, run every category, write and show the report."""
    site, plants, canaries = await suite_site(settings)
    async with synced_suite_stack(settings, site, console) as (own, site_url):
        async with leak_target(own, site_view(site, ["HIVE"]), canaries, site=site, site_url=site_url, plants=plants) as (target, environment):
            console.print(f"probing {len(target.oracle.pages)} pages and {len(site.jira.issues)} issues as {len(ACTORS) + len(IDENTITIES)} principals at {target.url}")
            report = await LeakSuite(target, environment).run()
    report.write(settings.data_dir / "reports" / REPORT)
    report.show(console)
    console.print(f"report: {settings.data_dir / 'reports' / REPORT}")
    return report
