from datetime import UTC, datetime, timedelta

import pytest

from authz import grants
from authz.base import RelationTuple
from authz.fake import FakeTupleStore
from core.errors import InvalidArgument

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
PAGE = RelationTuple("user:*", "exists", "page:1")


async def test_grant_list_renew_and_revoke():
    store = FakeTupleStore([PAGE])
    made = await grants.grant(store, "alice", "digest-bot", "weekly", timedelta(hours=8), NOW)
    assert made == grants.Grant("alice", "digest-bot", "weekly", NOW + timedelta(hours=8))
    assert await grants.list_grants(store) == [made]
    renewed = await grants.grant(store, "alice", "digest-bot", "weekly", timedelta(hours=1), NOW)
    assert await grants.list_grants(store) == [renewed]  # replaced, not doubled
    assert [(len(w), len(d)) for w, d in store.log[-2:]] == [(0, 1), (1, 0)]  # the old goes first
    assert await grants.revoke(store, "alice") == [renewed]
    assert await grants.list_grants(store) == [] and store.tuples == {PAGE}  # page tuples untouched


async def test_another_users_grant_on_the_same_task_is_not_taken_over():
    store = FakeTupleStore()
    await grants.grant(store, "alice", "bot", "shared", timedelta(hours=1), NOW)
    with pytest.raises(InvalidArgument, match="already acts for user 'alice'"):
        await grants.grant(store, "bob", "bot", "shared", timedelta(hours=1), NOW)


async def test_revoke_selects_by_agent_and_task():
    store = FakeTupleStore()
    for agent, task in [("a", "t1"), ("a", "t2"), ("b", "t1")]:
        await grants.grant(store, "alice", agent, task, timedelta(hours=1), NOW)
    await grants.grant(store, "bob", "a", "t3", timedelta(hours=1), NOW)
    assert [(g.agent, g.task) for g in await grants.revoke(store, "alice", agent="a")] == [("a", "t1"), ("a", "t2")]
    assert {(g.user, g.agent, g.task) for g in await grants.list_grants(store)} == {("alice", "b", "t1"), ("bob", "a", "t3")}


@pytest.mark.parametrize(("text", "expected"), [("90s", timedelta(seconds=90)), ("8h", timedelta(hours=8)), ("7d", timedelta(days=7))])
def test_lifetimes_parse(text, expected):
    assert grants.parse_ttl(text) == expected


@pytest.mark.parametrize("text", ["", "8", "0h", "91d", "1w", "-1h", "1h\n2h"])
def test_bad_lifetimes_are_refused(text):
    with pytest.raises(InvalidArgument):
        grants.parse_ttl(text)


def test_a_grant_is_live_until_its_expiry():
    g = grants.Grant("alice", "bot", "t", NOW)
    assert g.live(NOW - timedelta(seconds=1)) and not g.live(NOW)
