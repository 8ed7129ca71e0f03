from authz.base import RelationTuple as T
from authz.tuples import confluence_tuples, page_tuples
from core.models import Page, Permissions
from pipeline.sources.hive_export import synthetic_hive_permissions

PERMS = Permissions(
    space_viewers={"S": ("group:users#member",)},
    page_restrictions={"1": (), "2": ("user:bob",)},
    group_members={"users": ("user:bob", "user:alice")},
)


def page(pid: str, parent: str | None) -> Page:
    return Page(page_id=pid, space_key="S", title=pid, parent_id=parent, position=0, url="u", markdown="")


def test_root_unrestricted_page_gets_both_markers():
    assert page_tuples(page("1", None), PERMS) == {
        T("space:S", "space", "page:1"),
        T("user:*", "is_root", "page:1"),
        T("user:*", "unrestricted", "page:1"),
    }


def test_restricted_child_gets_parent_edge_and_restriction_but_no_marker():
    assert page_tuples(page("2", "1"), PERMS) == {
        T("space:S", "space", "page:2"),
        T("page:1", "parent", "page:2"),
        T("user:bob", "restricted_viewer", "page:2"),
    }


def test_confluence_tuples_include_groups_and_space_viewers():
    tuples = confluence_tuples("S", [page("1", None)], PERMS)
    assert T("group:users#member", "viewer", "space:S") in tuples
    assert {T("user:bob", "member", "group:users"), T("user:alice", "member", "group:users")} <= tuples


def test_unclassified_page_gets_no_restriction_marker():
    assert page_tuples(page("3", "1"), PERMS) == {T("space:S", "space", "page:3"), T("page:1", "parent", "page:3")}


def test_hive_permissions_nest_committers_in_users_and_leave_carol_out():
    perms = synthetic_hive_permissions(["27362075", "1"])
    assert perms.page_restrictions == {"27362075": ("group:hive-committers#member",), "1": ()}
    assert "group:hive-committers#member" in perms.group_members["hive-users"]
    everyone = str(perms)
    assert "carol" not in everyone
