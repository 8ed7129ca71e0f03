"""Jira permissions on the real OpenFGA engine, written by the builders: browse through users,
groups and project roles; security levels with their members, reporter and assignee; sub-tasks
that follow their parent; moves and level changes that narrow at once."""

from __future__ import annotations

import pytest

from authz.client import OpenFGAClient
from authz.gate import Gate
from authz.tuples import jira_tuples
from core.models import ASSIGNEE, REPORTER, Issue, JiraPermissions, Principal
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
        "alice": {"project:P", "issue:P-1", "issue:P-2", "issue:P-3", "issue:P-4", "issue:P-5"},
        "bob": {"project:P", "issue:P-1", "issue:P-4", "issue:P-5"},  # P-4 as its reporter
        "erin": {"project:P", "issue:P-1", "issue:P-4", "issue:P-5"},  # browse and Internal through the role
        "frank": set(),  # P-4's assignee, but no browse
        "carol": set(),
    }


async def test_a_level_change_and_a_role_change_narrow_on_the_next_sync(fga):
    changed = [*ISSUES[:4], issue("P-5", 0, "P-1", "10")]  # the open story moves to level Security
    fewer = PERMS.model_copy(update={"role_members": {**PERMS.role_members, "P.Developers": ("group:committers#member",)}})
    await sync_tuples(fga, jira_tuples("P", changed, fewer))
    try:
        after = await seen(fga)
        assert "issue:P-5" not in after["bob"] and "issue:P-5" in after["alice"]
        assert after["erin"] == set()  # no longer a developer: no browse, no Internal
        assert "issue:P-4" in after["bob"]  # still its reporter
    finally:
        await sync_tuples(fga, jira_tuples("P", ISSUES, PERMS))  # as the other tests expect it
