"""In-memory stand-ins for the OpenFGA client, for unit tests of the code above it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from authz.base import Check, RelationTuple
from core.errors import AuthorizationUnavailable


class FakeAuthorizer:
    """Allows exactly the listed checks; ``unavailable=True`` makes every call fail closed."""

    def __init__(self, allowed: Iterable[Check] = (), *, unavailable: bool = False) -> None:
        self.allowed = set(allowed)
        self.unavailable = unavailable
        self.calls: list[list[Check]] = []

    @property
    def model_id(self) -> str:
        return "fake-model"

    async def batch_check(self, checks: Sequence[Check]) -> list[bool]:
        self.calls.append(list(checks))
        if self.unavailable:
            raise AuthorizationUnavailable("fake authorizer is unavailable")
        return [check in self.allowed for check in checks]


class FakeTupleStore:
    def __init__(self, tuples: Iterable[RelationTuple] = ()) -> None:
        self.tuples = set(tuples)
        self.log: list[tuple[list[RelationTuple], list[RelationTuple]]] = []  # (writes, deletes) per call

    async def read_tuples(self, object: str | None = None) -> set[RelationTuple]:
        return {t for t in self.tuples if object is None or t.object == object}

    async def write_tuples(self, writes: Iterable[RelationTuple], deletes: Iterable[RelationTuple]) -> None:
        """Like OpenFGA: one tuple per key, deleting a missing tuple or writing an existing key fails."""
        writes, deletes = list(writes), list(deletes)
        if {t.key for t in writes} & {t.key for t in deletes}:
            raise ValueError("one write request may not delete and write the same tuple key")
        held = {t.key for t in self.tuples}
        for t in deletes:
            if t.key not in held:
                raise ValueError(f"cannot delete a tuple that does not exist: {t.key}")
            held.discard(t.key)
        for t in writes:
            if t.key in held:
                raise ValueError(f"cannot write a tuple that already exists: {t.key}")
            held.add(t.key)
        deleted = {t.key for t in deletes}
        self.tuples = {t for t in self.tuples if t.key not in deleted} | set(writes)
        self.log.append((writes, deletes))
