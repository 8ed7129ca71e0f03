"""Synchronise OpenFGA with the permissions the source reports.

Wayfinder owns its OpenFGA store: tuples that the source no longer implies are deleted, so a
revoked permission disappears on the next run.
"""

from __future__ import annotations

from dataclasses import dataclass

from authz.base import RelationTuple, TupleStore


@dataclass(frozen=True)
class TupleSync:
    written: int
    deleted: int
    unchanged: int


async def sync_tuples(store: TupleStore, desired: set[RelationTuple]) -> TupleSync:
    existing = await store.read_tuples()
    writes, deletes = desired - existing, existing - desired
    # Delete before writing: the model only grants, so a deletion can only narrow access. A run
    # that stops between the two leaves pages hidden, never shared wider than the source says.
    await store.write_tuples((), deletes)
    await store.write_tuples(writes, ())
    return TupleSync(len(writes), len(deletes), len(desired & existing))
