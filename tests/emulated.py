"""Helpers for tests that drive the Confluence emulator: a settable clock, the Hive site served on
loopback, and calls to the admin API."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

import requests

from devstack.atlassian.admin import Emulator
from devstack.atlassian.hive import seed_hive
from devstack.atlassian.hive_jira import seed_hive_jira
from devstack.atlassian.runner import serving
from devstack.atlassian.site import Site
from tests.conftest import CORPUS

ADMIN = "emulator-admin-token-for-tests"


class Clock:
    """The site's clock, moved by the test."""

    def __init__(self, start: datetime = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


@dataclass(frozen=True)
class Served:
    url: str
    emulator: Emulator
    clock: Clock


async def served_hive(*, jira: bool = False) -> AsyncIterator[Served]:
    """The whole Hive space (and with ``jira``, the HIVE Jira project) in an emulator on loopback,
    for a module-scoped fixture."""
    clock = Clock()
    site = Site(clock)
    await seed_hive(site, CORPUS)
    if jira:
        await seed_hive_jira(site, CORPUS)
    emulator = Emulator(site, ADMIN)
    with serving(emulator) as url:
        yield Served(url, emulator, clock)


def admin(url: str, method: str, path: str, body: dict | None = None) -> dict:
    response = requests.request(method, f"{url}/_emulator{path}", json=body, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


@contextmanager
def serving_release(served: Served, version: str) -> Iterator[str]:
    """The same site behind a Data Center face of another release (its own port and counts)."""
    with serving(Emulator(served.emulator.site, ADMIN, data_center=version)) as url:
        yield url
