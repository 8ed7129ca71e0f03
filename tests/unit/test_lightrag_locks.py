"""LightRAG's keyed locks as one process takes them: the same exclusion, nothing left behind."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from retrievers import lightrag_adapter
from retrievers.lightrag_adapter import _lightrag_shared as shared_storage
from retrievers.lightrag_locks import SingleProcessKeyedLocks


@pytest.fixture
def locks() -> Iterator[Any]:
    shared_storage.initialize_share_data()  # one process, as LightRAG() sets it up
    lightrag_adapter._use_single_process_locks()
    table = shared_storage._storage_keyed_lock
    assert isinstance(table, SingleProcessKeyedLocks)
    yield table._table  # LightRAG's own table: what the locks count, and drop, is there
    shared_storage.finalize_share_data()


def test_a_multiprocess_setup_keeps_lightrags_own_locks(monkeypatch: pytest.MonkeyPatch) -> None:
    shared_storage.initialize_share_data()
    try:
        monkeypatch.setattr(shared_storage, "_is_multiprocess", True)
        lightrag_adapter._use_single_process_locks()
        assert not isinstance(shared_storage._storage_keyed_lock, SingleProcessKeyedLocks)
    finally:
        shared_storage.finalize_share_data()


async def test_overlapping_keys_exclude_each_other_and_the_table_empties(locks: Any) -> None:
    events: list[str] = []
    first_in = asyncio.Event()

    async def hold(name: str, keys: list[str], entered: asyncio.Event | None = None) -> None:
        async with shared_storage.get_storage_keyed_lock(keys, namespace="hive:GraphDB"):
            events.append(f"{name} in")
            if entered is not None:
                entered.set()
            await asyncio.sleep(0.01)
            events.append(f"{name} out")

    a = asyncio.create_task(hold("a", ["Metastore", "HiveServer2"], first_in))
    await first_in.wait()
    # one key shared, given the other way round: b waits for a; c shares nothing and does not
    await asyncio.gather(hold("b", ["HiveServer2", "JDBC"]), hold("c", ["Beeline"]), a)
    assert events.index("b in") > events.index("a out")
    assert events.index("c in") < events.index("a out")
    assert locks._async_lock == {} and locks._async_lock_count == {}


async def test_a_cancelled_waiter_releases_what_it_took(locks: Any) -> None:
    holding = asyncio.Event()
    release = asyncio.Event()

    async def holder() -> None:
        async with shared_storage.get_storage_keyed_lock(["k"], namespace="ns"):
            holding.set()
            await release.wait()

    held = asyncio.create_task(holder())
    await holding.wait()
    waiter = asyncio.create_task(shared_storage.get_storage_keyed_lock(["j", "k"], namespace="ns").__aenter__())
    await asyncio.sleep(0.01)  # it has "j" and waits for "k"
    assert locks._async_lock_count == {"ns:j": 1, "ns:k": 2}
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert locks._async_lock_count == {"ns:k": 1}
    release.set()
    await held
    assert locks._async_lock == {}
    async with asyncio.timeout(1), shared_storage.get_storage_keyed_lock(["j", "k"], namespace="ns"):
        assert locks._async_lock_count == {"ns:j": 1, "ns:k": 1}
    assert locks._async_lock == {}


async def test_an_error_inside_releases_and_propagates(locks: Any) -> None:
    with pytest.raises(ValueError, match="inside"):
        async with shared_storage.get_storage_keyed_lock(["x"], namespace="ns"):
            raise ValueError("inside")
    assert locks._async_lock == {}
    pipeline = shared_storage.get_namespace_lock("pipeline_status", workspace="hive")  # built on the keyed locks
    async with pipeline:
        assert list(locks._async_lock) == ["hive:pipeline_status:default_key"]
    assert locks._async_lock == {}


async def test_held_locks_cannot_be_entered_twice(locks: Any) -> None:
    held = shared_storage.get_storage_keyed_lock(["x"], namespace="ns")
    async with held:
        with pytest.raises(RuntimeError, match="already held"):
            await held.__aenter__()
    assert locks._async_lock == {}
