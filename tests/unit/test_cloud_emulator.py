"""The emulator's Cloud face against Atlassian's published shapes: Confluence REST v2 (spaces,
space permissions, pages, ancestors, children, attachments; cursors in ``_links.next`` from the
host's root), group reads by id, ``settings/systemInfo``, 410 for the v1 reads Cloud removed;
Jira Cloud's ``search/jql`` (ids by default, bounded JQL, the first 20 comments) and the comment
endpoint for the rest. Examples followed: developer.atlassian.com/cloud/confluence/rest/v2
("Get spaces", "Get space permissions assignments", "Get page by id", "Get all ancestors of page",
"Get attachments for page") and /cloud/jira/platform/rest/v3 ("Search for issues using JQL
enhanced search", "Get comments")."""

from __future__ import annotations

from urllib.parse import urljoin

import pytest
import requests

from core.settings import JiraSettings
from devstack.atlassian.hive import SYNC_LOGIN, TOKENS, account_id
from devstack.atlassian.export import DESIGN_DOCS_PAGE, SINGLE_USER_PAGE
from devstack.atlassian.wire import group_id
from pipeline.sources.jira_rest import JiraRestSource
from tests.emulated import admin, served_hive

HOME = "27362069"
THREAD = "HIVE-3056"  # gets a long comment thread below


@pytest.fixture(scope="module")
async def site():
    async for served in served_hive(jira=True):
        for n in range(30):  # a sixth of them restricted to the Developers role, which the sync account is not in
            visibility = {"type": "role", "value": "Developers"} if n % 5 == 0 else None
            admin(served.url, "POST", f"/jira/issues/{THREAD}/comments", {"by": "alice", "body": f"Note {n} on the metastore.", "visibility": visibility})
        yield served


def get(url: str, login: str = SYNC_LOGIN, **params) -> requests.Response:
    return requests.get(url, params=params, auth=(login, TOKENS[login]), timeout=10)


def every(url: str, first: str, login: str = SYNC_LOGIN, **params) -> list[dict]:
    """A v2 listing, following ``_links.next`` from the host's root, as Atlassian's examples show it."""
    body = get(url + first, login, **params).json()
    found = list(body["results"])
    while "next" in body["_links"]:
        assert body["_links"]["next"].startswith("/wiki/api/v2/") and body["_links"]["base"].endswith("/wiki")
        body = get(urljoin(body["_links"]["base"], body["_links"]["next"]), login).json()
        found += body["results"]
    return found


async def test_spaces_and_their_permissions_by_cursor(site):
    (space,) = every(site.url, "/wiki/api/v2/spaces", keys="HIVE")
    assert {"id", "key", "name", "type", "status", "homepageId", "_links"} <= set(space) and space["_links"]["webui"] == "/spaces/HIVE"
    assert get(f"{site.url}/wiki/api/v2/spaces/{space['id']}").json()["key"] == "HIVE"
    rows = every(site.url, f"/wiki/api/v2/spaces/{space['id']}/permissions", limit=1)
    assert all(row["operation"] == {"key": "read", "targetType": "space"} for row in rows)
    assert {(r["principal"]["type"], r["principal"]["id"]) for r in rows} == {
        ("user", account_id(SYNC_LOGIN)), ("group", group_id("hive-users")), ("group", group_id("hive-committers"))
    }
    assert every(site.url, "/wiki/api/v2/spaces", "carol", keys="HIVE") == []  # a space carol may not read is absent


async def test_a_page_with_its_body_labels_ancestors_children_and_attachments(site):
    page = get(f"{site.url}/wiki/api/v2/pages/{DESIGN_DOCS_PAGE}", **{"body-format": "storage", "include-labels": "true"}).json()
    assert page["title"] == "DesignDocs" and page["parentId"] is None and page["version"]["number"] >= 1
    assert page["body"]["storage"]["representation"] == "storage" and "<h1>" in page["body"]["storage"]["value"]
    assert [label["name"] for label in page["labels"]["results"]] == ["designdocs"]
    child = every(site.url, f"/wiki/api/v2/pages/{DESIGN_DOCS_PAGE}/direct-children")[0]
    grandchildren = every(site.url, f"/wiki/api/v2/pages/{child['id']}/direct-children")
    below = grandchildren[0]["id"] if grandchildren else child["id"]
    chain = get(f"{site.url}/wiki/api/v2/pages/{below}/ancestors").json()["results"]
    assert chain[0] == {"id": DESIGN_DOCS_PAGE, "type": "page"} and chain[-1]["id"] == (child["id"] if grandchildren else DESIGN_DOCS_PAGE)
    assert get(f"{site.url}/wiki/api/v2/pages/{below}/ancestors", limit=1).json()["results"] == chain[-1:]  # the nearest first
    attachment = next(iter(site.emulator.site.attachments.values()))
    (listed,) = [a for a in every(site.url, f"/wiki/api/v2/pages/{attachment.page_id}/attachments") if a["id"] == attachment.id]
    assert listed["fileSize"] == len(attachment.data) and listed["pageId"] == attachment.page_id
    base = get(f"{site.url}/wiki/api/v2/pages/{attachment.page_id}/attachments").json()["_links"]["base"]
    assert get(base + listed["downloadLink"]).content == attachment.data


async def test_a_hidden_page_answers_like_a_missing_one(site):
    hidden, missing = get(f"{site.url}/wiki/api/v2/pages/{SINGLE_USER_PAGE}", "alice"), get(f"{site.url}/wiki/api/v2/pages/999999999", "alice")
    assert hidden.status_code == missing.status_code == 404 and hidden.json() == missing.json()
    assert get(f"{site.url}/wiki/api/v2/pages/{SINGLE_USER_PAGE}", "bob").status_code == 200


async def test_groups_are_read_by_id(site):
    committers = group_id("hive-committers")
    assert get(f"{site.url}/wiki/rest/api/group/by-id", id=committers).json()["name"] == "hive-committers"
    members = get(f"{site.url}/wiki/rest/api/group/{committers}/membersByGroupId").json()
    assert [m["accountId"] for m in members["results"]] == [account_id("alice")]


async def test_only_cloud_answers_its_system_info(site):
    assert get(f"{site.url}/wiki/rest/api/settings/systemInfo").json()["cloudId"]
    assert get(f"{site.url}/confluence/rest/api/settings/systemInfo").status_code == 404


async def test_removed_v1_reads_answer_basic_auth_only_where_the_tenant_host_still_does(site):
    """Through the gateway (a bearer token) every removed read is 410; a tenant host that still
    answers basic-auth callers does so for page reads, never for group reads by name."""
    emulator = site.emulator
    try:
        emulator.cloud_v1_answered = True
        assert get(f"{site.url}/wiki/rest/api/content/{HOME}").status_code == 200
        assert get(f"{site.url}/wiki/rest/api/group/hive-committers/member").status_code == 410
        bearer = requests.get(f"{site.url}/wiki/rest/api/content/{HOME}", headers={"Authorization": f"Bearer {TOKENS['bob']}"}, timeout=10)
        assert bearer.status_code == 410
    finally:
        emulator.cloud_v1_answered = False
    gone = get(f"{site.url}/wiki/rest/api/content/{HOME}")
    assert gone.status_code == 410 and gone.json()["message"].endswith("GoneException: This deprecated endpoint has been removed.")


async def test_jira_cloud_search_sends_ids_by_default_and_refuses_unbounded_queries(site):
    ids = get(f"{site.url}/rest/api/3/search/jql", jql="project = HIVE", maxResults=5).json()
    assert [set(issue) for issue in ids["issues"]] == [{"id"}] * 5 and "total" not in ids
    unbounded = get(f"{site.url}/rest/api/3/search/jql", jql="ORDER BY key", fields="summary")
    assert unbounded.status_code == 400
    assert unbounded.json()["errorMessages"] == ["Unbounded JQL queries are not allowed here. Please add a search restriction to your query."]
    for old in ("/rest/api/2/search", "/rest/api/3/search"):
        answer = get(site.url + old, jql="project = HIVE")
        assert answer.status_code == 410 and "CHANGE-2046" in answer.json()["errorMessages"][0]
    assert get(f"{site.url}/jira/rest/api/2/search", jql="project = HIVE").status_code == 200  # Data Center keeps it


async def test_jira_cloud_search_carries_20_comments_and_the_endpoint_the_rest(site):
    (issue,) = get(f"{site.url}/rest/api/3/search/jql", "bob", jql=f"key = {THREAD}", fields="comment").json()["issues"]
    carried = issue["fields"]["comment"]
    assert len(carried["comments"]) == 20 and carried["total"] > 20
    page = get(f"{site.url}/rest/api/3/issue/{THREAD}/comment", "bob", startAt=20, maxResults=100).json()
    assert page["startAt"] == 20 and len(page["comments"]) == carried["total"] - 20
    restricted = [c for c in page["comments"] if "visibility" in c]
    assert restricted and restricted[0]["visibility"] == {"type": "role", "value": "Developers", "identifier": "Developers"}


@pytest.mark.parametrize("login", [SYNC_LOGIN, "bob"])
async def test_the_cloud_source_reads_every_comment_as_data_center_shows_them(site, login):
    """Cloud (search, then the comment endpoint) and Data Center (all in the search) agree."""

    def source(url: str, deployment: str) -> JiraRestSource:
        return JiraRestSource(JiraSettings(deployment=deployment, username=login, token=TOKENS[login]), url)

    async def comments(rest: JiraRestSource) -> list[tuple[str | None, tuple[str, str] | None]]:
        (issue,) = await rest.issues_by_key([THREAD])
        return [(c.id, c.visibility) for c in issue.comments]

    cloud, center = await comments(source(site.url, "cloud")), await comments(source(site.url + "/jira", "datacenter"))
    assert cloud == center and len(cloud) > 20
    assert any(visibility for _, visibility in cloud) == (login == "bob")  # a Developer; the sync account never sees them


async def test_a_page_in_a_folder_names_the_folder_as_its_parent_and_inherits_its_restriction(site, caplog):
    """Cloud folders sit in the tree like pages (v1 and v2 ancestors name them, ``type`` folder) and
    their view restrictions reach the pages inside. Wayfinder keeps no folder node: the source
    says so, and the page's parent is the folder, which the sync never holds, so it stays out."""
    from core.settings import ConfluenceSettings
    from devstack.atlassian.hive import account_id as named
    from pipeline.sources.confluence_rest import ConfluenceRestSource

    state = site.emulator.site
    state.add_space("FLD", "Folders", readers_users={named(SYNC_LOGIN)}, readers_groups={"hive-users", "hive-committers"})
    folder = state.create_page("FLD", "Design folder", "", by=named("alice"), kind="folder")
    state.set_read_restrictions(folder.id, users={named(SYNC_LOGIN)}, groups={"hive-committers"})
    inside = state.create_page("FLD", "Inside the folder", "<p>Only for committers.</p>", parent_id=folder.id, by=named("alice"))
    assert get(f"{site.url}/wiki/api/v2/pages/{inside.id}/ancestors").json()["results"] == [{"id": folder.id, "type": "folder"}]
    assert get(f"{site.url}/wiki/api/v2/folders/{folder.id}").json()["type"] == "folder"
    assert get(f"{site.url}/wiki/api/v2/pages/{folder.id}").status_code == 404
    assert get(f"{site.url}/wiki/api/v2/pages/{inside.id}", "bob").status_code == 404  # bob is no committer
    assert get(f"{site.url}/wiki/api/v2/pages/{inside.id}", "alice").status_code == 200
    rest = ConfluenceRestSource(ConfluenceSettings(deployment="cloud", username=SYNC_LOGIN, token=TOKENS[SYNC_LOGIN]), site.url + "/wiki")
    (listed,) = await rest.list_pages("FLD")  # the folder is no page
    assert listed.page_id == inside.id and listed.parent_id == folder.id
    assert f"page {inside.id} sits in a folder ({folder.id}), which is not synced" in caplog.text
    # Were v1 to leave the folder out of the chain, v2's parent would still be kept.
    from dataclasses import replace

    (kept,) = await rest._placed("FLD", [replace(listed, parent_id=None)])
    assert kept.parent_id == folder.id and f"page {inside.id}: v1 places it under None, v2 under folder {folder.id}" in caplog.text
    # Two pages claiming it: out of this run, whichever would have inherited less.
    assert await rest._placed("HIVE", [replace(listed, page_id=DESIGN_DOCS_PAGE, space_key="HIVE", parent_id=HOME)]) == []
