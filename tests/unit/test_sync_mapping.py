"""How the sync names Confluence users and groups in OpenFGA, places pages, and refuses a listing
that would empty a space."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.errors import SourceError
from pipeline.raw_store import RawStore, StoredPage
from pipeline.sources.confluence_rest import RemotePage
from pipeline.sync import _placed_pages, safe_name


def test_names_openfga_cannot_hold_become_stable_digests():
    assert safe_name("hive-users") == "hive-users" and safe_name("alice@example.com") == "alice@example.com"
    digest = safe_name("Site Admins")
    assert digest.startswith("x-") and digest == safe_name("Site Admins") and digest != safe_name("Site admins")
    assert safe_name("Jörg") != "Jörg"


def test_a_name_shaped_like_a_digest_is_not_the_digest_it_imitates():
    imitation = safe_name("Site Admins")
    assert safe_name(imitation) != imitation  # a user who registers that name gets an id of their own


def stored(page_id: str, parent: str | None, space: str = "S", position: int | None = None) -> StoredPage:
    return StoredPage(page_id, space, f"T{page_id}", parent, position, 1, "u", (), (), 1, "text", (), 1, 2, None)


def test_pages_whose_parent_is_not_held_are_left_out_with_their_subtree():
    placed = _placed_pages([stored("1", None), stored("2", "1"), stored("3", "99"), stored("4", "3")])
    assert [p.page_id for p in placed["S"]] == ["1", "2"]


def test_siblings_are_numbered_by_position_then_title():
    placed = _placed_pages([stored("1", None), stored("3", "1", position=5), stored("2", "1", position=None), stored("4", "1", position=1)])
    assert [(p.page_id, p.position) for p in placed["S"]] == [("1", 0), ("4", 0), ("3", 1), ("2", 2)]


def listed(page_id: str) -> RemotePage:
    return RemotePage(page_id, "S", f"T{page_id}", None, int(page_id), 1, datetime(2024, 1, 1, tzinfo=UTC), "u", (), ())


async def test_a_listing_that_would_delete_most_of_a_space_changes_nothing(tmp_path):
    store = await RawStore(tmp_path / "raw.sqlite").open()
    await store.reconcile("S", [listed(str(i)) for i in range(40)])
    with pytest.raises(SourceError, match="would delete 35 of its 40 pages"):
        await store.reconcile("S", [listed(str(i)) for i in range(5)], max_deleted_share=0.5)
    assert len(await store.pages("S")) == 40
    changes = await store.reconcile("S", [listed(str(i)) for i in range(30)], max_deleted_share=0.5)
    assert len(changes.deleted) == 10 and len(await store.pages("S")) == 30


async def test_an_older_store_gains_new_columns_and_its_pages_are_converted_again(tmp_path):
    import sqlite3

    path = tmp_path / "raw.sqlite"
    store = await RawStore(path).open()
    await store.reconcile("S", [listed("1")])
    await store.save_body(RemotePage("1", "S", "T1", None, 1, 1, datetime(2024, 1, 1, tzinfo=UTC), "u", (), (), storage="<p>x</p>"))
    await store.save_conversion("1", 1, "# T1\n\nx\n", [], "T1")
    assert not (await store.pages())[0].needs_conversion
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE pages DROP COLUMN converter")  # as a store from before the column was added
    db.commit()
    db.close()
    reopened = await RawStore(path).open()
    page = (await reopened.pages())[0]
    assert page.converter is None and page.needs_conversion and page.markdown == "# T1\n\nx\n"
