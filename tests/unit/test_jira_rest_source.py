"""The Jira source against the emulator over real HTTP, as a Cloud site (v3 search with
nextPageToken, ADF) and as a Data Center one (v2 search with startAt, wiki markup)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.errors import ConfigurationError, SourceError
from core.models import ASSIGNEE, REPORTER
from core.settings import JiraSettings
from devstack.atlassian.hive import SYNC_LOGIN, TOKENS, account_id
from devstack.atlassian.hive_jira import FIRST_STEPS, INTERNAL_LEVEL, SECURITY_LEVEL
from pipeline.sources.jira_rest import JiraRestSource
from pipeline.transform.jira import to_markdown
from tests.emulated import admin, served_hive


@pytest.fixture(scope="module")
async def site():
    async for served in served_hive(jira=True):
        yield served


def source(url: str, *, cloud: bool, **settings) -> JiraRestSource:
    options = {"page_size": 100, **settings}
    return JiraRestSource(JiraSettings(deployment="cloud" if cloud else "datacenter", username=SYNC_LOGIN, token=TOKENS[SYNC_LOGIN], **options), url + ("" if cloud else "/jira"))


@pytest.mark.parametrize("cloud", [True, False])
async def test_the_listing_is_every_issue_with_its_place_and_level(site, cloud):
    jira = site.emulator.site.jira
    listed = await source(site.url, cloud=cloud).list_issues("HIVE")
    assert len(listed) == len({i.key for i in listed}) == len(jira.issues)
    by_key = {i.key: i for i in listed}
    story = f"HIVE-{FIRST_STEPS}"
    assert by_key[story].hierarchy_level == 0 and by_key[story].parent_key == jira.issues[story].parent_key
    assert {s.key for s in jira.subtasks(story)} == {k for k, i in by_key.items() if i.parent_key == story and i.hierarchy_level == -1}
    secured = {k for k, i in by_key.items() if i.security_level == SECURITY_LEVEL}
    assert secured == {i.key for i in jira.issues.values() if jira.level_of(i) and jira.level_of(i).id == SECURITY_LEVEL}
    assert all(i.description is None for i in listed)  # no text in a listing


@pytest.mark.parametrize("cloud", [True, False])
async def test_changed_issues_come_oldest_first_with_their_text_as_sent(site, cloud):
    rest = source(site.url, cloud=cloud)
    everything = [i for batch in [b async for b in rest.changed_issues("HIVE", None)] for i in batch]
    assert len(everything) == len(site.emulator.site.jira.issues)
    assert [i.updated for i in everything] == sorted(i.updated for i in everything)
    metatool = next(i for i in everything if i.key == "HIVE-3056")
    assert isinstance(metatool.description, dict if cloud else str)  # ADF from Cloud, wiki markup from Data Center
    markdown = to_markdown(metatool.description)
    assert markdown.startswith("From [Hive MetaTool](https://") and "> See HIVE-3056 and HIVE-3443." in markdown
    commented = next(i for i in everything if i.comments and not i.comments[0].visibility)
    assert to_markdown(commented.comments[0].body).startswith("Also cited in [")
    linked = next(i for i in everything if i.links)
    assert all(direction in ("outward", "inward") for _, direction, _ in linked.links)


async def test_only_what_changed_since_the_watermark_in_the_accounts_zone(site):
    rest = source(site.url, cloud=True)
    watermark = site.clock.now
    site.clock.now += timedelta(minutes=3)
    admin(site.url, "PUT", "/jira/issues/HIVE-3443", {"by": "alice", "description": "h2. Now\n\nNew *text*."})
    changed = [i for batch in [b async for b in rest.changed_issues("HIVE", watermark)] for i in batch]
    assert [i.key for i in changed] == ["HIVE-3443"]
    assert to_markdown(changed[0].description).startswith("## Now\n\nNew *text*.")
    assert await rest.jql_time(watermark) != watermark.strftime("%Y-%m-%d %H:%M")  # the sync account is not on UTC


@pytest.mark.parametrize("cloud", [True, False])
async def test_permissions_in_openfga_spelling(site, cloud):
    rest = source(site.url, cloud=cloud)
    permissions = await rest.permissions("HIVE")
    assert permissions.project_browsers == {"HIVE": ("user:*",)}
    sync = "user:" + (account_id(SYNC_LOGIN) if cloud else SYNC_LOGIN)
    assert permissions.role_members == {
        "HIVE.Committers": tuple(sorted(("group:x-jira-hive-committers#member", sync))),
        "HIVE.Developers": ("group:x-jira-hive-committers#member", "group:x-jira-hive-users#member"),
    }
    assert permissions.level_members == {
        SECURITY_LEVEL: tuple(sorted(("project_role:HIVE.Committers#member", sync))),
        INTERNAL_LEVEL: tuple(sorted(("project_role:HIVE.Developers#member", REPORTER, sync))),
    }
    alice = "user:" + (account_id("alice") if cloud else "alice")
    assert permissions.group_members["x-jira-hive-committers"] == (alice,)  # apart from Confluence's group of that name
    assert ASSIGNEE not in permissions.level_members[INTERNAL_LEVEL]


async def test_transient_failures_are_retried_and_refusals_are_clear(site):
    waits: list[float] = []
    rest = JiraRestSource(JiraSettings(token=TOKENS[SYNC_LOGIN], page_size=100), site.url + "/jira", sleep=waits.append)
    admin(site.url, "POST", "/faults", {"kind": "429", "path": "/rest/api/2/search", "times": 1, "retry_after_s": 5})
    admin(site.url, "POST", "/faults", {"kind": "drop", "path": "/rest/api/2/search", "times": 1})
    assert len(await rest.list_issues("HIVE")) == len(site.emulator.site.jira.issues)
    assert waits[0] == 5 and len(waits) == 2
    with pytest.raises(SourceError, match="Jira refused the sync account \\(401\\).*WAYFINDER_JIRA__TOKEN"):
        await JiraRestSource(JiraSettings(deployment="datacenter", username="alice", token="wrong"), site.url + "/jira").project("HIVE")
    with pytest.raises(SourceError, match="may not browse it"):
        await source(site.url, cloud=False).project("NOPE")
    with pytest.raises(SourceError, match="permission scheme"):
        await JiraRestSource(JiraSettings(username="bob", token=TOKENS["bob"]), site.url + "/jira").permissions("HIVE")
    with pytest.raises(ConfigurationError, match="TOKEN is required"):
        JiraRestSource(JiraSettings(), site.url)


async def test_an_issue_without_its_security_field_is_open_only_where_the_project_has_no_levels(site):
    rest = source(site.url, cloud=False)
    bare = {"key": "HIVE-1", "fields": {"issuetype": {"name": "Story", "hierarchyLevel": 0}, "updated": "2024-01-01T00:00:00.000+0000"}}
    with pytest.raises(SourceError, match="without security"):
        rest._issue(bare)  # nothing known of the project's levels yet
    await rest.permissions("HIVE")  # HIVE has levels: a missing field is still refused
    with pytest.raises(SourceError, match="without security"):
        rest._issue(bare)
    rest._without_levels.add("HIVE")  # as if its permissions had shown no levels
    assert rest._issue(bare).security_level is None


@pytest.mark.parametrize("cloud", [True, False])
async def test_a_user_is_found_by_e_mail_address_whatever_its_case(site, cloud):
    rest = source(site.url, cloud=cloud)
    expected = account_id("bob") if cloud else "bob"
    assert await rest.user_by_email("Bob@Example.COM") == expected
    assert await rest.user_by_email("bob@example.org") is None  # another domain: nobody
    assert await rest.user_by_email("bob") is None  # a prefix finds users, but only the address names one
