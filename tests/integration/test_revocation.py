"""Revocation never waits (DESIGN.md A13), over REST from the emulator into a stack of the test's
own: a restriction that hides most of a space from the sync account hides those pages from
everyone in that same sync, and a grant the model cannot hold (Browse for each issue's
reporter) is left out alone while every other permission change still lands. Users reach
OpenFGA under the one identity of A14: a Data Center username with a space, a role named with
accents."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from rich.console import Console

from authz.client import OpenFGAClient
from authz.gate import Gate
from core import ids
from core.models import REPORTER, Principal
from core.settings import JiraSettings, Settings
from devstack import stack
from devstack.atlassian.admin import Emulator
from devstack.atlassian.jira import SecurityLevel
from devstack.atlassian.runner import serving
from devstack.atlassian.site import Site, User
from navigator.store import Neo4jStore
from pipeline.raw_store import RawStore
from pipeline.sources.confluence_rest import ConfluenceRestSource
from pipeline.sources.jira_rest import JiraRestSource
from pipeline.sync import SyncReport, run_sync
from retrievers.fake_index import FakeSemanticIndex
from tests.integration.test_rest_sync import Clock

pytestmark = pytest.mark.timeout(600)
# The semantic index these syncs keep: a stand-in, since what is tested is who may see what (and
# that content is kept or purged), not retrieval; LightRAG's own sync is tested elsewhere.
INDEX = FakeSemanticIndex()

SYNC = "sync-bot"
JOHN = "john smith"  # a Data Center username with a space: an id only through ids.user_name
LOCKED = "200"  # the root of the subtree a restriction will take from the sync account
LOCKED_PAGES = [LOCKED, *(str(n) for n in range(201, 225))]  # 25 of the space's 40 pages
OPEN_PAGES = ["100", *(str(n) for n in range(300, 314))]
ROLE = "Développeurs"  # a role name outside [A-Za-z0-9._@-]


def company(clock: Clock) -> Site:
    """One space of 40 pages the sync account is granted, as an administrator grants a real one,
    and a Jira project whose scheme grants Browse to each issue's reporter."""
    site = Site(clock)
    for login in (SYNC, "alice", "bob", JOHN):
        site.add_user(User(login, login, login.title(), f"{login.replace(' ', '.')}@example.com", f"token-{login}", site_admin=login == SYNC))
    site.add_group("eng", {"alice", "bob", JOHN})
    site.add_group("leads", {"alice"})
    site.add_space("ENG", "Engineering", readers_users={SYNC}, readers_groups={"eng"})
    site.create_page("ENG", "Home", "<p>Welcome.</p>", page_id="100", by="alice")
    site.create_page("ENG", "Platform", "<p>The platform team's pages.</p>", page_id=LOCKED, by="alice")
    for n in range(201, 225):
        site.create_page("ENG", f"Platform note {n}", f"<p>Platform note number {n}.</p>", parent_id=LOCKED, page_id=str(n), by="alice")
    for n in range(300, 314):
        site.create_page("ENG", f"Runbook {n}", f"<p>Runbook step {n}.</p>", page_id=str(n), by="bob")

    jira = site.jira
    jira.add_project("OPS", "Operations", lead="alice", roles={ROLE: ({"bob"}, set())})
    jira.set_browse("OPS", users={SYNC}, groups={"eng"}, reporter=True)
    jira.add_level("OPS", SecurityLevel("10100", "Internal", users={SYNC}, roles={ROLE}, reporter=True))
    jira.create_issue("OPS", "Task", "Rotate the on-call pager", by=JOHN, description="Rotate weekly.", key="OPS-1", security_level="10100")
    jira.create_issue("OPS", "Task", "Order spare disks", by="alice", description="Two per rack.", key="OPS-2")
    return site


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Settings, Site]]:
    site = company(Clock())
    base = tmp_path_factory.mktemp("revocation")
    with serving(Emulator(site, "admin-token-for-revocation-tests")) as url:
        settings = Settings(
            data_dir=base / "run",
            openfga={"http_port": 29470, "grpc_port": 29471, "datastore": "memory", "store_name": "wayfinder-revocation-test"},
            neo4j={"bolt_port": 29477, "password": "wayfinder-test-password"},
            lightrag={"workspace": "revocation"},
            confluence={"url": url + "/confluence", "username": SYNC, "token": f"token-{SYNC}", "spaces": ["ENG"]},
            jira={"url": url + "/jira", "username": SYNC, "token": f"token-{SYNC}", "projects": ["OPS"]},
        )
        stack.up(settings, only={"openfga", "neo4j"})
        try:
            yield settings, site
        finally:
            stack.down(settings, only={"openfga", "neo4j"})


async def sync(settings: Settings) -> SyncReport:
    source = ConfluenceRestSource(settings.confluence, settings.confluence.url or "")
    jira = JiraRestSource(settings.jira, settings.jira.url or "")
    async with RawStore.for_settings(settings) as store:
        return await run_sync(settings, source, store, Console(quiet=True), jira=jira, open_index=lambda _settings, _usage: INDEX)


async def visible(settings: Settings, user: str, *objects: str) -> set[str]:
    async with OpenFGAClient(settings.openfga) as fga:
        return await Gate(fga, Principal(user=ids.user_name(user))).visible(objects)


def pages(*page_ids: str) -> list[str]:
    return [f"page:{p}" for p in page_ids]


async def test_the_first_sync_reads_what_the_sync_account_is_granted(own):
    settings, _ = own
    report = await sync(settings)
    assert sorted(report.added) == sorted(OPEN_PAGES + LOCKED_PAGES) and report.failed == {} and report.vanished == []
    assert await visible(settings, "alice", *pages(*LOCKED_PAGES, "300")) == set(pages(*LOCKED_PAGES, "300"))
    # john reported OPS-1, on a level that admits its reporter: he sees it under the id every entry gives him
    assert await visible(settings, JOHN, "issue:OPS-1", "issue:OPS-2") == {"issue:OPS-1", "issue:OPS-2"}
    assert await visible(settings, "bob", "issue:OPS-1") == {"issue:OPS-1"}  # through the accented role
    assert await visible(settings, ids.user_name(JOHN), "issue:OPS-1") == set()  # a user named like john's id is not john


async def test_a_grant_the_model_cannot_hold_is_reported_and_every_other_change_still_lands(own):
    settings, site = own
    report = await sync(settings)
    refused = [(r.object, r.subject) for r in report.sinks.refused]
    assert refused == [("project:OPS", REPORTER)]  # Browse for each issue's reporter: left out, named
    site.jira.set_role_members("OPS", ROLE, users=set(), groups=set())  # bob leaves the role ...
    site.set_read_restrictions("300", users={SYNC, "alice"}, groups=set())  # ... and loses a runbook, both in one sync
    report = await sync(settings)
    assert [(r.object, r.subject) for r in report.sinks.refused] == [("project:OPS", REPORTER)]
    assert await visible(settings, "bob", "issue:OPS-1", "page:300", "page:301") == {"page:301"}
    assert await visible(settings, "alice", "page:300") == {"page:300"}


async def test_a_restriction_that_hides_most_of_a_space_from_the_sync_account_hides_it_from_everyone_in_that_sync(own):
    settings, site = own
    site.set_read_restrictions(LOCKED, users=set(), groups={"leads"})  # without the sync account: 25 of 40 pages vanish
    site.remove_member("eng", "bob")  # and, in the same sync, a change everywhere else
    report = await sync(settings)
    assert sorted(report.vanished) == sorted(LOCKED_PAGES) and report.deleted == []
    assert await visible(settings, "alice", *pages(*LOCKED_PAGES)) == set()  # alice is a lead: Confluence shows her; Wayfinder cannot know what
    assert await visible(settings, "alice", "page:100") == {"page:100"}
    assert await visible(settings, "bob", *pages(*OPEN_PAGES)) == set()  # the other change was not held up
    async with RawStore.for_settings(settings) as store:
        kept = {p.page_id: p for p in await store.pages("ENG")}
    assert all(kept[p].vanished and kept[p].markdown for p in LOCKED_PAGES)  # content kept until a purge is allowed
    async with Neo4jStore(settings.neo4j) as store:
        assert set(pages(*LOCKED_PAGES)) <= set((await store.summaries(pages(*LOCKED_PAGES))))
    assert set(pages(*LOCKED_PAGES)) <= set(INDEX.docs)

    purge = settings.model_copy(update={"confluence": settings.confluence.model_copy(update={"max_deleted_share": 1.0})})
    report = await sync(purge)  # the operator allows the purge for one run
    assert sorted(report.deleted) == sorted(LOCKED_PAGES) and report.vanished == []
    async with RawStore.for_settings(settings) as store:
        assert {p.page_id for p in await store.pages("ENG")} == set(OPEN_PAGES)
    assert not set(pages(*LOCKED_PAGES)) & set(INDEX.docs)
