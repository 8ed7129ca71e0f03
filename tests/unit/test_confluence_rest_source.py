"""ConfluenceRestSource against the emulator over real HTTP: Cloud and Data Center, paging, the
time-zone trap, retries under injected faults, and clear errors."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.errors import ConfigurationError, SourceError
from core.settings import ConfluenceSettings
from devstack.atlassian.hive import SYNC_LOGIN, TOKENS, account_id
from pipeline.sources.confluence_rest import ConfluenceRestSource
from devstack.atlassian.export import DESIGN_DOCS_PAGE, SINGLE_USER_PAGE, HiveExportSource
from tests.conftest import CORPUS
from tests.emulated import admin, served_hive

HOME = "27362069"


@pytest.fixture(scope="module")
async def site():
    async for served in served_hive():
        yield served.url, served.emulator, served.clock


def source(url: str, *, cloud: bool, **overrides) -> ConfluenceRestSource:
    settings = ConfluenceSettings(
        cloud=cloud, username=SYNC_LOGIN, token=TOKENS[SYNC_LOGIN], page_size=overrides.pop("page_size", 50), **overrides
    )
    return ConfluenceRestSource(settings, url + ("/wiki" if cloud else "/confluence"), sleep=lambda seconds: None)


@pytest.mark.parametrize("cloud", [True, False])
async def test_the_listing_is_the_space_tree(site, cloud):
    url, _, _ = site
    listed = {page.page_id: page for page in await source(url, cloud=cloud).list_pages("HIVE")}
    exported = {page.page_id: page for page in await HiveExportSource(CORPUS).pages("HIVE")}
    assert set(listed) == set(exported)
    assert all(listed[i].parent_id == exported[i].parent_id and listed[i].position == exported[i].position for i in exported)
    assert all(page.storage is None for page in listed.values())  # a listing carries no bodies
    assert listed[DESIGN_DOCS_PAGE].read_groups == ("hive-committers",)
    bob, sync = (account_id("bob"), account_id(SYNC_LOGIN)) if cloud else ("bob", SYNC_LOGIN)
    assert set(listed[SINGLE_USER_PAGE].read_users) == {bob, sync}  # the sync account reads it because it is named


@pytest.mark.parametrize("cloud", [True, False])
async def test_space_readers_and_group_members(site, cloud):
    url, _, _ = site
    rest = source(url, cloud=cloud)
    space = await rest.space("HIVE")
    sync = account_id(SYNC_LOGIN) if cloud else SYNC_LOGIN
    assert space.reader_groups == ("hive-committers", "hive-users") and space.reader_users == (sync,)
    assert await rest.group_members("hive-committers") == [account_id("alice") if cloud else "alice"]
    with pytest.raises(SourceError, match="no space 'NOPE'"):
        await rest.space("NOPE")


async def test_changed_pages_come_with_bodies_oldest_first_and_only_since_the_watermark(site):
    url, emulator, clock = site
    rest = source(url, cloud=True, page_size=40)
    everything = [page for batch in [b async for b in rest.changed_pages("HIVE", None)] for page in batch]
    assert len(everything) == 305 and all(page.storage for page in everything)
    assert [p.last_modified for p in everything] == sorted(p.last_modified for p in everything)
    # An edit now, in a zone hours away from UTC: only that page is newer than the watermark.
    watermark = clock.now
    clock.now += timedelta(minutes=3)
    admin(url, "PUT", f"/pages/{HOME}", {"by": "alice", "body": "<p>new text</p>"})
    changed = [page for batch in [b async for b in rest.changed_pages("HIVE", watermark)] for page in batch]
    assert [page.page_id for page in changed] == [HOME] and changed[0].storage == "<p>new text</p>"
    assert await rest.cql_time(watermark) != watermark.strftime("%Y-%m-%d %H:%M")  # the sync account is not on UTC


async def test_transient_failures_are_retried_honouring_retry_after(site):
    url, _, _ = site
    waits: list[float] = []
    settings = ConfluenceSettings(cloud=False, username=SYNC_LOGIN, token=TOKENS[SYNC_LOGIN], page_size=100)
    rest = ConfluenceRestSource(settings, url + "/confluence", sleep=waits.append)
    admin(url, "POST", "/faults", {"kind": "429", "path": "/content/search", "times": 2, "retry_after_s": 7})
    admin(url, "POST", "/faults", {"kind": "drop", "path": "/content/search", "times": 1})
    admin(url, "POST", "/faults", {"kind": "503", "path": "/content/search", "times": 1})
    assert len(await rest.list_pages("HIVE")) == 305
    assert waits[:2] == [7, 7] and len(waits) == 4  # two Retry-After waits, then backoff for the drop and the 503
    assert rest.calls == 4 + 4  # four pages of listing, four failed attempts


async def test_a_site_that_keeps_failing_is_a_clear_error(site):
    url, _, _ = site
    rest = source(url, cloud=False, max_attempts=3)
    admin(url, "POST", "/faults", {"kind": "500", "path": "/space/HIVE", "times": 3})
    with pytest.raises(SourceError, match="did not answer after 3 attempts.*HTTP 500"):
        await rest.space("HIVE")


async def test_refused_credentials_name_the_settings(site):
    url, _, _ = site
    settings = ConfluenceSettings(cloud=False, username="alice", token="wrong")
    with pytest.raises(SourceError, match="refused the sync account \\(401\\).*WAYFINDER_CONFLUENCE__TOKEN"):
        await ConfluenceRestSource(settings, url + "/confluence").space("HIVE")
    with pytest.raises(ConfigurationError, match="TOKEN is required"):
        ConfluenceRestSource(ConfluenceSettings(), url)


async def test_bearer_tokens_for_data_center(site):
    url, _, _ = site
    settings = ConfluenceSettings(cloud=False, token=TOKENS[SYNC_LOGIN])
    assert (await ConfluenceRestSource(settings, url + "/confluence").space("HIVE")).name == "Apache Hive"


async def test_attachments_download_through_their_links(site):
    url, emulator, _ = site
    attachment = next(iter(emulator.site.attachments.values()))
    rest = source(url, cloud=True)
    (listed,) = [a for a in await rest.attachments(attachment.page_id) if a.attachment_id == attachment.id]
    assert listed.filename == attachment.filename and listed.size == len(attachment.data)
    assert await rest.download(listed) == attachment.data


async def test_a_page_without_its_place_or_restrictions_is_refused_not_opened(site):
    url, _, _ = site
    rest = source(url, cloud=False)
    whole = {
        "id": "1",
        "title": "T",
        "space": {"key": "HIVE"},
        "version": {"number": 1, "when": "2024-01-01T00:00:00.000Z"},
        "ancestors": [],
        "restrictions": {"read": {"restrictions": {"user": {"results": []}, "group": {"results": []}}}},
    }
    assert rest._page(whole).read_groups == ()
    for cut in ("ancestors", "restrictions"):
        with pytest.raises(SourceError, match=f"without {cut}.*refusing to guess"):
            rest._page({k: v for k, v in whole.items() if k != cut})
    no_groups = {**whole, "restrictions": {"read": {"restrictions": {"user": {"results": []}}}}}
    with pytest.raises(SourceError, match="restrictions.read.restrictions.group"):
        rest._page(no_groups)
