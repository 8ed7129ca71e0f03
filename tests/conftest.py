"""Shared fixtures. Integration and e2e tests run against a stack the session starts itself,
on ports of its own, so a running demo stack is never touched."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from core.models import Page
from core.settings import Settings
from devstack import stack
from evals.leaks.canaries import CanarySource
from pipeline.runner import IndexReport, run_index
from pipeline.sources.hive_export import HiveExportSource

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
    )


class SliceSource(HiveExportSource):
    """The Hive export limited to SLICE_ROOTS and everything below them."""

    async def pages(self, space_key: str) -> list[Page]:
        keep: set[str] = set()
        result = []
        for page in await super().pages(space_key):
            if page.page_id in SLICE_ROOTS or page.parent_id in keep:
                keep.add(page.page_id)
                result.append(page)
        return result


@pytest.fixture(scope="session")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return test_settings(tmp_path_factory.mktemp("wayfinder"))


@pytest.fixture(scope="session")
def services(settings: Settings):
    """Real OpenFGA (memory datastore) and Neo4j for the whole session."""
    stack.up(settings)
    yield settings
    stack.down(settings)


def slice_source(settings: Settings) -> CanarySource:
    """The slice, with a canary planted in each restricted page (the leak suite looks for them)."""
    return CanarySource(SliceSource(settings.corpus_dir))


@pytest.fixture(scope="session")
async def indexed(services: Settings) -> IndexReport:
    """The slice indexed through the real pipeline: tuples, tree and LightRAG."""
    return await run_index(services, slice_source(services), Console(quiet=True))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = Path(item.path).parent.name
        if tier in {"integration", "e2e"}:
            item.add_marker(getattr(pytest.mark, tier))
            # The first test of a session also pays for starting the stack and indexing the slice.
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))
