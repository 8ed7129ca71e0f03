"""The raw store behaves the same on both engines it runs on: SQLite (the default) and a real
PostgreSQL 16 server."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from sqlalchemy import create_engine, text

from core.errors import ConfigurationError
from core.models import JiraPermissions
from core.settings import Settings
from pipeline.raw_store import RawStore, StoredAttachment, sqlite_url
from pipeline.sources.confluence_rest import RemotePage, RemoteSpace
from pipeline.sources.jira_rest import RemoteComment, RemoteIssue, RemoteProject

WHEN = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return sqlite_url(tmp_path / "raw.sqlite")
    return request.getfixturevalue("postgres").create_database(f"raw_{hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:12]}")


@pytest.fixture
async def store(url):
    opened = await RawStore(url).open()
    yield opened
    await opened.close()


def listed(page_id: str, parent: str | None = None, *, version: int = 1, users: tuple[str, ...] = (), space: str = "S") -> RemotePage:
    return RemotePage(page_id, space, f"T{page_id}", parent, int(page_id), version, WHEN, f"u/{page_id}", users, ())


def fetched(page: RemotePage, body: str) -> RemotePage:
    return replace(page, storage=body, labels=("design",))


async def test_a_reconcile_sees_additions_moves_restrictions_new_versions_and_deletions(store):
    first = await store.reconcile("S", [listed("1"), listed("2", "1"), listed("3", "1"), listed("4", "1")])
    assert first.added == ["1", "2", "3", "4"] and first.stale == ["1", "2", "3", "4"]
    for page_id in ("1", "2", "3", "4"):
        await store.save_body(fetched(listed(page_id, None if page_id == "1" else "1"), f"<p>{page_id}</p>"))

    changes = await store.reconcile("S", [listed("1"), listed("2", "3"), listed("3", "1", users=("bob",)), listed("5", "1")])
    assert changes.added == ["5"] and changes.moved == ["2"] and changes.permissions_changed == ["3"]
    assert changes.deleted == ["4"] and changes.stale == ["5"]
    held = {page.page_id: page for page in await store.pages("S")}
    assert set(held) == {"1", "2", "3", "5"} and held["2"].parent_id == "3" and held["3"].read_users == ("bob",)
    assert await store.body("4", 1) is None and await store.body("2", 1) == "<p>2</p>"  # bodies of deleted pages go


async def test_a_page_listed_under_another_space_moved_there(store):
    await store.reconcile("S", [listed("1"), listed("2", "1")])
    changes = await store.reconcile("T", [listed("2", space="T")])
    assert changes.moved == ["2"] and changes.added == []
    assert [p.page_id for p in await store.pages("T")] == ["2"]
    assert (await store.reconcile("S", [listed("1")])).deleted == []  # not deleted from S: it lives in T now


async def test_a_listing_without_most_of_a_space_hides_them_and_keeps_their_content_until_a_purge_is_allowed(store):
    await store.reconcile("S", [listed(str(i)) for i in range(1, 41)])
    await store.save_body(fetched(listed("40"), "<p>forty</p>"))
    changes = await store.reconcile("S", [listed(str(i)) for i in range(1, 6)], max_deleted_share=0.5)
    assert changes.deleted == [] and len(changes.vanished) == 35  # too many at once to purge: kept, hidden
    held = {page.page_id: page for page in await store.pages("S")}
    assert len(held) == 40 and {p for p, page in held.items() if page.vanished} == {str(i) for i in range(6, 41)}
    assert await store.body("40", 1) == "<p>forty</p>"  # nothing stored is lost
    back = await store.reconcile("S", [listed(str(i)) for i in range(1, 31)], max_deleted_share=0.5)
    assert len(back.deleted) == 10 and back.vanished == []  # listed again: shown again; the rest few enough to purge
    assert len(await store.pages("S")) == 30 and not any(page.vanished for page in await store.pages("S"))
    await store.reconcile("S", [listed(str(i)) for i in range(1, 6)], max_deleted_share=0.5)
    purged = await store.reconcile("S", [listed(str(i)) for i in range(1, 6)], max_deleted_share=1.0)  # the operator allows it
    assert len(purged.deleted) == 25 and len(await store.pages("S")) == 5


async def test_bodies_are_kept_by_version_and_a_late_older_fetch_does_not_win(store):
    await store.reconcile("S", [listed("1", version=2)])
    await store.save_body(fetched(listed("1", version=2, users=("alice",)), "<p>two</p>"))
    await store.save_body(fetched(listed("1", version=1), "<p>one</p>"))  # an older body arriving late
    page = (await store.pages())[0]
    assert (page.version, page.body_version, page.read_users) == (2, 2, ("alice",))
    assert await store.body("1", 1) == "<p>one</p>" and await store.body("1", 2) == "<p>two</p>"
    await store.save_body(fetched(listed("1", version=2), "<p>changed?</p>"))  # a version is never rewritten
    assert await store.body("1", 2) == "<p>two</p>"


async def test_a_conversion_is_held_until_a_new_body_arrives_and_errors_keep_the_old_text(store):
    await store.reconcile("S", [listed("1")])
    await store.save_body(fetched(listed("1"), "<p>x</p>"))
    assert (await store.pages())[0].needs_conversion
    await store.save_conversion("1", 1, "# T1\n\nx\n", ["page:2"], "T1")
    page = (await store.pages())[0]
    assert not page.needs_conversion and page.links == ("page:2",) and page.markdown == "# T1\n\nx\n"
    await store.save_body(fetched(listed("1", version=2), "<p>broken"))
    await store.save_conversion_error("1", "unclosed <p>")
    page = (await store.pages())[0]
    assert page.needs_conversion and page.conversion_error == "unclosed <p>" and page.markdown == "# T1\n\nx\n"


async def test_spaces_watermarks_and_groups(store):
    await store.save_space(RemoteSpace("S", "Space", "u/S", ("alice",), ("devs",)))
    await store.save_space(RemoteSpace("S", "Renamed", "u/S", (), ("devs", "ops")))
    assert await store.spaces() == [RemoteSpace("S", "Renamed", "u/S", (), ("devs", "ops"))]
    assert await store.watermark("S") is None
    await store.set_watermark("S", WHEN)
    assert await store.watermark("S") == WHEN
    await store.save_groups({"devs": ["bob", "alice"], "ops": []})
    await store.save_groups({"devs": ["alice"]})  # membership is replaced, not merged
    assert await store.groups() == {"devs": ("alice",)}


async def test_image_bytes_alt_texts_and_page_images(store):
    await store.reconcile("S", [listed("1")])
    data = bytes(range(256)) * 4  # every byte value survives the round trip
    image = StoredAttachment("att9", "1", "flow.png", "image/png", hashlib.sha256(data).hexdigest(), data)
    await store.save_attachment(image)
    await store.save_attachment(replace(image, filename="flow-v2.png"))
    assert await store.attachment("att9") == replace(image, filename="flow-v2.png")
    await store.cache_alt_text("img", "ctx", "offline", "a flow chart")
    await store.cache_alt_text("img", "ctx", "gemini", "the query flow")
    assert await store.cached_alt_text("img", "ctx") == "the query flow"
    await store.set_page_images("1", {"att9": "the query flow"})
    [shown] = await store.page_images()
    assert (shown.page_id, shown.attachment_id, shown.alt_text, shown.data) == ("1", "att9", "the query flow", data)
    await store.set_page_images("1", {})
    assert await store.page_images() == []


async def test_an_older_store_gains_new_columns_and_its_pages_are_converted_again(url):
    store = await RawStore(url).open()
    await store.reconcile("S", [listed("1")])
    await store.save_body(fetched(listed("1"), "<p>x</p>"))
    await store.save_conversion("1", 1, "# T1\n\nx\n", [], "T1")
    assert not (await store.pages())[0].needs_conversion
    await store.close()
    engine = create_engine(url)
    with engine.begin() as db:
        db.execute(text("ALTER TABLE pages DROP COLUMN converter"))  # as a store from before the column was added
    engine.dispose()
    reopened = await RawStore(url).open()
    page = (await reopened.pages())[0]
    await reopened.close()
    assert page.converter is None and page.needs_conversion and page.markdown == "# T1\n\nx\n"


async def test_the_settings_choose_the_engine(tmp_path, postgres):
    assert RawStore.for_settings(Settings(data_dir=tmp_path)).address == f"sqlite:///{tmp_path / 'raw.sqlite'}"
    configured = RawStore.for_settings(Settings(data_dir=tmp_path, raw_store_url=postgres.url()))
    assert configured.dialect == "postgresql" and "***" in configured.address


async def test_a_store_that_cannot_be_used_is_named_without_its_password(postgres):
    with pytest.raises(ConfigurationError, match="SQLite or PostgreSQL, not 'mysql'"):
        RawStore("mysql://u:p@127.0.0.1/db")
    with pytest.raises(ConfigurationError, match="not a database URL"):
        RawStore("raw.sqlite")
    wrong = postgres.url().replace("wayfinder:", "wayfinder:not-the-", 1)
    with pytest.raises(ConfigurationError, match="cannot be used") as refused:
        await RawStore(wrong).open()
    assert "not-the-" not in str(refused.value) and "127.0.0.1:29543" in str(refused.value)


def issue(key: str, parent: str | None = None, *, level: int = 0, updated: datetime = WHEN, security: str | None = None, reporter: str | None = "bob") -> RemoteIssue:
    return RemoteIssue(key, "P", "Story", level, f"S {key}", parent, updated, f"u/{key}", security, "Open", ("l",), reporter, None)


async def test_jira_issues_reconcile_keep_their_text_and_convert_again_when_needed(store):
    permissions = JiraPermissions(project_browsers={"P": ("user:*",)}, role_members={}, level_members={"7": ("reporter",)})
    await store.save_jira_project(RemoteProject("P", "Project", "u/P"), permissions)
    assert await store.jira_projects() == [(RemoteProject("P", "Project", "u/P"), permissions)]
    listing = [issue("P-1", level=1), issue("P-2", "P-1"), issue("P-3", "P-1")]
    first = await store.reconcile_issues("P", listing)
    assert first.added == ["P-1", "P-2", "P-3"] and first.stale == ["P-1", "P-2", "P-3"]
    comment = RemoteComment("bob", WHEN, {"type": "doc", "content": []}, ("role", "Committers"), "10")
    await store.save_issue_bodies([replace(i, description=f"text of {i.key}", comments=(comment,), links=(("Relates", "outward", "P-2"),)) for i in listing])
    held = {i.listed.key: i for i in await store.issues("P")}
    assert all(not i.needs_body and i.needs_conversion for i in held.values())
    assert held["P-2"].body == {
        "format": 3, "description": "text of P-2", "links": [["Relates", "outward", "P-2"]],
        "comments": [{"id": "10", "author": "bob", "created": WHEN.isoformat(), "body": {"type": "doc", "content": []}, "visibility": ["role", "Committers"]}],
    }
    await store.save_issue_markdown("P-2", held["P-2"].body_updated, "# P-2\n", {"10": "# P-2: comment by bob (role Committers)\n"})

    later = datetime(2024, 2, 1, tzinfo=UTC)
    changes = await store.reconcile_issues("P", [issue("P-1", level=1), issue("P-2", None, security="7"), issue("P-4", "P-1", updated=later)])
    assert changes.moved == ["P-2"] and changes.permissions_changed == ["P-2"] and changes.deleted == ["P-3"] and changes.added == ["P-4"]
    held = {i.listed.key: i for i in await store.issues("P")}
    assert set(held) == {"P-1", "P-2", "P-4"} and held["P-2"].listed.security_level == "7" and held["P-2"].listed.parent_key is None
    assert held["P-2"].markdown == "# P-2\n" and not held["P-2"].needs_conversion and held["P-4"].needs_body
    assert held["P-2"].comment_markdown == {"10": "# P-2: comment by bob (role Committers)\n"}  # the restricted comment's own text
    await store.set_jira_watermark("P", later)
    assert await store.jira_watermark("P") == later


async def test_a_jira_listing_cut_short_hides_its_issues_and_deletes_nothing(store):
    await store.save_jira_project(RemoteProject("P", "Project", "u/P"), JiraPermissions(project_browsers={}, role_members={}, level_members={}))
    await store.reconcile_issues("P", [issue(f"P-{n}") for n in range(1, 31)])
    changes = await store.reconcile_issues("P", [issue("P-1")], max_deleted_share=0.5)
    assert changes.deleted == [] and len(changes.vanished) == 29
    held = await store.issues("P")
    assert len(held) == 30 and sum(i.vanished for i in held) == 29