"""Delegation grants (DESIGN.md A2): a user lets an agent act for them on one task until a deadline.

A grant is one tuple, ``task:T#delegate@agent:A`` under the ``live_grant`` condition with the
grantor and the expiry stored in it; the gate asks for it beside every batch of the agent's checks
and OpenFGA judges the expiry against the request's time. Revoking deletes the tuple: the next
request of the agent is refused. Grants live beside the synchronised tuples but are never touched
by an index run (authz.tuples.SOURCE_TYPES).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from authz.base import RelationTuple, TupleStore
from authz.tuples import DELEGATE, LIVE_GRANT, grant_tuple
from core import ids
from core.errors import InvalidArgument

MAX_TTL = timedelta(days=90)
_TTL = re.compile(r"(?P<amount>\d{1,6})(?P<unit>[smhd])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


@dataclass(frozen=True)
class Grant:
    user: str
    agent: str
    task: str
    expires_at: datetime

    def live(self, now: datetime) -> bool:
        return now < self.expires_at


def parse_ttl(text: str) -> timedelta:
    """``90s``, ``30m``, ``8h``, ``7d``: how long a grant lives, at most :data:`MAX_TTL`."""
    match = _TTL.fullmatch(text.strip())
    if not match:
        raise InvalidArgument(f"invalid lifetime {text!r}: use a number and s, m, h or d, e.g. '8h'")
    ttl = timedelta(**{_UNITS[match["unit"]]: int(match["amount"])})
    if not timedelta(0) < ttl <= MAX_TTL:
        raise InvalidArgument(f"a grant lives more than 0 and at most {MAX_TTL.days} days, not {text!r}")
    return ttl


def _as_grant(t: RelationTuple) -> Grant | None:
    if t.relation != DELEGATE or t.condition is None or t.condition.name != LIVE_GRANT:
        return None
    context = dict(t.condition.context)
    expires = datetime.fromisoformat(context["expires_at"].replace("Z", "+00:00"))
    return Grant(context["grantor"], t.user.removeprefix("agent:"), t.object.removeprefix("task:"), expires)


async def _grant_tuples(store: TupleStore, task: str | None = None) -> list[tuple[RelationTuple, Grant]]:
    # OpenFGA reads one object, or everything: grants are few, and listing all is an admin's act.
    tuples = await store.read_tuples(ids.task_id(task) if task else None)
    return [(t, g) for t in tuples if t.object_type == "task" and (g := _as_grant(t)) is not None]


async def list_grants(store: TupleStore) -> list[Grant]:
    grants = [g for _, g in await _grant_tuples(store)]
    return sorted(grants, key=lambda g: (g.user, g.agent, g.task))


async def grant(store: TupleStore, user: str, agent: str, task: str, ttl: timedelta, now: datetime | None = None) -> Grant:
    """Grant (or renew) ``agent`` acting for ``user`` on ``task`` for ``ttl``.

    A task is one user's: if another user already granted this agent the same task, that is an
    error naming both, not a silent takeover.
    """
    if not timedelta(0) < ttl <= MAX_TTL:
        raise InvalidArgument(f"a grant lives more than 0 and at most {MAX_TTL.days} days")
    new = grant_tuple(user, agent, task, (now or datetime.now(UTC)) + ttl)
    old = {t for t, _ in await _grant_tuples(store, task) if t.key == new.key}
    for existing in old:
        held = _as_grant(existing)
        if held is not None and held.user != user:
            raise InvalidArgument(
                f"agent {agent!r} already acts for user {held.user!r} on task {task!r}; "
                f"user {user!r} needs a task id of their own"
            )
    # OpenFGA refuses one request that deletes and writes the same key: the old grant goes first
    # (for a moment there is none, which only narrows), then the new one is written.
    if old:
        await store.write_tuples((), old)
    await store.write_tuples([new], ())
    result = _as_grant(new)
    assert result is not None
    return result


async def revoke(store: TupleStore, user: str, agent: str | None = None, task: str | None = None) -> list[Grant]:
    """Delete ``user``'s grants (all of them, or those to ``agent`` and/or for ``task``)."""
    ids.user_id(user)
    doomed = [
        (t, g)
        for t, g in await _grant_tuples(store, task)
        if g.user == user and (agent is None or g.agent == agent)
    ]
    await store.write_tuples((), [t for t, _ in doomed])
    return sorted((g for _, g in doomed), key=lambda g: (g.agent, g.task))
