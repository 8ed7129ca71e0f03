"""``make leak-suite``: the whole Hive space with canaries, served over HTTP on a stack of its own,
probed as every principal; the report goes to ``.wayfinder/reports/leak-suite.json``.

The suite's stack (OpenFGA on the memory datastore, Neo4j, the LightRAG index) lives under
``<data dir>/leak-suite`` on ports of its own, so the demo stack is never touched; the index is
kept between runs, so only the first run pays for indexing.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from functools import partial

from rich.console import Console

from authz.base import TupleStore
from authz.client import OpenFGAClient
from authz.tuples import confluence_tuples
from core.models import Page, Permissions, Space
from core.settings import Settings, TokenPrincipal
from devstack import stack
from devstack.serving import serving
from evals.leaks.canaries import CanarySource
from evals.leaks.oracle import Oracle
from evals.leaks.report import Report
from evals.leaks.suite import ACTORS, EXPIRING, LeakSuite, Target
from mcp_app.auth import StaticTokens, http_identity
from mcp_app.server import Services, create_server, open_services
from pipeline.sinks.openfga import sync_tuples
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


@asynccontextmanager
async def leak_target(
    settings: Settings, source: CanarySource, services: ServicesFactory | None = None
) -> AsyncIterator[tuple[Target, StackEnvironment]]:
    """Serve the indexed ``source`` over HTTP with a token per actor; yield the target and levers.

    ``services`` replaces the real backends (a benchmark's or a test's own authorizer).
    """
    spaces = await source.spaces()
    pages = [page for space in spaces for page in await source.pages(space.key)]
    permissions = await source.permissions()
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
            yield Target(url, oracle, tokens, source.canaries, evidence, settings.openfga.check_timeout_s), environment


async def run_leak_suite(settings: Settings, source: CanarySource, console: Console) -> Report:
    """Index ``source`` on the suite's own stack, run every category, write and show the report."""
    from pipeline.runner import run_index

    own = suite_settings(settings)
    for status in stack.up(own):
        console.print(f"{status.name}: {status.detail}")
    try:
        await run_index(own, source, console)
        async with leak_target(own, source) as (target, environment):
            console.print(f"probing {len(target.oracle.pages)} pages as {len(ACTORS)} principals at {target.url}")
            report = await LeakSuite(target, environment).run()
    finally:
        stack.down(own)
    report.write(settings.data_dir / "reports" / REPORT)
    report.show(console)
    console.print(f"report: {settings.data_dir / 'reports' / REPORT}")
    return report
