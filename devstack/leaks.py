"""``make leak-suite``: the whole Hive space with canaries, synced over REST from the Confluence
emulator, served over HTTP on a stack of its own and probed as every principal; the report goes
to ``.wayfinder/reports/leak-suite.json``.

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
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from functools import partial

from pydantic import SecretStr
from rich.console import Console

from authz.base import TupleStore
from authz.client import OpenFGAClient
from authz.tuples import confluence_tuples
from core.models import Page, Permissions, Space
from core.settings import Settings, TokenPrincipal
from devstack import stack
from devstack.serving import serving
from devstack.atlassian.admin import Emulator
from devstack.atlassian.hive import SYNC_LOGIN, TOKENS, seed_hive
from devstack.atlassian.runner import serving as serving_site
from devstack.atlassian.site import Site
from devstack.atlassian.view import SiteView, site_view
from evals.leaks.canaries import Canary, canary_note, make_canaries, restricted_pages
from evals.leaks.oracle import Oracle
from evals.leaks.report import Report
from evals.leaks.suite import ACTORS, EXPIRING, LeakSuite, Target
from mcp_app.auth import StaticTokens, http_identity
from mcp_app.server import Services, create_server, open_services
from pipeline.raw_store import RawStore
from pipeline.sinks.openfga import sync_tuples
from pipeline.sources.confluence_rest import ConfluenceRestSource
from pipeline.sync import run_sync
from retrievers.factory import semantic_index

REPORT = "leak-suite.json"


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
    """The suite's levers on a running stack: permissions applied as an index run would, and a
    way to stop OpenFGA."""

    settings: Settings
    store: TupleStore
    spaces: Sequence[Space]
    pages: Sequence[Page]

    async def apply(self, permissions: Permissions) -> None:
        desired = set()
        for space in self.spaces:
            desired |= confluence_tuples(space.key, [p for p in self.pages if p.space_key == space.key], permissions)
        await sync_tuples(self.store, desired)

    async def stop_authorization(self) -> None:
        await asyncio.to_thread(stack.down, self.settings, only={"openfga"})


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
        update={"url": f"{url}/confluence", "cloud": False, "username": SYNC_LOGIN, "token": SecretStr(TOKENS[SYNC_LOGIN])}
    )
    return settings.model_copy(update={"confluence": confluence})


@asynccontextmanager
async def leak_target(
    settings: Settings, view: SiteView, canaries: Sequence[Canary], services: ServicesFactory | None = None
) -> AsyncIterator[tuple[Target, StackEnvironment]]:
    """Serve the synced site over HTTP with a token per actor; yield the target and levers. ``view``
    is the site's own word on who may see what: the oracle.

    ``services`` replaces the real backends (a benchmark's or a test's own authorizer).
    """
    spaces, pages, permissions = list(view.spaces), list(view.pages), view.permissions
    async with semantic_index(settings) as index:  # read before the server opens it: one per process
        evidence = await index.graph_evidence()
    tokens = {actor.name: secrets.token_urlsafe(32) for actor in [*ACTORS, EXPIRING]}
    verifier = StaticTokens({tokens[a.name]: TokenPrincipal(**a.principal.model_dump()) for a in [*ACTORS, EXPIRING]})
    server = create_server(
        services or partial(open_services, settings), http_identity, observe=lambda *_: None, auth=verifier
    )
    async with OpenFGAClient(settings.openfga, provision=True) as store:
        environment = StackEnvironment(settings, store, spaces, pages)
        await environment.apply(permissions)
        async with serving(server, settings.mcp.host, settings.mcp.port) as url:
            oracle = Oracle.of(spaces, pages, permissions)
            yield Target(url, oracle, tokens, list(canaries), evidence, settings.openfga.check_timeout_s), environment


@asynccontextmanager
async def synced_suite_stack(settings: Settings, site: Site, console: Console) -> AsyncIterator[Settings]:
    """Serve ``site`` from the emulator, start the suite's stack and sync the site onto it; yield
    the stack's settings, and stop it when the block ends."""
    with serving_site(Emulator(site, secrets.token_urlsafe(32))) as site_url:
        own = synced_from(suite_settings(settings), site_url)
        for status in stack.up(own):
            console.print(f"{status.name}: {status.detail}")
        try:
            async with RawStore.for_settings(own) as store:
                await run_sync(own, ConfluenceRestSource(own.confluence, own.confluence.url or ""), store, console)
            yield own
        finally:
            stack.down(own)


async def run_leak_suite(settings: Settings, console: Console) -> Report:
    """Sync the emulated Hive space (with canaries) onto the suite's own stack, run every
    category, write and show the report."""
    site = Site()
    await seed_hive(site, settings.corpus_dir)
    canaries = plant_canaries(site, ["HIVE"])
    async with synced_suite_stack(settings, site, console) as own:
        async with leak_target(own, site_view(site, ["HIVE"]), canaries) as (target, environment):
            console.print(f"probing {len(target.oracle.pages)} pages as {len(ACTORS)} principals at {target.url}")
            report = await LeakSuite(target, environment).run()
    report.write(settings.data_dir / "reports" / REPORT)
    report.show(console)
    console.print(f"report: {settings.data_dir / 'reports' / REPORT}")
    return report
