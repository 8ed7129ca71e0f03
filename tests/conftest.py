"""Shared fixtures. Integration and e2e tests run against a stack the session starts itself,
on ports of its own, so a running demo stack is never touched."""

from __future__ import annotations

import secrets
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

from core.settings import Settings
from devstack import stack
from devstack.atlassian.admin import Emulator
from devstack.atlassian.hive import seed_hive
from devstack.atlassian.runner import serving
from devstack.atlassian.site import Site
from devstack.atlassian.view import SiteView, site_view
from devstack.leaks import plant_canaries, synced_from
from devstack.postgres import PostgresService
from evals.leaks.canaries import Canary
from pipeline.raw_store import RawStore
from pipeline.sources.confluence_rest import ConfluenceRestSource
from pipeline.sync import SyncReport, run_sync

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpora" / "apache-hive-wiki"

# A slice of the Hive space that holds every permission case: the restricted DesignDocs
# subtree (committers only), the page restricted to bob, and unrestricted trees.
SLOW_TIMEOUT_S = 1200

SLICE_ROOTS = {
    "27362075",  # DesignDocs (restricted to hive-committers), with its 42 descendants
    "27362079",  # AdminManual SettingUpHiveServer → Setting Up HiveServer2 → LDAP filter page
    "27362076",  # AdminManual Metastore Administration → Hive MetaTool, Hive Schema Tool
    "27362087",  # Development ContributorsMeetings → ContributorsMinutes110726 (bob only)
}


def test_settings(base: Path) -> Settings:
    # Fixed ports sit below the kernel's ephemeral range (32768-60999 on Linux), where the local
    # end of some outgoing connection could already hold them.
    return Settings(
        data_dir=base / "run",
        corpus_dir=CORPUS,
        openfga={"http_port": 29080, "grpc_port": 29081, "datastore": "memory", "store_name": "wayfinder-test"},
        neo4j={"bolt_port": 29687, "password": "wayfinder-test-password"},
        lightrag={"workspace": "test"},
        mcp={"port": 29765},
        confluence={"emulator_port": 29190},
    )


@dataclass(frozen=True)
class HiveSlice:
    site: Site  # the emulated Confluence the session syncs from
    canaries: list[Canary]  # one in each restricted page

    def view(self) -> SiteView:
        """The site's own word on who may see what (the leak suite's oracle)."""
        return site_view(self.site, ["HIVE"])


@pytest.fixture(scope="session")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return test_settings(tmp_path_factory.mktemp("wayfinder"))


@pytest.fixture(scope="session")
async def hive_slice() -> HiveSlice:
    """The slice in the Confluence emulator, a canary planted in each restricted page."""
    site = Site()
    await seed_hive(site, CORPUS, roots=SLICE_ROOTS)
    return HiveSlice(site, plant_canaries(site, ["HIVE"]))


@pytest.fixture(scope="session")
def services(settings: Settings, hive_slice: HiveSlice):
    """Real OpenFGA (memory datastore) and Neo4j for the whole session, and the emulated site
    served over HTTP; the settings returned sync from it."""
    with serving(Emulator(hive_slice.site, secrets.token_urlsafe(32))) as url:
        synced = synced_from(settings, url)
        try:
            stack.up(synced)
            yield synced
        finally:
            stack.down(synced)


@pytest.fixture(scope="session")
async def indexed(services: Settings) -> SyncReport:
    """The slice synced over REST through the real pipeline: raw store, tuples, tree and LightRAG."""
    source = ConfluenceRestSource(services.confluence, services.confluence.url or "")
    async with RawStore.for_settings(services) as store:
        return await run_sync(services, source, store, Console(quiet=True))


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL 16 server with pgvector for the session, started on first use; tests take a fresh
    database each with ``create_database``. Its directory lies where the server's own account
    can reach it (see devstack/postgres.py)."""
    directory = Path(tempfile.mkdtemp(prefix="wayfinder-test-postgres-"))
    directory.chmod(0o755)
    server = PostgresService(directory, 29543, secrets.token_urlsafe(16))
    try:
        stack.ensure_up(server, lambda message: None)
        yield server
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = Path(item.path).parent.name
        if tier in {"integration", "e2e"}:
            item.add_marker(getattr(pytest.mark, tier))
            # The first test of a session also pays for starting the stack and indexing the slice.
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))
