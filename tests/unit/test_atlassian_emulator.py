"""The Confluence emulator over real HTTP, through atlassian-python-api and plain requests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import requests
from atlassian.confluence import ConfluenceServer
from atlassian.errors import ApiError

from devstack.atlassian import storage
from devstack.atlassian.hive import SYNC_LOGIN, TOKENS, account_id
from devstack.atlassian.export import DESIGN_DOCS_PAGE, SINGLE_USER_PAGE
from tests.conftest import CORPUS
from tests.emulated import ADMIN, admin, served_hive

HOME = "27362069"


@pytest.fixture(scope="module")
async def hive():
    async for served in served_hive():
        yield served.url, served.emulator, served.clock


def client(url: str, login: str, *, cloud: bool = False) -> ConfluenceServer:
    return ConfluenceServer(url=url + ("/wiki" if cloud else ""), username=login, password=TOKENS[login], cloud=cloud)


def every_page(url: str, login: str, cql: str, *, cloud: bool = True) -> list[dict]:
    """Follow ``_links.next`` from ``_links.base``, as a client that handles the context path must."""
    session = requests.Session()
    session.auth = (login, TOKENS[login])
    root = url + ("/wiki" if cloud else "")
    page = session.get(f"{root}/rest/api/content/search", params={"cql": cql, "limit": 40, "expand": "version"}, timeout=10).json()
    found = list(page["results"])
    while "next" in page["_links"]:
        page = session.get(page["_links"]["base"] + page["_links"]["next"], timeout=10).json()
        found.extend(page["results"])
    return found


async def test_pages_come_with_the_expansions_a_sync_asks_for(hive):
    url, _, _ = hive
    page = client(url, SYNC_LOGIN).get_page_by_id(
        DESIGN_DOCS_PAGE, expand="body.storage,version,ancestors,space,history.lastUpdated,metadata.labels,restrictions.read.restrictions.group"
    )
    assert page["title"] == "DesignDocs" and page["space"]["key"] == "HIVE" and page["ancestors"] == []
    assert page["body"]["storage"]["representation"] == "storage" and "<h1>" in page["body"]["storage"]["value"]
    assert page["version"]["number"] >= 1 and page["history"]["lastUpdated"]["when"].endswith("Z")
    assert [label["name"] for label in page["metadata"]["labels"]["results"]] == ["designdocs"]
    assert [g["name"] for g in page["restrictions"]["read"]["restrictions"]["group"]["results"]] == ["hive-committers"]
    child = client(url, SYNC_LOGIN).get_page_child_by_type(DESIGN_DOCS_PAGE, type="page", start=0, limit=1)[0]
    below = client(url, SYNC_LOGIN).get_page_by_id(child["id"], expand="ancestors,restrictions.read.restrictions.group")
    assert [a["id"] for a in below["ancestors"]] == [DESIGN_DOCS_PAGE]
    assert below["restrictions"]["read"]["restrictions"]["group"]["results"] == []  # inherited, not its own


async def test_paging_follows_next_links_that_leave_out_the_context_path(hive):
    url, _, _ = hive
    first = client(url, SYNC_LOGIN, cloud=True).cql("space = HIVE AND type = page", limit=25)
    assert first["totalSize"] == 305 and first["size"] == 25
    assert first["_links"]["context"] == "/wiki" and first["_links"]["base"].endswith("/wiki")
    assert first["_links"]["next"].startswith("/rest/api/search?")  # no /wiki: the quirk
    pages = every_page(url, SYNC_LOGIN, "space = HIVE ORDER BY lastModified")
    assert len(pages) == len({p["id"] for p in pages}) == 305
    times = [p["version"]["when"] for p in pages]
    assert times == sorted(times)
    assert len(every_page(url, SYNC_LOGIN, "space = HIVE", cloud=False)) == 305  # Data Center paths


async def test_each_user_sees_what_confluence_would_show_them(hive):
    url, _, _ = hive
    design = {DESIGN_DOCS_PAGE} | {p["id"] for p in every_page(url, SYNC_LOGIN, f"ancestor = {DESIGN_DOCS_PAGE}")}
    alice = {p["id"] for p in every_page(url, "alice", "space = HIVE")}
    bob = {p["id"] for p in every_page(url, "bob", "space = HIVE")}
    assert len(design) > 5
    assert SINGLE_USER_PAGE not in alice and design <= alice and len(alice) == 304
    assert SINGLE_USER_PAGE in bob and not design & bob
    assert every_page(url, "carol", "space = HIVE") == []
    with pytest.raises(ApiError):  # the library's word for "missing or not yours"
        client(url, "alice").get_page_by_id(SINGLE_USER_PAGE)
    hidden = requests.get(f"{url}/confluence/rest/api/content/{SINGLE_USER_PAGE}", auth=("alice", TOKENS["alice"]), timeout=10)
    missing = requests.get(f"{url}/confluence/rest/api/content/999999999", auth=("alice", TOKENS["alice"]), timeout=10)
    assert hidden.status_code == missing.status_code == 404
    assert hidden.text.replace(SINGLE_USER_PAGE, "X") == missing.text.replace("999999999", "X")


async def test_bad_credentials_get_401_and_bearer_tokens_work(hive):
    url, _, _ = hive
    wrong = requests.get(f"{url}/wiki/rest/api/content/{HOME}", auth=("alice", "not-her-token"), timeout=10)
    assert wrong.status_code == 401 and wrong.json()["statusCode"] == 401
    assert wrong.headers["content-type"] == "application/json;charset=UTF-8"
    assert requests.get(f"{url}/rest/api/content/{HOME}", timeout=10).status_code == 401
    bearer = requests.get(f"{url}/rest/api/content/{HOME}", headers={"Authorization": f"Bearer {TOKENS['bob']}"}, timeout=10)
    assert bearer.status_code == 200 and bearer.json()["id"] == HOME


async def test_cql_dates_are_read_in_the_users_time_zone(hive):
    url, emulator, clock = hive
    clock.now = datetime(2026, 3, 2, 8, 30, tzinfo=UTC)
    admin(url, "PUT", f"/pages/{HOME}", {"by": "alice", "body": "<p>edited</p>"})
    zone = ZoneInfo(emulator.site.user_by_login(SYNC_LOGIN).time_zone)
    local = clock.now.astimezone(zone).strftime("%Y-%m-%d %H:%M")
    utc = clock.now.strftime("%Y-%m-%d %H:%M")
    assert [p["id"] for p in every_page(url, SYNC_LOGIN, f'lastModified >= "{local}"')] == [HOME]
    # The sync account is hours behind UTC: the same instant written in UTC reads as hours later
    # to it, so a sync that sends UTC misses the edit.
    assert zone.utcoffset(clock.now) < timedelta(0)
    assert every_page(url, SYNC_LOGIN, f'lastModified >= "{utc}"') == []
    assert len(every_page(url, SYNC_LOGIN, f'lastModified < "{local}" AND space = HIVE')) == 304


async def test_edits_change_last_modified_moves_restrictions_and_memberships_do_not(hive):
    url, emulator, clock = hive
    site = emulator.site
    page_id = next(iter(p.id for p in site.children(HOME)))
    before = site.pages[page_id].version
    clock.now += timedelta(hours=1)
    admin(url, "PUT", f"/pages/{page_id}/restrictions", {"users": ["bob"], "groups": []})
    admin(url, "PUT", "/groups/hive-users/members/carol")
    assert site.pages[page_id].version == before
    assert {p["id"] for p in every_page(url, "carol", "space = HIVE")} >= {HOME}  # carol joined hive-users
    assert page_id not in {p["id"] for p in every_page(url, "alice", "space = HIVE")}
    admin(url, "PUT", f"/pages/{page_id}/restrictions", {"users": [], "groups": []})
    admin(url, "DELETE", "/groups/hive-users/members/carol")
    assert every_page(url, "carol", "space = HIVE") == []
    clock.now += timedelta(hours=1)
    moved = admin(url, "POST", f"/pages/{page_id}/move", {"parent_id": DESIGN_DOCS_PAGE, "by": "alice"})
    assert moved["version"] == before.number and site.pages[page_id].version == before
    edited = admin(url, "PUT", f"/pages/{page_id}", {"by": "alice", "body": "<p>x</p>"})
    assert edited["version"] == before.number + 1 and site.pages[page_id].version.when == clock.now
    assert page_id not in {p["id"] for p in every_page(url, "bob", "space = HIVE")}  # now under DesignDocs


async def test_created_and_deleted_pages(hive):
    url, emulator, clock = hive
    clock.now += timedelta(hours=1)
    created = admin(url, "POST", "/pages", {"space": "HIVE", "title": "Release Checklist", "body": "<p>zyzzyva checklist</p>", "parent_id": HOME, "by": "bob"})
    found = client(url, SYNC_LOGIN).cql('title = "Release Checklist"')["results"]
    assert [r["content"]["id"] for r in found] == [created["id"]]
    assert [r["content"]["id"] for r in client(url, "bob").cql('text ~ "zyzzyva" AND space = HIVE')["results"]] == [created["id"]]
    admin(url, "DELETE", f"/pages/{created['id']}")
    assert client(url, SYNC_LOGIN).cql('title = "Release Checklist"')["results"] == []


async def test_attachments_list_and_download(hive):
    url, emulator, _ = hive
    attachment = next(iter(emulator.site.attachments.values()))
    listed = client(url, SYNC_LOGIN).get_attachments_from_content(attachment.page_id)["results"]
    mine = next(a for a in listed if a["id"] == attachment.id)
    assert mine["extensions"]["mediaType"].startswith("image/") and mine["extensions"]["fileSize"] == len(attachment.data)
    download = requests.get(mine["_links"]["base"] + mine["_links"]["download"], auth=(SYNC_LOGIN, TOKENS[SYNC_LOGIN]), timeout=10)
    assert download.status_code == 200 and download.content == (CORPUS / "attachments" / attachment.page_id / attachment.filename).read_bytes()


async def test_injected_faults(hive):
    url, _, _ = hive
    auth = (SYNC_LOGIN, TOKENS[SYNC_LOGIN])
    admin(url, "POST", "/faults", {"kind": "429", "path": "/content/search", "times": 2, "retry_after_s": 3})
    for _ in range(2):
        limited = requests.get(f"{url}/wiki/rest/api/content/search", params={"cql": "space = HIVE"}, auth=auth, timeout=10)
        assert limited.status_code == 429 and limited.headers["Retry-After"] == "3"
    assert requests.get(f"{url}/wiki/rest/api/content/search", params={"cql": "space = HIVE"}, auth=auth, timeout=10).status_code == 200
    admin(url, "POST", "/faults", {"kind": "drop", "path": f"/content/{HOME}$"})
    with pytest.raises(requests.exceptions.RequestException):
        requests.get(f"{url}/confluence/rest/api/content/{HOME}", auth=auth, timeout=10).json()
    admin(url, "POST", "/faults", {"kind": "503", "path": f"/content/{HOME}$"})
    assert requests.get(f"{url}/confluence/rest/api/content/{HOME}", auth=auth, timeout=10).status_code == 503
    assert requests.get(f"{url}/confluence/rest/api/content/{HOME}", auth=auth, timeout=10).status_code == 200
    counts = admin(url, "GET", "/requests")
    assert counts["/rest/api/content/search"] >= 3 and counts["/rest/api/content/{id}"] >= 3


async def test_the_admin_api_refuses_without_its_token_and_names_bad_input(hive):
    url, _, _ = hive
    assert requests.post(f"{url}/_emulator/faults", json={"kind": "500"}, timeout=10).status_code == 401
    bad = requests.post(f"{url}/_emulator/faults", json={"kind": "teapot"}, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10)
    assert bad.status_code == 400 and "teapot" in bad.json()["error"]
    clash = requests.post(
        f"{url}/_emulator/pages", json={"space": "HIVE", "title": "Home", "by": "bob"}, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10
    )
    assert clash.status_code == 400 and "already exists" in clash.json()["error"]


@pytest.mark.parametrize(
    "cql",
    ["space = ", "spaec = HIVE", 'lastModified >= "yesterday"', "space = HIVE ORDER lastModified", "(space = HIVE", "title ~ \"\""],
)
async def test_bad_cql_gets_400_naming_the_problem(hive, cql):
    url, _, _ = hive
    response = requests.get(f"{url}/wiki/rest/api/content/search", params={"cql": cql}, auth=(SYNC_LOGIN, TOKENS[SYNC_LOGIN]), timeout=10)
    assert response.status_code == 400 and response.json()["message"].startswith("Could not parse cql")


async def test_spaces_groups_and_users(hive):
    url, _, _ = hive
    session = requests.Session()
    session.auth = (SYNC_LOGIN, TOKENS[SYNC_LOGIN])
    permissions = session.get(f"{url}/confluence/rest/api/space/HIVE/permissions", timeout=10).json()
    assert {p["subject"]["name"] for p in permissions if p["subject"]["type"] == "group"} == {"hive-users", "hive-committers"}
    assert session.get(f"{url}/rest/api/group/hive-users/member", timeout=10).json()["results"][0]["username"] == "bob"
    assert session.get(f"{url}/wiki/rest/api/user", params={"accountId": account_id("bob")}, timeout=10).json()["displayName"] == "Bob"
    assert client(url, "carol").get_all_spaces()["results"] == []


async def test_every_seeded_page_is_well_formed_storage_with_the_constructs_of_real_pages(hive):
    _, emulator, _ = hive
    bodies = [page.body for page in emulator.site.pages.values()]
    for body in bodies:
        storage.check_well_formed(body)
    text = "".join(bodies)
    for construct in ('ac:name="code"', '<ac:parameter ac:name="language">', 'ac:name="jira"', "<ri:page ", "<ri:attachment ", 'ac:name="info"', 'ac:name="toc"', 'ac:name="expand"', "<table"):
        assert construct in text, construct


def test_storage_conversion_of_the_constructs():
    titles = {"1": "Home", "2": "Other Page"}
    xhtml = storage.to_storage(
        "# T\n\n* [A](#a)\n* [B](#b)\n\n## A\n\nsee [other](page:2#x) and [HIVE-12](https://issues.apache.org/jira/browse/HIVE-12), HIVE-7\n\n"
        "Note\n\nmind the gap\n\n```sql\nSELECT ']]>' FROM t\n```\n\n![](attachments/1/9.png)\n\n| h |\n|---|\n| c |\n",
        page_id="1",
        titles=titles,
        space_key="HIVE",
    )
    storage.check_well_formed(xhtml)
    assert '<ac:structured-macro ac:name="toc"' in xhtml and "[A]" not in xhtml
    assert '<ac:link ac:anchor="x"><ri:page ri:content-title="Other Page" ri:space-key="HIVE" /><ac:link-body>other</ac:link-body></ac:link>' in xhtml
    assert xhtml.count('ac:name="jira"') == 2 and "<ac:parameter ac:name=\"key\">HIVE-7</ac:parameter>" in xhtml
    assert '<ac:structured-macro ac:name="note"><ac:parameter ac:name="title">Note</ac:parameter><ac:rich-text-body><p>mind the gap</p>' in xhtml
    assert "<![CDATA[SELECT ']]]]><![CDATA[>' FROM t\n]]>" in xhtml and '<ac:parameter ac:name="language">sql</ac:parameter>' in xhtml
    assert '<ri:attachment ri:filename="9.png" />' in xhtml
    assert '<table class="wrapped"><tbody>' in xhtml and "<thead>" not in xhtml
    # the renderer keeps no state between calls: converting twice gives the same text
    assert storage.to_storage("see [o](page:2)", page_id="1", titles=titles, space_key="HIVE") == storage.to_storage(
        "see [o](page:2)", page_id="1", titles=titles, space_key="HIVE"
    )


async def test_the_musique_passages_make_one_flat_space_the_hive_readers_see():
    from devstack.atlassian.hive import seed_hive
    from devstack.atlassian.musique import SPACE_KEY, seed_musique
    from devstack.atlassian.site import Site
    from tests.conftest import SLICE_ROOTS

    site = Site()
    await seed_hive(site, CORPUS, roots=SLICE_ROOTS)
    assert seed_musique(site, CORPUS.parent / "musique-100" / "corpus.json") == 1890
    pages = [p for p in site.pages.values() if p.space_key == SPACE_KEY]
    assert len(pages) == 1890 and all(p.parent_id is None for p in pages)
    assert len({p.title for p in pages}) == 1890  # repeated article titles were numbered
    alice, carol = site.user_by_login("alice"), site.user_by_login("carol")
    assert site.readable(alice, pages[0]) and not site.readable(carol, pages[0])


async def test_site_search_finds_any_word_and_ranks_by_relevance(hive):
    url, _, _ = hive
    found = client(url, "alice").cql('siteSearch ~ "how do I initialize the metastore schema with the schema tool"', limit=10)["results"]
    assert "34835119" in [r["content"]["id"] for r in found[:3]]  # Hive Schema Tool
    assert client(url, "alice").cql('siteSearch ~ "schema tool"')["results"][0]["content"]["id"] == "34835119"
    scores = [r["score"] for r in found]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0
    assert len(found) == 10  # any word: a question finds pages that hold only some of its words
    every = client(url, "alice").cql('text ~ "initialize metastore schema tool"', limit=50)["results"]
    assert 1 < len(every) < 10 and "34835119" in [r["content"]["id"] for r in every[:2]]  # text ~ needs every word
    ordered = client(url, "alice").cql('siteSearch ~ "schema tool" ORDER BY title', limit=50)["results"]
    assert [r["title"] for r in ordered] == sorted((r["title"] for r in ordered), key=str.casefold)  # an explicit order wins
    assert client(url, "alice").cql('siteSearch ~ "the of and"')["results"] == []  # stop words find nothing
