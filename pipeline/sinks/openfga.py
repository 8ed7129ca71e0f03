"""Synchronise OpenFGA with the permissions the source reports.

Wayfinder owns the spaces, pages and groups in its OpenFGA store: tuples of those types that the
source no longer implies are deleted, so a revoked permission disappears on the next run.
Delegation grants (task objects) are not the source's and are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from authz.base import RelationTuple, TupleStore
from authz.tuples import SOURCE_TYPES


@dataclass(frozen=True)
class TupleSync:
    written: int
    deleted: int
    unchanged: int


async def sync_tuples(store: TupleStore, desired: set[RelationTuple]) -> TupleSync:
    existing = {t for t in await store.read_tuples() if t.object_type in SOURCE_TYPES}
    writes, deletes = desired - existing, existing - desired
    # The store deletes before it writes: a run that stops midway leaves pages hidden, never
    # shared wider than the source says.
    await store.write_tuples(writes, deletes)
    return TupleSync(len(writes), len(deletes), len(desired & existing))
