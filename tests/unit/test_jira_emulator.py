"""The Jira half of the emulator over real HTTP, through atlassian-python-api (Data Center v2 and
Cloud v3 clients) and plain requests, on the HIVE project seeded from the wiki's issue keys."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
import requests
from atlassian import Jira
from requests import HTTPError

from devstack.atlassian.hive import SYNC_LOGIN, TOKENS, account_id
from devstack.atlassian.hive_jira import FIRST_EPIC, FIRST_STEPS, INTERNAL_LEVEL, SECURITY_LEVEL
from tests.emulated import ADMIN, admin, served_hive


@pytest.fixture(scope="module")
async def site():
    async for served in served_hive(jira=True):
        yield served


def client(url: str, login: str, *, cloud: bool = False) -> Jira:
    return Jira(url=url, username=login, password=TOKENS[login], cloud=cloud)


def every_key_v2(url: str, login: str, jql: str, limit: int = 100) -> list[str]:
    keys, start = [], 0
    while True:
        page = client(url + "/jira", login).jql(jql, fields="summary", start=start, limit=limit)
        keys += [issue["key"] for issue in page["issues"]]
        start += limit
        if start >= page["total"]:
            return keys


def every_key_v3(url: str, login: str, jql: str) -> list[str]:
    keys, token = [], None
    while True:
        page = client(url, login, cloud=True).enhanced_jql(jql, fields="summary", nextPageToken=token, limit=100)
        keys += [issue["key"] for issue in page["issues"]]
        token = page.get("nextPageToken")
        if page["isLast"]:
            assert token is None
            return keys


def raw(url: str, login: str, path: str, **params) -> requests.Response:
    return requests.get(f"{url}{path}", params=params, auth=(login, TOKENS[login]), timeout=10)


async def test_both_search_apis_page_through_what_each_user_may_see(site):
    jira = site.emulator.site.jira
    everything = every_key_v2(site.url, SYNC_LOGIN, "project = HIVE ORDER BY key ASC")
    assert len(everything) == len(set(everything)) == len(jira.issues)
    assert every_key_v3(site.url, SYNC_LOGIN, "project = HIVE ORDER BY key ASC") == everything
    users = {name: site.emulator.site.users[account_id(name)] for name in ("alice", "bob", "carol")}
    for name, user in users.items():
        expected = sorted((i.key for i in jira.visible_issues(user)), key=lambda k: int(k.split("-")[1]))
        assert every_key_v2(site.url, name, "project = HIVE ORDER BY key ASC") == expected
    secured = {i.key for i in jira.issues.values() if jira.level_of(i) is not None and jira.level_of(i).id == SECURITY_LEVEL}
    internal = {i.key for i in jira.issues.values() if jira.level_of(i) is not None and jira.level_of(i).id == INTERNAL_LEVEL}
    assert secured and internal
    bob, carol = set(every_key_v3(site.url, "bob", "project = HIVE")), set(every_key_v3(site.url, "carol", "project = HIVE"))
    assert not secured & bob and internal <= bob and not (secured | internal) & carol
    assert secured <= set(every_key_v3(site.url, "alice", "project = HIVE"))


async def test_a_hidden_issue_is_a_not_found_like_a_missing_one(site):
    jira = site.emulator.site.jira
    secured = next(i.key for i in jira.issues.values() if i.security_level == SECURITY_LEVEL)
    hidden, missing = raw(site.url, "bob", f"/rest/api/2/issue/{secured}"), raw(site.url, "bob", "/rest/api/2/issue/HIVE-99999999")
    assert hidden.status_code == missing.status_code == 404 and hidden.json() == missing.json()
    assert client(site.url, "alice").issue(secured, fields="summary")["key"] == secured
    assert raw(site.url, "bob", "/rest/api/2/issue/HIVE-3056").status_code == 200
    assert raw(site.url, "bob", "/jira/rest/api/2/issue/HIVE-3056").json()["key"] == "HIVE-3056"  # a Data Center context path


async def test_jql_filters_orders_and_reads_dates_in_the_callers_zone(site):
    jira = site.emulator.site.jira
    epics = every_key_v2(site.url, SYNC_LOGIN, "project = HIVE AND issuetype = Epic ORDER BY key ASC")
    assert epics[0] == f"HIVE-{FIRST_EPIC}" and all(jira.issues[k].issue_type == "Epic" for k in epics)
    story = f"HIVE-{FIRST_STEPS}"
    assert every_key_v2(site.url, SYNC_LOGIN, f"parent = {story} ORDER BY key ASC") == [s.key for s in jira.subtasks(story)]
    assert sorted(every_key_v2(site.url, SYNC_LOGIN, "key in (HIVE-3056, HIVE-3443)")) == ["HIVE-3056", "HIVE-3443"]
    assert "HIVE-3056" in every_key_v2(site.url, SYNC_LOGIN, 'text ~ "metatool"')
    # the sync account's zone is Los Angeles: a bare date there is 08:00 UTC the same day
    zone = ZoneInfo(site.emulator.site.users[account_id(SYNC_LOGIN)].time_zone)
    since = datetime(2020, 1, 1, tzinfo=zone)
    found = client(site.url + "/jira", SYNC_LOGIN).jql('project = HIVE AND updated >= "2020/01/01" ORDER BY updated ASC', fields="updated", limit=100)
    assert found["total"] == sum(1 for i in jira.issues.values() if i.updated.replace(second=0, microsecond=0) >= since)
    times = [issue["fields"]["updated"] for issue in found["issues"]]
    assert times == sorted(times)
    for bad in ("project = NOPE", "nonsense = 1", "updated >= yesterday", "project = HIVE ORDER BY nothing"):
        response = raw(site.url, SYNC_LOGIN, "/jira/rest/api/2/search", jql=bad)
        assert response.status_code == 400 and response.json()["errorMessages"][0].startswith("Error in the JQL Query"), bad


async def test_an_issue_carries_its_hierarchy_links_and_text_in_both_versions(site):
    jira = site.emulator.site.jira
    story = f"HIVE-{FIRST_STEPS}"
    v2 = client(site.url, SYNC_LOGIN).issue(story)
    fields = v2["fields"]
    assert fields["issuetype"]["name"] == "Story" and fields["issuetype"]["hierarchyLevel"] == 0
    assert fields["parent"]["key"] == jira.issues[story].parent_key and fields["parent"]["fields"]["issuetype"]["name"] == "Epic"
    assert [s["key"] for s in fields["subtasks"]] == [s.key for s in jira.subtasks(story)]
    assert isinstance(fields["description"], str) and "[" in fields["description"]  # wiki markup
    v3 = raw(site.url, SYNC_LOGIN, f"/rest/api/3/issue/{story}").json()
    assert v3["fields"]["description"]["type"] == "doc"
    only = client(site.url, SYNC_LOGIN).issue("HIVE-3056", fields="summary,labels")
    assert set(only["fields"]) == {"summary", "labels"}
    linked = next(i for i in jira.issues.values() if i.links)
    shown = client(site.url, SYNC_LOGIN).issue(linked.key, fields="issuelinks")["fields"]["issuelinks"]
    assert {link.get("outwardIssue", link.get("inwardIssue"))["key"] for link in shown} >= {target for _, target in linked.links}


async def test_links_to_issues_the_caller_cannot_see_are_left_out(site):
    jira = site.emulator.site.jira
    alice = site.emulator.site.users[account_id("alice")]
    bob = site.emulator.site.users[account_id("bob")]
    jira.link("Relates", "HIVE-3056", next(i.key for i in jira.issues.values() if i.security_level == SECURITY_LEVEL))
    try:
        assert jira.readable(bob, jira.issues["HIVE-3056"]) and jira.readable(alice, jira.issues["HIVE-3056"])
        seen = {name: raw(site.url, name, "/rest/api/2/issue/HIVE-3056", fields="issuelinks").json()["fields"]["issuelinks"] for name in ("alice", "bob")}
        assert len(seen["alice"]) == len(seen["bob"]) + 1
    finally:
        jira.issues["HIVE-3056"].links.pop()


async def test_roles_schemes_and_level_members_for_an_administrator_only(site):
    admin = client(site.url, SYNC_LOGIN)
    roles = admin.get_project_roles("HIVE")
    assert set(roles) == {"Developers", "Committers"}
    committers = requests.get(roles["Committers"], auth=(SYNC_LOGIN, TOKENS[SYNC_LOGIN]), timeout=10).json()
    # At the root the site is Cloud: a user actor carries its account id alone (Data Center adds its username as name).
    assert [a.get("name") or a["actorUser"]["accountId"] for a in committers["actors"]] == [account_id(SYNC_LOGIN), "hive-committers"]
    scheme = raw(site.url, SYNC_LOGIN, "/rest/api/2/project/HIVE/permissionscheme", expand="permissions").json()
    assert [p["holder"]["type"] for p in scheme["permissions"] if p["permission"] == "BROWSE_PROJECTS"] == ["anyone"]
    levels = raw(site.url, SYNC_LOGIN, "/rest/api/2/project/HIVE/issuesecuritylevelscheme").json()
    assert {level["name"] for level in levels["levels"]} == {"Security", "Internal"}
    members = raw(site.url, SYNC_LOGIN, "/rest/api/3/issuesecurityschemes/level/member", schemeId=levels["id"]).json()["values"]
    assert {(m["issueSecurityLevelId"], m["holder"]["type"]) for m in members} == {
        (SECURITY_LEVEL, "projectRole"), (INTERNAL_LEVEL, "projectRole"), (INTERNAL_LEVEL, "reporter"),
        (SECURITY_LEVEL, "user"), (INTERNAL_LEVEL, "user"),  # the sync account, named in each level
    }
    assert raw(site.url, "bob", "/rest/api/2/project/HIVE/permissionscheme").status_code == 404
    assert raw(site.url, "bob", "/rest/api/3/issuesecurityschemes/level/member").status_code == 403
    with pytest.raises(HTTPError):
        client(site.url, "carol").get_project_permission_scheme("HIVE")


async def test_changes_through_the_admin_api_and_what_moves_updated(site):
    jira = site.emulator.site.jira
    story = jira.issues["HIVE-3443"]
    before = raw(site.url, SYNC_LOGIN, "/rest/api/2/issue/HIVE-3443", fields="updated,parent,security").json()["fields"]
    other_epic = next(k for k in jira.issues if jira.issues[k].issue_type == "Epic" and k != story.parent_key and jira.issues[k].security_level is None)
    site.clock.now = site.clock.now.replace(year=2026, month=4)
    admin(site.url, "POST", "/jira/issues/HIVE-3443/move", {"parent": other_epic})
    admin(site.url, "PUT", "/jira/issues/HIVE-3443/security", {"security_level": INTERNAL_LEVEL})
    after = raw(site.url, SYNC_LOGIN, "/rest/api/2/issue/HIVE-3443", fields="updated,parent,security").json()["fields"]
    assert after["parent"]["key"] == other_epic and after["security"]["id"] == INTERNAL_LEVEL and after["updated"] > before["updated"]
    assert raw(site.url, "carol", "/rest/api/2/issue/HIVE-3443").status_code == 404
    assert raw(site.url, "bob", "/rest/api/2/issue/HIVE-3443").status_code == 200  # a developer
    admin(site.url, "PUT", "/jira/projects/HIVE/roles/Developers", {"groups": ["hive-committers"]})
    try:
        assert raw(site.url, "bob", "/rest/api/2/issue/HIVE-3443").status_code == 404  # no longer a developer
        assert raw(site.url, SYNC_LOGIN, "/rest/api/2/issue/HIVE-3443", fields="updated").json()["fields"]["updated"] == after["updated"]
    finally:
        admin(site.url, "PUT", "/jira/projects/HIVE/roles/Developers", {"groups": ["hive-users", "hive-committers"]})
    gone = admin(site.url, "DELETE", f"/jira/issues/HIVE-{FIRST_STEPS}")["deleted"]
    assert len(gone) > 1 and all(raw(site.url, SYNC_LOGIN, f"/rest/api/2/issue/{key}").status_code == 404 for key in gone)
    response = requests.post(f"{site.url}/_emulator/jira/issues/HIVE-3056/move", json={"parent": "HIVE-3443"}, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10)
    assert response.status_code == 400 and "cannot sit under" in response.json()["error"]


async def test_an_issue_repeats_no_wiki_text_its_readers_may_not_read(site):
    """The seed quotes a restricted page only in issues no wider than the page: design documents
    only on Security, the page restricted to bob nowhere."""
    from devstack.atlassian.hive import DESIGN_DOCS_PAGE, SINGLE_USER_PAGE
    from devstack.atlassian.export import page_url

    state = site.emulator.site
    design = {DESIGN_DOCS_PAGE, *(p.id for p in state.descendants(DESIGN_DOCS_PAGE))}
    quoted_design = 0
    for issue in state.jira.issues.values():
        text = " ".join([issue.description, *(c.body for c in issue.comments)])
        assert page_url(SINGLE_USER_PAGE) not in text, issue.key
        cited = {page for page in design if page_url(page) + "]" in text}
        if issue.security_level != SECURITY_LEVEL:
            assert not cited, issue.key
        quoted_design += bool(cited)
    assert quoted_design > 20  # the control: Security issues do quote the design documents
