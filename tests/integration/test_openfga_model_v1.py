"""Model v1 on the real OpenFGA engine: trees deeper than 25, moves that never widen, delegation
grants with expiry, spaces open to everyone, and fail-closed without stalls."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from authz import grants
from authz.base import RelationTuple
from authz.client import MAX_TUPLES_PER_WRITE, OpenFGAClient
from authz.gate import Gate
from authz.tuples import confluence_tuples
from core.errors import AuthorizationUnavailable, Unauthenticated
from core.models import Page, Permissions, Principal
from core.settings import Settings
from pipeline.sinks.openfga import sync_tuples

DEPTH = 40
PERMS = Permissions(
    space_viewers={"S": ("group:staff#member",), "O": ("user:*",)},
    page_restrictions={},
    group_members={"staff": ("user:alice", "user:bob"), "committers": ("user:alice",)},
)


def page(pid: str, parent: str | None, space: str = "S", position: int = 0) -> Page:
    return Page(page_id=pid, space_key=space, title=pid, parent_id=parent, position=position, url="u", markdown="")


def chain(depth: int) -> list[Page]:
    """1 (root) -> 2 -> ... -> depth, and a restricted root 999 beside it."""
    return [page("1", None)] + [page(str(n), str(n - 1)) for n in range(2, depth + 1)] + [page("999", None, position=1)]


def perms_for(pages: list[Page], restricted: dict[str, tuple[str, ...]] | None = None) -> Permissions:
    return PERMS.model_copy(
        update={"page_restrictions": {p.page_id: () for p in pages} | {"999": ("group:committers#member",)} | (restricted or {})}
    )


def desired(pages: list[Page], restricted: dict[str, tuple[str, ...]] | None = None) -> set[RelationTuple]:
    return confluence_tuples("S", pages, perms_for(pages, restricted))


@pytest.fixture(scope="module")
async def fga(services: Settings):
    settings = services.openfga.model_copy(update={"store_name": "wayfinder-model-v1-test"})
    async with OpenFGAClient(settings, provision=True) as client:
        await sync_tuples(client, desired(chain(DEPTH)))
        yield client


async def visible(client, user: str, *objects: str) -> set[str]:
    return await Gate(client, Principal(user=user)).visible(objects)


async def test_restrictions_nested_30_deep_resolve_past_the_default_depth_of_25(fga):
    nested = [page("2001", None, "N")] + [page(str(2000 + n), str(1999 + n), "N") for n in range(2, 31)]
    staff_only = {p.page_id: ("group:staff#member",) for p in nested}
    tuples = confluence_tuples(
        "N", nested, Permissions(space_viewers={"N": ("user:*",)}, page_restrictions=staff_only, group_members={})
    )
    await fga.write_tuples(tuples, ())
    try:
        assert await visible(fga, "bob", "page:2030") == {"page:2030"}
        assert await visible(fga, "carol", "page:2030", "page:2001") == set()
    finally:
        await fga.write_tuples((), tuples)


async def test_a_tree_deeper_than_25_levels_resolves_and_inherits(fga):
    deepest = f"page:{DEPTH}"
    assert await visible(fga, "bob", deepest, "page:26", "page:1") == {deepest, "page:26", "page:1"}
    assert await visible(fga, "carol", deepest) == set()
    # Move the whole chain under the restricted root: the restriction reaches 40 levels down.
    moved = [page("1", "999")] + chain(DEPTH)[1:]
    await sync_tuples(fga, desired(moved))
    try:
        assert await visible(fga, "bob", deepest, "page:2") == set()
        assert await visible(fga, "alice", deepest) == {deepest}
    finally:
        await sync_tuples(fga, desired(chain(DEPTH)))


def flat_space(parent: str, count: int = 70) -> set[RelationTuple]:
    """Space W: roots w-open and w-locked (committers only), ``count`` pages under ``parent``."""
    pages = [page("900", None, "W"), page("901", None, "W", 1)] + [page(str(1000 + n), parent, "W", n) for n in range(count)]
    restrictions = {p.page_id: () for p in pages} | {"901": ("group:committers#member",)}
    return confluence_tuples("W", pages, Permissions(space_viewers={"W": ("group:staff#member",)}, page_restrictions=restrictions, group_members={}))


@pytest.fixture
def recorded(fga):
    """Records each write request the client sends; ``cut`` makes requests with writes fail."""
    sent: list[tuple[int, int]] = []
    real_write = fga._sdk.write
    state = {"cut": False}

    async def write(request, *args):
        sent.append((len(request.writes or ()), len(request.deletes or ())))
        if state["cut"] and request.writes:
            raise ConnectionError("interrupted")
        return await real_write(request, *args)

    fga._sdk.write = write
    yield sent, state
    fga._sdk.write = real_write


async def test_a_small_move_is_one_transaction(fga, recorded):
    sent, _ = recorded
    await fga.write_tuples(flat_space("900", 3), ())
    try:
        sent.clear()
        before, after = flat_space("900", 3), flat_space("901", 3)
        await fga.write_tuples(after - before, before - after)
        assert sent == [(3, 3)]  # deletes and writes in one request: no window in between
        assert await visible(fga, "bob", "page:1000") == set()
    finally:
        await fga.write_tuples((), flat_space("901", 3))


async def test_a_large_change_cut_off_midway_has_only_narrowed_access(fga, recorded):
    sent, state = recorded
    before, after = flat_space("900"), flat_space("901")
    watched = [f"page:{1000 + n}" for n in range(70)]
    await fga.write_tuples(before, ())
    try:
        assert await visible(fga, "bob", *watched) == set(watched)
        sent.clear()
        state["cut"] = True
        with pytest.raises(AuthorizationUnavailable):
            await fga.write_tuples(after - before, before - after)  # 140 changes: deletes first
        assert len(after - before) + len(before - after) > MAX_TUPLES_PER_WRITE
        assert sent == [(0, len(before - after)), (len(after - before), 0)]
        assert await visible(fga, "bob", *watched) == set()  # hidden midway, never wider
        state["cut"] = False
        await fga.write_tuples(after - before, ())  # the next run finishes the change
        assert await visible(fga, "bob", *watched) == set()
        assert await visible(fga, "alice", *watched) == set(watched)
    finally:
        state["cut"] = False
        await sync_tuples(fga, desired(chain(DEPTH)))


async def test_a_space_open_to_everyone_admits_any_user_but_not_past_restrictions(fga):
    pages = [page("5001", None, space="O"), page("5002", "5001", space="O")]
    restrictions = {"5001": (), "5002": ("user:alice",)}
    tuples = confluence_tuples("O", pages, PERMS.model_copy(update={"page_restrictions": restrictions, "group_members": {}}))
    await fga.write_tuples(tuples, ())
    try:
        assert await visible(fga, "carol", "space:O", "page:5001", "page:5002") == {"space:O", "page:5001"}
        assert await visible(fga, "alice", "page:5002") == {"page:5002"}
    finally:
        await fga.write_tuples((), tuples)


async def test_an_agent_acts_only_on_a_live_grant_from_that_user(fga):
    agent = Principal(user="alice", agent="digest-bot", task="weekly-alice")
    with pytest.raises(Unauthenticated):  # no grant yet
        await Gate(fga, agent).visible(["page:1"])
    await grants.grant(fga, "alice", "digest-bot", "weekly-alice", timedelta(hours=1))
    try:
        assert await Gate(fga, agent).visible(["page:1", "page:999"]) == {"page:1", "page:999"}
        # The grant never lends more than the user has: bob's view through alice's grant is denied.
        as_bob = Principal(user="bob", agent="digest-bot", task="weekly-alice")
        with pytest.raises(Unauthenticated):
            await Gate(fga, as_bob).visible(["page:1"])
        later = Gate(fga, agent, clock=lambda: datetime.now(UTC) + timedelta(hours=2))
        with pytest.raises(Unauthenticated):  # OpenFGA judges the expiry with the request's time
            await later.visible(["page:1"])
        await grants.revoke(fga, "alice", agent="digest-bot")
        with pytest.raises(Unauthenticated):
            await Gate(fga, agent).visible(["page:1"])
    finally:
        await grants.revoke(fga, "alice")


async def test_an_index_run_leaves_grants_alone(fga):
    await grants.grant(fga, "bob", "slack-bot", "answers-bob", timedelta(hours=1))
    try:
        await sync_tuples(fga, desired(chain(DEPTH)))
        assert [g.task for g in await grants.list_grants(fga)] == ["answers-bob"]
    finally:
        await grants.revoke(fga, "bob")


@pytest.fixture
async def black_hole():
    """A port that accepts connections and never answers: OpenFGA hung."""
    held: list[asyncio.StreamWriter] = []

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    for writer in held:
        writer.close()
    server.close()
    await server.wait_closed()


@pytest.mark.parametrize("hung", [True, False])
async def test_with_openfga_hung_or_down_requests_fail_within_one_deadline_without_queueing(services, black_hole, hung):
    port = black_hole if hung else 1  # port 1: nothing listens, connections are refused
    settings = services.openfga.model_copy(update={"http_port": port, "check_timeout_s": 0.5})
    async with OpenFGAClient(settings) as client:
        started = time.monotonic()
        outcomes = await asyncio.gather(
            *(Gate(client, Principal(user="alice"), deadline_s=0.5).visible(["page:1"]) for _ in range(10)),
            return_exceptions=True,
        )
        elapsed = time.monotonic() - started
    assert all(isinstance(o, AuthorizationUnavailable) for o in outcomes), outcomes
    assert elapsed < 1.5, f"10 concurrent requests took {elapsed:.2f}s: they queued"
