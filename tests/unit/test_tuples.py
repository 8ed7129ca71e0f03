from datetime import UTC, datetime, timedelta

import pytest

from authz.base import Condition
from authz.base import RelationTuple as T
from authz.tuples import anchors, confluence_tuples, grant_tuple, guards, holds_live_grant, issue_anchors, jira_tuples, page_tuples
from core.errors import InvalidArgument, SourceError
from core.models import REPORTER, Issue, JiraPermissions, Page, Permissions, Principal
from devstack.atlassian.export import synthetic_hive_permissions

PERMS = Permissions(
    space_viewers={"S": ("group:users#member",)},
    page_restrictions={"1": (), "2": ("user:bob",)},
    group_members={"users": ("user:bob", "user:alice")},
)


def page(pid: str, parent: str | None, space: str = "S", position: int = 0) -> Page:
    return Page(page_id=pid, space_key=space, title=pid, parent_id=parent, position=position, url="u", markdown="")


def test_an_unguarded_unrestricted_page_gets_existence_unguarded_and_unrestricted_markers():
    assert page_tuples(page("1", None), PERMS, None) == {
        T("space:S", "space", "page:1"),
        T("user:*", "exists", "page:1"),
        T("user:*", "unguarded", "page:1"),
        T("user:*", "unrestricted", "page:1"),
    }


def test_a_guarded_restricted_page_gets_its_guard_and_restriction_but_no_marker():
    assert page_tuples(page("2", "1"), PERMS, "7") == {
        T("space:S", "space", "page:2"),
        T("user:*", "exists", "page:2"),
        T("page:7", "guard", "page:2"),
        T("user:bob", "restricted_viewer", "page:2"),
    }


def test_each_page_is_guarded_by_its_nearest_restricting_or_unclassified_ancestor():
    tree = [page("1", None), page("2", "1"), page("3", "2"), page("4", "3"), page("5", "4"), page("6", "1", position=1)]
    restrictions = {"1": (), "2": ("user:bob",), "3": (), "4": (), "6": ()}  # 5 is unclassified
    perms = PERMS.model_copy(update={"page_restrictions": restrictions})
    assert guards(tree, perms) == {"1": None, "2": None, "3": "2", "4": "2", "5": "2", "6": None}
    below_unclassified = guards([*tree, page("7", "5")], perms)  # guards() takes any checked tree
    assert below_unclassified["7"] == "5"
    tuples = confluence_tuples("S", tree, perms)
    assert T("page:2", "guard", "page:5") in tuples and T("user:*", "unguarded", "page:6") in tuples


def test_a_page_is_anchored_to_itself_when_restricted_or_unclassified_else_to_its_guard_or_space():
    tree = [page("1", None), page("2", "1"), page("3", "2"), page("4", "3"), page("5", "4"), page("6", "1", position=1)]
    restrictions = {"1": (), "2": ("user:bob",), "3": (), "4": (), "6": ()}  # 5 is unclassified
    perms = PERMS.model_copy(update={"page_restrictions": restrictions})
    assert anchors("S", tree, perms) == {
        "page:1": "space:S",
        "page:2": "page:2",
        "page:3": "page:2",
        "page:4": "page:2",
        "page:5": "page:5",
        "page:6": "space:S",
    }


def test_confluence_tuples_include_groups_and_space_viewers():
    tuples = confluence_tuples("S", [page("1", None)], PERMS)
    assert T("group:users#member", "viewer", "space:S") in tuples
    assert {T("user:bob", "member", "group:users"), T("user:alice", "member", "group:users")} <= tuples


def test_unclassified_page_gets_no_restriction_marker():
    assert page_tuples(page("3", "1"), PERMS, None) == {
        T("space:S", "space", "page:3"),
        T("user:*", "exists", "page:3"),
        T("user:*", "unguarded", "page:3"),
    }


def test_a_second_parent_is_an_error_naming_both():
    with pytest.raises(SourceError, match=r"page:2 has two parents: page:1 and the space root"):
        confluence_tuples("S", [page("1", None), page("2", "1"), page("2", None)], PERMS)
    with pytest.raises(SourceError, match=r"listed twice"):
        confluence_tuples("S", [page("1", None), page("1", None)], PERMS)


@pytest.mark.parametrize(
    ("pages", "message"),
    [
        ([page("1", None), page("2", "9")], r"page:2 has parent page:9, which is not a page of space S"),
        ([page("1", "2"), page("2", "1")], r"form a cycle"),
        ([page("1", None, space="T")], r"belongs to space T, not S"),
        ([page("1", None), page("2", "1"), page("3", "1")], r"page:2 and page:3 share position 0 under page:1"),
        ([page("1", None), page("2", None)], r"page:1 and page:2 share position 0 under the space root"),
    ],
)
def test_a_tree_that_is_not_a_tree_is_refused(pages, message):
    with pytest.raises(SourceError, match=message):
        confluence_tuples("S", pages, PERMS)


def test_everyone_may_view_a_space_only_when_the_source_says_so():
    assert not any(t.user == "user:*" and t.relation == "viewer" for t in confluence_tuples("S", [], PERMS))
    open_space = PERMS.model_copy(update={"space_viewers": {"S": ("user:*",)}})
    assert T("user:*", "viewer", "space:S") in confluence_tuples("S", [], open_space)


@pytest.mark.parametrize(
    ("permissions", "obj"),
    [
        (PERMS.model_copy(update={"page_restrictions": {"1": ("user:*", "user:bob")}}), "page:1"),  # a restriction to everyone is none
        (PERMS.model_copy(update={"page_restrictions": {"1": ("group:x", "user:bob")}}), "page:1"),  # a group without #member
        (PERMS.model_copy(update={"space_viewers": {"S": ("bob", "group:users#member")}}), "space:S"),
        (PERMS.model_copy(update={"group_members": {"users": ("user:a b", "user:bob")}}), "group:users"),
    ],
)
def test_a_subject_the_model_does_not_allow_is_left_out_of_its_object_alone(permissions, obj):
    """DESIGN.md A13: one unexpressible subject fails its own grant closed and is reported; every
    other grant, of that object too, is still written."""
    refused = []
    tuples = confluence_tuples("S", [page("1", None)], permissions, refused)
    assert [(r.object, r.subject) for r in refused] == [(obj, s) for s in _raw_subjects(permissions, obj) if not s.startswith(("user:bob", "group:users"))]
    assert any(t.object == obj and t.user in ("user:bob", "group:users#member") for t in tuples)  # the grant beside it stays
    assert T("user:*", "unrestricted", "page:1") not in tuples or obj != "page:1"  # a restricted page stays restricted


def _raw_subjects(permissions: Permissions, obj: str) -> tuple[str, ...]:
    kind, _, name = obj.partition(":")
    return {"page": permissions.page_restrictions, "space": permissions.space_viewers, "group": permissions.group_members}[kind][name]


def test_a_restriction_whose_every_subject_is_refused_admits_nobody():
    refused = []
    tuples = confluence_tuples("S", [page("1", None)], PERMS.model_copy(update={"page_restrictions": {"1": ("user:a b",)}}), refused)
    assert not [t for t in tuples if t.object == "page:1" and t.relation in ("restricted_viewer", "unrestricted")]
    assert anchors("S", [page("1", None)], PERMS.model_copy(update={"page_restrictions": {"1": ("user:a b",)}})) == {"page:1": "page:1"}
    assert len(refused) == 1


def test_a_grant_is_one_conditioned_tuple_with_grantor_and_expiry():
    moment = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert grant_tuple("alice", "digest-bot", "weekly", moment + timedelta(hours=8)) == T(
        "agent:digest-bot",
        "delegate",
        "task:weekly",
        Condition.of("live_grant", {"grantor": "alice", "expires_at": "2026-12-01T20:00:00.000000Z"}),
    )
    with pytest.raises(InvalidArgument):
        grant_tuple("alice", "bot#member", "weekly", moment)


def test_the_grant_question_carries_the_acting_user_and_the_time():
    check = holds_live_grant(Principal(user="alice", agent="bot", task="t"), datetime(2026, 12, 1, tzinfo=UTC))
    assert (check.user, check.relation, check.object) == ("agent:bot", "delegate", "task:t")
    assert dict(check.context) == {"acting_for": "alice", "current_time": "2026-12-01T00:00:00.000000Z"}


def test_hive_permissions_nest_committers_in_users_and_leave_carol_out():
    perms = synthetic_hive_permissions(["27362075", "1"])
    assert perms.page_restrictions == {"27362075": ("group:hive-committers#member",), "1": ()}
    assert "group:hive-committers#member" in perms.group_members["hive-users"]
    everyone = str(perms)
    assert "carol" not in everyone


def test_a_group_name_the_model_cannot_hold_gets_no_members_and_the_rest_is_written():
    refused = []
    tuples = confluence_tuples("S", [page("1", None)], PERMS.model_copy(update={"group_members": {"a b": ("user:bob",), "users": ("user:ann",)}}), refused)
    assert [r.object for r in refused] == ["group:a b"]
    assert T("user:ann", "member", "group:users") in tuples


def _issue(key: str, level: int, parent: str | None = None, project: str = "P", **extra) -> Issue:
    return Issue(key=key, project_key=project, issue_type="x", hierarchy_level=level, summary=key, parent_key=parent, position=0, url="u", markdown="", **extra)


JIRA = JiraPermissions(
    project_browsers={"P": ("project_role:P.Dev#member", "user:*")},
    role_members={"P.Dev": ("user:erin",), "Q.Dev": ("user:zed",)},
    level_members={"7": ("group:g#member", REPORTER)},
)


def test_issue_tuples_follow_the_parent_for_sub_tasks_only_and_admit_the_reporter_when_the_level_does():
    tuples = jira_tuples("P", [_issue("P-1", 1), _issue("P-2", 0, "P-1", security_level="7", reporter="bob", assignee="ann"), _issue("P-3", -1, "P-2", security_level="7")], JIRA)
    assert T("issue:P-2", "parent", "issue:P-3") in tuples
    assert not any(t.relation == "parent" and t.object == "issue:P-2" for t in tuples)  # an epic passes nothing to its story
    assert {t.object for t in tuples if t.relation == "own_visibility"} == {"issue:P-1", "issue:P-2"}
    assert T("user:bob", "reporter", "issue:P-2") in tuples and T("user:*", "level_admits_reporter", "issue:P-2") in tuples
    assert not any(t.relation in ("assignee", "level_admits_assignee") for t in tuples)  # level 7 does not admit assignees
    assert T("group:g#member", "member", "security_level:P.7") in tuples and T("user:*", "unsecured", "issue:P-1") in tuples
    assert T("security_level:P.7", "security", "issue:P-3") in tuples  # the sub-task carries its parent's level
    assert T("user:erin", "member", "project_role:P.Dev") in tuples and not any("Q.Dev" in t.object for t in tuples)
    assert T("project_role:P.Dev#member", "viewer", "project:P") in tuples


def test_a_level_shared_by_two_projects_is_one_object_per_project():
    """Jira resolves a level's role members in the issue's project: the same level id in another
    project is another object, so its members never pass the level here."""
    other = jira_tuples("Q", [_issue("Q-1", 0, project="Q", security_level="7")], JIRA)
    assert T("security_level:Q.7", "security", "issue:Q-1") in other
    assert not {t for t in other if t.object == "security_level:P.7"}


def test_issue_anchors_are_the_project_the_level_or_the_issue():
    issues = [
        _issue("P-1", 0),  # open: its project
        _issue("P-2", 0, security_level="8"),  # a level of members only: the level
        _issue("P-3", -1, "P-2", security_level="8"),  # its sub-task on the same level: the level
        _issue("P-4", -1, "P-1"),  # an open sub-task of an open story: the project
        _issue("P-5", 0, security_level="7", reporter="bob"),  # a level that admits the reporter: the issue
        _issue("P-6", -1, "P-5", security_level="7"),  # under it: the sub-task itself
        _issue("P-7", -1, "P-1", security_level="8"),  # a level under an open story: the level
    ]
    perms = JIRA.model_copy(update={"level_members": {**JIRA.level_members, "8": ("group:g#member",)}})
    assert issue_anchors("P", issues, perms) == {
        "issue:P-1": "project:P", "issue:P-2": "security_level:P.8", "issue:P-3": "security_level:P.8", "issue:P-4": "project:P",
        "issue:P-5": "issue:P-5", "issue:P-6": "issue:P-6", "issue:P-7": "security_level:P.8",
    }


@pytest.mark.parametrize(
    ("issues", "message"),
    [
        ([_issue("P-1", 0), _issue("P-1", 0)], "listed twice"),
        ([_issue("Q-1", 0, project="Q")], "belongs to project Q"),
        ([_issue("P-2", 0, "P-9")], "not an issue of project P"),
        ([_issue("P-1", -1)], "needs a parent"),
        ([_issue("P-1", 0), _issue("P-2", -1, "P-1"), _issue("P-3", -1, "P-2")], "needs a parent that is not a sub-task"),
        ([_issue("P-1", 0, "P-2"), _issue("P-2", 0, "P-1")], "cycle"),
    ],
)
def test_an_impossible_issue_tree_is_refused_before_anything_is_written(issues, message):
    with pytest.raises(SourceError, match=message):
        jira_tuples("P", issues, JIRA)


def test_a_jira_grant_the_model_cannot_hold_is_refused_alone():
    """Browse granted to each issue's reporter (a per-issue grant no project-wide relation can
    say), a holder type with no relation, a misspelt role member: each left out and reported."""
    refused = []
    odd = JIRA.model_copy(update={
        "project_browsers": {"P": ("project_role:P.Dev#member", REPORTER, "holder:projectLead", "space:S")},
        "role_members": {"P.Dev": ("user:erin", "project_role:P.Other#member")},
    })
    tuples = jira_tuples("P", [_issue("P-1", 0)], odd, refused)
    assert {(r.object, r.subject) for r in refused} == {
        ("project:P", REPORTER), ("project:P", "holder:projectLead"), ("project:P", "space:S"), ("project_role:P.Dev", "project_role:P.Other#member"),
    }
    assert "reporter" in next(str(r) for r in refused if r.subject == REPORTER)
    assert T("project_role:P.Dev#member", "viewer", "project:P") in tuples and T("user:erin", "member", "project_role:P.Dev") in tuples
