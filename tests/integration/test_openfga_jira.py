"""Jira permissions on the real OpenFGA engine, written by the builders: browse through users,
groups and project roles; security levels with their members, reporter and assignee; sub-tasks
that follow their parent; moves and level changes that narrow at once."""

from __future__ import annotations

import pytest

from authz.client import OpenFGAClient
from authz.gate import Gate
from authz.tuples import issue_anchors, jira_tuples
from core.models import ASSIGNEE, REPORTER, Comment, Issue, JiraPermissions, Principal
from core.settings import Settings
from pipeline.sinks.openfga import sync_tuples

PERMS = JiraPermissions(
    project_browsers={"P": ("group:users#member", "project_role:P.Developers#member")},
    role_members={"P.Developers": ("user:erin", "group:committers#member"), "P.Committers": ("user:alice",)},
    level_members={"10": ("project_role:P.Committers#member",), "11": ("project_role:P.Developers#member", REPORTER, ASSIGNEE)},
    group_members={"committers": ("user:alice",), "users": ("group:committers#member", "user:bob")},
)


def issue(key: str, level: int, parent: str | None = None, security: str | None = None, **people: str) -> Issue:
    kind = {1: "Epic", 0: "Story", -1: "Sub-task"}[level]
    return Issue(
        key=key, project_key="P", issue_type=kind, hierarchy_level=level, summary=key, parent_key=parent, position=0,
        url="u", markdown="", security_level=security, **people,
    )


ISSUES = [
    issue("P-1", 1),  # an epic
    issue("P-2", 0, "P-1", "10"),  # its story, at level Security (the Committers role)
    issue("P-3", -1, "P-2", "10"),  # the story's sub-task
    issue("P-4", 0, "P-1", "11", reporter="bob", assignee="frank"),  # Internal: Developers, reporter, assignee
    issue("P-5", 0, "P-1"),  # an open story under the epic
    issue("P-6", -1, "P-5"),  # its sub-task, with no level of its own
    issue("P-7", -1, "P-4"),  # a sub-task of the Internal story, with no level of its own
]
EVERYONE = ["alice", "bob", "erin", "frank", "carol"]


@pytest.fixture(scope="module")
async def fga(services: Settings):
    settings = services.openfga.model_copy(update={"store_name": "wayfinder-jira-test"})
    async with OpenFGAClient(settings, provision=True) as client:
        await sync_tuples(client, jira_tuples("P", ISSUES, PERMS))
        yield client


async def seen(client: OpenFGAClient) -> dict[str, set[str]]:
    objects = ["project:P", *(i.id for i in ISSUES)]
    return {user: await Gate(client, Principal(user=user)).visible(objects) for user in EVERYONE}


async def test_browse_levels_and_sub_tasks(fga):
    assert await seen(fga) == {
        "alice": {"project:P", *(f"issue:P-{n}" for n in range(1, 8))},
        "bob": {"project:P", "issue:P-1", "issue:P-4", "issue:P-5", "issue:P-6", "issue:P-7"},  # P-4 as its reporter
        "erin": {"project:P", "issue:P-1", "issue:P-4", "issue:P-5", "issue:P-6", "issue:P-7"},  # browse and Internal through the role
        "frank": set(),  # P-4's assignee, but no browse
        "carol": set(),
    }


async def test_a_level_change_and_a_role_change_narrow_on_the_next_sync(fga):
    changed = [*ISSUES[:4], issue("P-5", 0, "P-1", "10"), *ISSUES[5:]]  # the open story moves to level Security
    fewer = PERMS.model_copy(update={"role_members": {**PERMS.role_members, "P.Developers": ("group:committers#member",)}})
    await sync_tuples(fga, jira_tuples("P", changed, fewer))
    try:
        after = await seen(fga)
        assert "issue:P-5" not in after["bob"] and "issue:P-5" in after["alice"]
        assert "issue:P-6" not in after["bob"]  # the sub-task follows its story
        assert after["erin"] == set()  # no longer a developer: no browse, no Internal
        assert "issue:P-4" in after["bob"]  # still its reporter
    finally:
        await sync_tuples(fga, jira_tuples("P", ISSUES, PERMS))  # as the other tests expect it


async def test_every_issue_is_visible_exactly_when_its_anchor_is(fga):
    """The pre-filter's premise for issues, on the engine: one check per anchor answers every
    issue behind it (the project for open issues, a sub-task's parent's anchor, a secured issue itself)."""
    anchor_of = issue_anchors("P", ISSUES, PERMS)
    assert anchor_of["issue:P-5"] == anchor_of["issue:P-6"] == "project:P" and anchor_of["issue:P-7"] == "issue:P-4"
    assert anchor_of["issue:P-2"] == anchor_of["issue:P-3"] == "security_level:P.10"  # Security admits no reporter
    for user in EVERYONE:
        visible = await Gate(fga, Principal(user=user)).visible(["project:P", *anchor_of, *anchor_of.values()])
        # The pre-filter asks about anchors only inside a project the user may browse.
        behind = {i for i, anchor in anchor_of.items() if anchor in visible and "project:P" in visible}
        assert behind == {i for i in anchor_of if i in visible}, user


async def test_a_level_shared_with_another_project_admits_only_this_projects_role(fga):
    """Project Q uses the same Security level (10) for its own Committers; quinn, a Committer of
    Q who browses P, must not pass P's Security level."""
    q_perms = JiraPermissions(
        project_browsers={"Q": ("user:quinn",)}, role_members={"Q.Committers": ("user:quinn",)},
        level_members={"10": ("project_role:Q.Committers#member",)}, group_members={"users": ("user:quinn",)},
    )
    q_issue = Issue(key="Q-1", project_key="Q", issue_type="Story", hierarchy_level=0, summary="Q-1", parent_key=None, position=0, url="u", markdown="", security_level="10")
    await sync_tuples(fga, jira_tuples("P", ISSUES, PERMS) | jira_tuples("Q", [q_issue], q_perms))
    try:
        seen_by_quinn = await Gate(fga, Principal(user="quinn")).visible(["project:P", "issue:P-1", "issue:P-2", "issue:Q-1"])
        assert seen_by_quinn == {"project:P", "issue:P-1", "issue:Q-1"}  # browse P, Security only in Q
    finally:
        await sync_tuples(fga, jira_tuples("P", ISSUES, PERMS))


def comment(number: int, issue_key: str, audience: str) -> Comment:
    return Comment(comment_id=str(number), issue_key=issue_key, project_key="P", audience=audience, title="t", url="u", markdown="m")


async def test_a_restricted_comment_is_read_by_its_issues_readers_in_its_role_or_group_and_an_unwritable_one_by_nobody(fga):
    """DESIGN.md A14 on the engine: a comment restricted to a role or a group is a document of its
    own, never wider than its issue; an audience the model cannot hold is refused and reported,
    and the comment is then read by nobody while every other tuple is written."""
    notes = {
        "P-5": (comment(100, "P-5", "project_role:P.Committers#member"), comment(101, "P-5", "group:committers#member"),
                comment(102, "P-5", "project_role:P.Dev elopers#member"), comment(103, "P-5", "holder:x")),
        "P-2": (comment(104, "P-2", "project_role:P.Developers#member"),),
    }
    issues = [i.model_copy(update={"comments": notes.get(i.key, ())}) for i in ISSUES]
    refused: list = []
    await sync_tuples(fga, jira_tuples("P", issues, PERMS, refused))
    try:
        assert sorted(r.object for r in refused) == ["comment:102", "comment:103"]
        objects = [f"comment:{n}" for n in range(100, 105)]
        seen_comments = {user: await Gate(fga, Principal(user=user)).visible(objects) for user in EVERYONE}
        assert seen_comments == {
            "alice": {"comment:100", "comment:101", "comment:104"},
            "bob": set(),  # reads P-5, in neither the role nor the group
            "erin": set(),  # a developer, but P-2's level is the Committers'
            "frank": set(),
            "carol": set(),
        }
        # Comments sharing their issue's anchor and their audience share one anchor: one check answers each.
        more = [i.model_copy(update={"comments": (*i.comments, comment(105, "P-6", "project_role:P.Committers#member"))}) if i.key == "P-6" else i for i in issues]
        await sync_tuples(fga, jira_tuples("P", more, PERMS))
        anchor_of = issue_anchors("P", more, PERMS)
        assert anchor_of["comment:105"] == "comment:100" and anchor_of["comment:101"] == "comment:101" and anchor_of["comment:104"] == "comment:104"
        assert issue_anchors("P", more, PERMS, hidden={"comment:100"})["comment:105"] == "comment:105"  # a hidden one answers for nobody
        noted = [*objects, "comment:105"]
        for user in EVERYONE:
            visible = await Gate(fga, Principal(user=user)).visible(noted + [anchor_of[c] for c in noted])
            assert {c for c in noted if anchor_of[c] in visible} == {c for c in noted if c in visible}, user
    finally:
        await sync_tuples(fga, jira_tuples("P", ISSUES, PERMS))
