"""OpenFGA's decision cache, when enabled, is bounded by ``decision_cache_s`` (DESIGN.md A8): a
revoked permission stops being granted within that many seconds. An OpenFGA of this module's own
(memory datastore, port 29680) with a one-second cache."""

from __future__ import annotations

import asyncio
import time

import pytest

from authz.base import RelationTuple
from authz.client import OpenFGAClient
from authz.gate import Gate
from core.models import Principal
from core.settings import Settings
from devstack import stack
from devstack.openfga import OpenFGAService
from tests.conftest import test_settings as settings_in

BOUND_S = 1.0
MEMBER = RelationTuple("user:bob", "member", "group:readers")
VIEWERS = RelationTuple("group:readers#member", "viewer", "space:S")


@pytest.fixture(scope="module")
def cached(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    own = settings_in(tmp_path_factory.mktemp("openfga-cache"))
    own = own.model_copy(
        update={"openfga": own.openfga.model_copy(update={"http_port": 29680, "grpc_port": 29681, "store_name": "cache", "decision_cache_s": BOUND_S})}
    )
    stack.up(own, notify=lambda _: None, only={"openfga"})
    try:
        yield own
    finally:
        stack.down(own, only={"openfga"})


async def sees(client: OpenFGAClient) -> bool:
    return "space:S" in await Gate(client, Principal(user="bob")).visible(["space:S"])


async def test_a_revocation_is_denied_within_the_cache_bound(cached: Settings):
    assert "--check-query-cache-enabled" in OpenFGAService(cached).run_argv()  # the caches are on here
    assert "--check-query-cache-enabled" not in OpenFGAService(Settings()).run_argv()  # and off by default
    async with OpenFGAClient(cached.openfga, provision=True) as client:
        await client.write_tuples([MEMBER, VIEWERS], [])
        assert await sees(client) and await sees(client)  # the answer is now cached
        await client.write_tuples([], [MEMBER])
        revoked = time.monotonic()
        while await sees(client):
            assert time.monotonic() - revoked <= BOUND_S + 1.0, "still granted past the documented revocation bound"
            await asyncio.sleep(0.05)
        await asyncio.sleep(BOUND_S)
        assert not await sees(client)  # and it stays revoked
