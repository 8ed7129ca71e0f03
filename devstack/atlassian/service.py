"""The emulator as a service of the local stack, beside OpenFGA and Neo4j (used when no real
Confluence site is configured)."""

from __future__ import annotations

import asyncio
import fcntl
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable

from rich.console import Console

from pydantic import SecretStr

from core.errors import ConfigurationError
from core.settings import Settings
from devstack.atlassian.hive import SYNC_LOGIN, TOKENS
from devstack.process import Port, ServiceFiles, start_detached
from pipeline.raw_store import RawStore
from pipeline.sources.confluence_rest import ConfluenceRestSource
from pipeline.sources.jira_rest import JiraRestSource
from pipeline.sync import SyncReport, run_sync

CONTEXT_PATH = "/confluence"  # a Data Center site, as the Apache wiki is


class AtlassianEmulatorService:
    """One emulator process for ``settings``. Construction does no I/O."""

    name = "confluence"
    start_deadline_s = 60.0
    stop_grace_s = 5.0

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._conf = settings.confluence
        self.files = ServiceFiles(self.name, settings.services_dir / self.name)

    @property
    def address(self) -> str:
        return f"http://{self._conf.emulator_host}:{self._conf.emulator_port}{CONTEXT_PATH}"

    def ports(self) -> list[Port]:
        return [Port(self._conf.emulator_host, self._conf.emulator_port, "Confluence emulator", "WAYFINDER_CONFLUENCE__EMULATOR_PORT")]

    def install(self, notify: Callable[[str], None]) -> None:
        if not (self._settings.corpus_dir / "space-index.md").is_file():
            raise ConfigurationError(f"the emulator seeds from the Hive export, not found at {self._settings.corpus_dir} (WAYFINDER_CORPUS_DIR)")

    def launch(self) -> int:
        argv = [
            sys.executable, "-m", "devstack.atlassian",
            "--host", self._conf.emulator_host,
            "--port", str(self._conf.emulator_port),
            "--corpus", str(self._settings.corpus_dir),
        ]  # fmt: skip
        env = dict(os.environ)
        env["WAYFINDER_EMULATOR_ADMIN_TOKEN"] = self._conf.emulator_admin_token.get_secret_value()
        return start_detached(self.files, argv, env)

    def is_healthy(self) -> bool:
        # Any answer from the REST API (401 without credentials) means it is up and seeded.
        try:
            urllib.request.urlopen(f"{self.address}/rest/api/space", timeout=2).close()
            return True
        except urllib.error.HTTPError as exc:
            return exc.code == 401
        except OSError:
            return False


def sync_source(settings: Settings) -> ConfluenceRestSource:
    """The site ``wayfinder sync`` reads: the configured one, or else the local emulator as its
    sync account (a Data Center site with usernames, like the Apache wiki)."""
    conf = settings.confluence
    if not conf.emulated:
        return ConfluenceRestSource(conf, conf.url or "")
    emulated = conf.model_copy(update={"username": conf.username or SYNC_LOGIN, "token": conf.token or SecretStr(TOKENS[SYNC_LOGIN])})
    return ConfluenceRestSource(emulated, AtlassianEmulatorService(settings).address)


def jira_sync_source(settings: Settings) -> JiraRestSource | None:
    """The Jira ``wayfinder sync`` reads: the configured one; or, when Confluence is the local
    emulator and no Jira is configured, the emulator's Jira as the sync account; else none."""
    conf = settings.jira
    if conf.url:
        return JiraRestSource(conf, conf.url)
    if not settings.confluence.emulated:
        return None
    emulated = conf.model_copy(update={"username": conf.username or SYNC_LOGIN, "token": conf.token or SecretStr(TOKENS[SYNC_LOGIN])})
    return JiraRestSource(emulated, AtlassianEmulatorService(settings).address.removesuffix(CONTEXT_PATH) + "/jira")


async def sync_configured(settings: Settings, console: Console, *, permissions_only: bool = False) -> SyncReport:
    """One ``wayfinder sync`` of the configured site (or the emulator) into the configured stores.
    Runs one at a time per data directory: a full sync that read permissions before a
    permissions-only pass must not write its older view after it."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    with open(settings.data_dir / "sync.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            console.print("waiting for the sync already running in this data directory")
            await asyncio.to_thread(fcntl.flock, lock, fcntl.LOCK_EX)
        async with RawStore.for_settings(settings) as store:
            return await run_sync(settings, sync_source(settings), store, console, permissions_only=permissions_only, jira=jira_sync_source(settings))
