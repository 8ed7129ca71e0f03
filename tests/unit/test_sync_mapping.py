"""How the sync names Confluence users and groups in OpenFGA and places pages."""

from __future__ import annotations

from pipeline.raw_store import StoredPage
from core.ids import safe_name
from pipeline.sync import _placed_pages


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




def test_a_jira_group_never_shares_an_id_with_a_confluence_group():
    from core.ids import jira_group_name

    assert jira_group_name("hive-users") == "x-jira-hive-users" != safe_name("hive-users")
    assert jira_group_name("Site Admins").startswith("x-jira-") and jira_group_name("g" * 200).startswith("x-jira-")
    assert safe_name("x-jira-hive-users") != "x-jira-hive-users"  # a Confluence group named like one gets a digest
