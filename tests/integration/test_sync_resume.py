"""A ``wayfinder sync`` killed with SIGKILL at any point, then run again, converges to the stores
an uninterrupted run leaves: the raw store, OpenFGA's tuples, Neo4j's pages and LightRAG's index
all say what the site says, and one more run finds nothing to do. The killed sync's worker
processes do not outlive it."""

from __future__ import annotations

import json
import os
from unittest import mock
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from authz.client import OpenFGAClient
from authz.tuples import SOURCE_TYPES, confluence_tuples
from core.settings import Settings
from devstack import stack
from devstack.atlassian.admin import Emulator
from devstack.atlassian.runner import serving
from devstack.atlassian.view import site_view
from navigator.store import Neo4jStore
from pipeline.raw_store import RawStore
from pipeline.sources.confluence_rest import ConfluenceRestSource
from pipeline.sync import run_sync
from tests.integration.test_rest_sync import SYNC, Clock, small_site

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def own(request, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Settings, Emulator, dict[str, str]]]:
    """A stack of its own per raw-store engine: the SQLite file in the data directory, or a
    database on the session's PostgreSQL server."""
    emulator = Emulator(small_site(Clock()), "admin-token-for-resume-tests")
    base = tmp_path_factory.mktemp(f"sync-resume-{request.param}")
    engine = {}
    if request.param == "postgresql":
        engine["WAYFINDER_RAW_STORE_URL"] = request.getfixturevalue("postgres").create_database("resume")
    with serving(emulator) as url:
        env = {
            **engine,
            "WAYFINDER_DATA_DIR": str(base / "run"),
            "WAYFINDER_OPENFGA__HTTP_PORT": "29480",
            "WAYFINDER_OPENFGA__GRPC_PORT": "29481",
            "WAYFINDER_OPENFGA__DATASTORE": "memory",
            "WAYFINDER_OPENFGA__STORE_NAME": "wayfinder-resume-test",
            "WAYFINDER_NEO4J__BOLT_PORT": "29487",
            "WAYFINDER_NEO4J__PASSWORD": "wayfinder-test-password",
            "WAYFINDER_LIGHTRAG__WORKSPACE": "resume",
            "WAYFINDER_LIGHTRAG__INSERT_BATCH_SIZE": "1",  # a manifest write per page: many points to die at
            "WAYFINDER_CONFLUENCE__URL": url + "/confluence",
            "WAYFINDER_CONFLUENCE__DEPLOYMENT": "datacenter-9",
            "WAYFINDER_CONFLUENCE__USERNAME": SYNC,
            "WAYFINDER_CONFLUENCE__TOKEN": f"token-{SYNC}",
            "WAYFINDER_CONFLUENCE__SPACES": '["ENG"]',
        }
        settings = _settings(env)
        stack.up(settings, only={"openfga", "neo4j"})
        try:
            yield settings, emulator, env
        finally:
            stack.down(settings, only={"openfga", "neo4j"})


def _settings(env: dict[str, str]) -> Settings:
    with mock.patch.dict(os.environ, env):
        return Settings()


def _children(pid: int) -> set[int]:
    """The processes ``pid`` started that still run (Linux's /proc)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, parent = stat.read_text().rsplit(")", 1)[1].split()[:2]
        except (OSError, IndexError):
            continue
        if int(parent) == pid and state != "Z":
            found.add(int(stat.parent.name))
    return found


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _sync_killed_when(env: dict[str, str], ready, orphans: list[int]) -> bool:
    """Start ``wayfinder sync`` and SIGKILL it as soon as ``ready()`` holds; True if it was killed
    before it could finish. The processes it had started and that still run 15 s after are added
    to ``orphans``."""
    process = subprocess.Popen(
        [sys.executable, "-m", "cli", "sync"], cwd=REPO, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 300
        while process.poll() is None and time.monotonic() < deadline:
            if ready():
                children = _children(process.pid)
                process.send_signal(signal.SIGKILL)
                process.wait(timeout=30)
                gone_by = time.monotonic() + 15
                while any(_running(child) for child in children) and time.monotonic() < gone_by:
                    time.sleep(0.1)
                orphans.extend(child for child in children if _running(child))
                return True
            time.sleep(0.02)
        return False
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)


async def test_a_killed_sync_resumes_to_the_same_stores(own):
    settings, emulator, env = own
    manifest = settings.index_dir / "manifest.json"
    # Each sync of this site makes 6 REST calls: space, listing, time zone, changed pages, 2 groups.
    kills = [
        lambda: emulator.requests.total() >= 2,  # mid-collection
        lambda: emulator.requests.total() >= 5,  # bodies held, group members being read
        lambda: manifest.exists() and len(json.loads(manifest.read_text() or "{}")) >= 1,  # mid-indexing
    ]
    killed = 0
    orphans: list[int] = []
    for ready in kills:
        emulator.requests.clear()
        killed += _sync_killed_when(env, ready, orphans)
    assert killed >= 2, "the sync finished before it could be killed: the test tested nothing"
    assert orphans == [], "worker processes outlived the sync that started them"

    async with RawStore.for_settings(settings) as store:
        report = await run_sync(settings, _source(settings), store, Console(quiet=True))
        assert report.failed == {}
        again = await run_sync(settings, _source(settings), store, Console(quiet=True))
        stored = {p.page_id: p for p in await store.pages()}
    assert (again.added, again.changed, again.moved, again.deleted, again.permission_only) == ([], [], [], [], [])
    assert again.sinks.tuples.written == again.sinks.tuples.deleted == 0 and again.sinks.index.indexed == 0

    site = emulator.site
    view = site_view(site, ["ENG"])
    async with OpenFGAClient(settings.openfga) as fga:
        held = {t for t in await fga.read_tuples() if t.object_type in SOURCE_TYPES}
    assert held == confluence_tuples("ENG", view.pages, view.permissions)
    assert {i: p.converted_version for i, p in stored.items()} == {p.id: p.version.number for p in site.pages.values()}
    async with Neo4jStore(settings.neo4j) as neo:
        placed = await neo.summaries([f"page:{p}" for p in site.pages])
    assert set(placed) == {f"page:{p}" for p in site.pages}
    assert set(json.loads(manifest.read_text())) == {f"page:{p}" for p in site.pages}


def _source(settings: Settings) -> ConfluenceRestSource:
    return ConfluenceRestSource(settings.confluence, settings.confluence.url or "")
