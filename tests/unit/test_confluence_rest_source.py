"""ConfluenceRestSource against the emulator over real HTTP: Cloud, Data Center 9.1+ and Data
Center 8.x (each read where that deployment answers it, the deployment asked from the site),
paging, the time-zone trap, retries under injected faults, and clear errors."""

from __future__ import annotations

from datetime import timedelta

import pytest
import requests

from core.errors import ConfigurationError, SourceError
from core.settings import ConfluenceSettings, JiraSettings
from devstack.atlassian.hive import SYNC_LOGIN, TOKENS, account_id
from pipeline.sources.confluence_rest import ConfluenceRestSource
from devstack.atlassian.export import DESIGN_DOCS_PAGE, SINGLE_USER_PAGE, HiveExportSource
from tests.conftest import CORPUS
from devstack.atlassian.admin import Emulator
from devstack.atlassian.runner import serving
from tests.emulated import ADMIN, admin, served_hive, serving_release

HOME = "27362069"
DEPLOYMENTS = ["cloud", "datacenter-9", "datacenter-8"]


@pytest.fixture(scope="module")
async def site():
    async for served in served_hive():
        with serving_release(served, "8.9.0") as release_8:
            yield served.url, served.emulator, served.clock, release_8


def source(site, deployment: str | None, *, detect: bool = False, **overrides) -> ConfluenceRestSource:
    """A source of the site's ``deployment`` face; ``detect``: leave it for the source to find out."""
    url, _, _, release_8 = site
    settings = ConfluenceSettings(
        deployment=None if detect else deployment, username=SYNC_LOGIN, token=TOKENS[SYNC_LOGIN], page_size=overrides.pop("page_size", 50), **overrides
    )
    root = {"cloud": url + "/wiki", "datacenter-9": url + "/confluence", "datacenter-8": release_8 + "/confluence"}[deployment or "datacenter-9"]
    return ConfluenceRestSource(settings, root, sleep=lambda seconds: None)


def named(deployment: str, login: str) -> str:
    return account_id(login) if deployment == "cloud" else login


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
async def test_the_listing_is_the_space_tree(site, deployment):
    listed = {page.page_id: page for page in await source(site, deployment).list_pages("HIVE")}
    exported = {page.page_id: page for page in await HiveExportSource(CORPUS).pages("HIVE")}
    assert set(listed) == set(exported)
    assert all(listed[i].parent_id == exported[i].parent_id and listed[i].position == exported[i].position for i in exported)
    assert all(page.storage is None for page in listed.values())  # a listing carries no bodies
    assert listed[DESIGN_DOCS_PAGE].read_groups == ("hive-committers",)
    assert set(listed[SINGLE_USER_PAGE].read_users) == {named(deployment, "bob"), named(deployment, SYNC_LOGIN)}  # the sync account reads it because it is named


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
async def test_space_readers_and_group_members(site, deployment):
    rest = source(site, deployment)
    space = await rest.space("HIVE")
    assert space.reader_groups == ("hive-committers", "hive-users") and space.reader_users == (named(deployment, SYNC_LOGIN),)
    assert await rest.group_members("hive-committers") == [named(deployment, "alice")]
    with pytest.raises(SourceError, match="no space 'NOPE'"):
        await rest.space("NOPE")


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
async def test_the_deployment_is_asked_from_the_site(site, deployment):
    rest = source(site, deployment, detect=True)
    assert await rest.deployment() == deployment
    assert (await rest.space("HIVE")).reader_groups == ("hive-committers", "hive-users")


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
async def test_one_page_by_id_is_the_page_the_search_lists(site, deployment):
    rest = source(site, deployment)
    listed = {page.page_id: page for batch in [b async for b in rest.changed_pages("HIVE", None)] for page in batch}
    for page_id in (HOME, DESIGN_DOCS_PAGE, SINGLE_USER_PAGE, next(p.page_id for p in listed.values() if p.labels)):
        assert await rest.page(page_id) == listed[page_id]
    assert await rest.page("999999999") is None


async def test_cloud_is_read_without_one_removed_v1_call(site):
    """Every read a sync makes, against the Cloud face: none reaches a v1 read Atlassian removed."""
    _, emulator, _, _ = site
    emulator.removed.clear()
    rest = source(site, "cloud", detect=True)
    await rest.space("HIVE")
    pages = [page for batch in [b async for b in rest.changed_pages("HIVE", None)] for page in batch]
    await rest.list_pages("HIVE")
    await rest.page(DESIGN_DOCS_PAGE)
    for group in ("hive-committers", "hive-users", "hive-reviewers"):
        await rest.group_members(group)
    attachment = next(iter(emulator.site.attachments.values()))
    await rest.attachments(attachment.page_id)
    await rest.cql_time(pages[0].last_modified)
    assert rest.cloud and dict(emulator.removed) == {}


async def test_the_v1_reads_cloud_removed_answer_410(site):
    """What the Cloud path read before v2 (space permissions by key, a page by id, its attachments,
    group members by name) is gone there: the old path would stop at its first call."""
    url, emulator, _, _ = site
    emulator.removed.clear()
    auth = (SYNC_LOGIN, TOKENS[SYNC_LOGIN])
    for path in (
        "/rest/api/space/HIVE?expand=permissions", f"/rest/api/content/{HOME}?expand=body.storage", f"/rest/api/content/{HOME}/child/attachment",
        "/rest/api/group/member?name=hive-committers", "/rest/api/group/hive-committers/member",
    ):
        answer = requests.get(url + "/wiki" + path, auth=auth, timeout=10)
        assert answer.status_code == 410 and "GoneException" in answer.json()["message"], path
    assert sum(emulator.removed.values()) == 5
    for path in ("/rest/api/space/HIVE", f"/rest/api/content/{HOME}", f"/rest/api/content/{HOME}/child/attachment", "/rest/api/group/hive-committers/member"):
        assert requests.get(url + "/confluence" + path, auth=auth, timeout=10).status_code == 200, path  # Data Center keeps them
    # What Cloud keeps stays: CQL search, restrictions, the current user.
    for path in (f"/rest/api/content/search?cql=id={HOME}", f"/rest/api/content/{HOME}/restriction/byOperation/read", "/rest/api/user/current"):
        assert requests.get(url + "/wiki" + path, auth=auth, timeout=10).status_code == 200, path


async def test_data_center_releases_list_space_permissions_where_they_can(site):
    """9.1 and later over REST, before 9.0 over JSON-RPC only; 9.0 has neither, and says so."""
    url, _, _, release_8 = site
    auth = (SYNC_LOGIN, TOKENS[SYNC_LOGIN])
    assert requests.get(url + "/confluence/rest/api/space/HIVE/permissions", auth=auth, timeout=10).status_code == 200
    assert requests.get(release_8 + "/confluence/rest/api/space/HIVE/permissions", auth=auth, timeout=10).status_code == 404
    rpc = "/confluence/rpc/json-rpc/confluenceservice-v2/getSpacePermissionSets"
    assert requests.post(url + rpc, json=["HIVE"], auth=auth, timeout=10).status_code in (404, 405)
    assert requests.post(release_8 + rpc, json=["HIVE"], auth=auth, timeout=10).json()[0]["type"] == "VIEWSPACE"
    space = requests.get(url + "/confluence/rest/api/space/HIVE?expand=permissions", auth=auth, timeout=10).json()
    assert "permissions" not in space  # no Data Center release lists them there
    _, emulator, _, _ = site
    with serving(Emulator(emulator.site, ADMIN, data_center="9.0.1")) as nine_oh:
        rest = ConfluenceRestSource(ConfluenceSettings(username=SYNC_LOGIN, token=TOKENS[SYNC_LOGIN]), nine_oh + "/confluence")
        with pytest.raises(SourceError, match="9.0 lists space permissions neither.*upgrade"):
            await rest.deployment()


async def test_changed_pages_come_with_bodies_oldest_first_and_only_since_the_watermark(site):
    url, emulator, clock, _ = site
    rest = source(site, "cloud", page_size=40)
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
    url, _, _, _ = site
    waits: list[float] = []
    settings = ConfluenceSettings(deployment="datacenter-9", username=SYNC_LOGIN, token=TOKENS[SYNC_LOGIN], page_size=100)
    rest = ConfluenceRestSource(settings, url + "/confluence", sleep=waits.append)
    admin(url, "POST", "/faults", {"kind": "429", "path": "/content/search", "times": 2, "retry_after_s": 7})
    admin(url, "POST", "/faults", {"kind": "drop", "path": "/content/search", "times": 1})
    admin(url, "POST", "/faults", {"kind": "503", "path": "/content/search", "times": 1})
    assert len(await rest.list_pages("HIVE")) == 305
    assert waits[:2] == [7, 7] and len(waits) == 4  # two Retry-After waits, then backoff for the drop and the 503
    assert rest.calls == 4 + 4  # four pages of listing, four failed attempts


async def test_a_site_that_keeps_failing_is_a_clear_error(site):
    url = site[0]
    rest = source(site, "datacenter-9", max_attempts=3)
    admin(url, "POST", "/faults", {"kind": "500", "path": "/space/HIVE", "times": 3})
    with pytest.raises(SourceError, match="did not answer after 3 attempts.*HTTP 500"):
        await rest.space("HIVE")


async def test_refused_credentials_name_the_settings(site):
    url, _, _, _ = site
    settings = ConfluenceSettings(deployment="datacenter-9", username="alice", token="wrong")
    with pytest.raises(SourceError, match="refused the sync account \\(401\\).*WAYFINDER_CONFLUENCE__TOKEN"):
        await ConfluenceRestSource(settings, url + "/confluence").space("HIVE")
    with pytest.raises(ConfigurationError, match="TOKEN is required"):
        ConfluenceRestSource(ConfluenceSettings(), url)


async def test_bearer_tokens_for_data_center(site):
    url, _, _, _ = site
    settings = ConfluenceSettings(token=TOKENS[SYNC_LOGIN])
    assert (await ConfluenceRestSource(settings, url + "/confluence").space("HIVE")).name == "Apache Hive"


@pytest.mark.parametrize("deployment", ["cloud", "datacenter-9"])
async def test_attachments_download_through_their_links(site, deployment):
    _, emulator, _, _ = site
    attachment = next(iter(emulator.site.attachments.values()))
    rest = source(site, deployment)
    (listed,) = [a for a in await rest.attachments(attachment.page_id) if a.attachment_id == attachment.id]
    assert listed.filename == attachment.filename and listed.size == len(attachment.data)
    assert await rest.download(listed) == attachment.data


async def test_a_page_without_its_place_or_restrictions_is_refused_not_opened(site):
    rest = source(site, "datacenter-9")
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


def test_the_old_cloud_setting_is_refused_naming_its_new_name():
    with pytest.raises(ValueError, match="WAYFINDER_CONFLUENCE__CLOUD is now WAYFINDER_CONFLUENCE__DEPLOYMENT"):
        ConfluenceSettings(cloud=True)
    with pytest.raises(ValueError, match="WAYFINDER_JIRA__CLOUD is now WAYFINDER_JIRA__DEPLOYMENT"):
        JiraSettings(cloud=False)
