"""The Hive permissions on the real OpenFGA engine, through the real client and the gate."""

from __future__ import annotations

import pytest

from authz.base import RelationTuple
from authz.client import OpenFGAClient
from authz.gate import Gate
from authz.tuples import anchors, confluence_tuples
from core.models import Principal
from core.settings import Settings
from pipeline.sinks.openfga import sync_tuples
from devstack.atlassian.export import HiveExportSource

DESIGN_DOCS = "page:27362075"
DESIGN_CHILD = "page:34019487"  # Correlation Optimizer, under DesignDocs
DESIGN_GRANDCHILD = "page:59689974"  # Hive-Tez Compatibility, under Hive on Tez, under DesignDocs
HIVESERVER2 = "page:30758712"
BOB_ONLY = "page:27822784"


@pytest.fixture(scope="module")
async def fga(services: Settings):
    settings = services.model_copy(
        update={"openfga": services.openfga.model_copy(update={"store_name": "wayfinder-permissions-test"})}
    )
    source = HiveExportSource(services.corpus_dir)
    desired = confluence_tuples("HIVE", await source.pages("HIVE"), await source.permissions())
    async with OpenFGAClient(settings.openfga, provision=True) as client:
        await sync_tuples(client, desired)
        yield client, desired


async def visible(client, user: str, *objects: str) -> set[str]:
    return await Gate(client, Principal(user=user)).visible(objects)


async def test_restricted_subtree_is_inherited(fga):
    client, _ = fga
    objects = (DESIGN_DOCS, DESIGN_CHILD, DESIGN_GRANDCHILD, HIVESERVER2)
    assert await visible(client, "alice", *objects) == set(objects)
    assert await visible(client, "bob", *objects) == {HIVESERVER2}
    assert await visible(client, "carol", *objects, "space:HIVE") == set()


async def test_every_page_is_visible_exactly_when_its_anchor_is(fga, services: Settings):
    """The pre-filter's premise, on the engine: one check per anchor answers every page behind it."""
    client, _ = fga
    source = HiveExportSource(services.corpus_dir)
    anchor_of = anchors("HIVE", await source.pages("HIVE"), await source.permissions())
    assert len(set(anchor_of.values())) < 20 < len(anchor_of)  # few checks stand for many pages
    for user in ("alice", "bob", "carol"):
        gate = Gate(client, Principal(user=user))
        seen = await gate.visible([*anchor_of, *anchor_of.values()])
        assert {page for page, anchor in anchor_of.items() if anchor in seen} == {page for page in anchor_of if page in seen}, user


async def test_single_user_restriction(fga):
    client, _ = fga
    assert await visible(client, "bob", BOB_ONLY) == {BOB_ONLY}
    assert await visible(client, "alice", BOB_ONLY) == set()


async def test_batches_beyond_the_server_limit_keep_order(fga):
    client, desired = fga
    pages = sorted({t.object for t in desired if t.object.startswith("page:")})
    assert len(pages) == 305
    gate = Gate(client, Principal(user="bob"))
    seen = await gate.visible(pages)
    assert len(gate.records) == 305
    assert 200 < len(seen) < 305
    assert DESIGN_CHILD not in seen and HIVESERVER2 in seen


async def test_resync_is_idempotent_and_revocation_is_immediate(fga):
    client, desired = fga
    again = await sync_tuples(client, desired)
    assert (again.written, again.deleted) == (0, 0)
    assert await visible(client, "bob", HIVESERVER2) == {HIVESERVER2}
    without_bob = desired - {RelationTuple("user:bob", "member", "group:hive-users")}
    revoked = await sync_tuples(client, without_bob)
    assert (revoked.written, revoked.deleted) == (0, 1)
    try:
        assert await visible(client, "bob", HIVESERVER2) == set()
    finally:
        await sync_tuples(client, desired)


async def test_unknown_store_fails_closed(services: Settings):
    settings = services.openfga.model_copy(update={"store_name": "no-such-store"})
    async with OpenFGAClient(settings) as client:
        with pytest.raises(Exception) as failure:
            await Gate(client, Principal(user="alice")).visible([HIVESERVER2])
    assert type(failure.value).__name__ == "AuthorizationUnavailable"
