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

    async def read_tuples(self) -> set[RelationTuple]:
        return set(self.tuples)

    async def write_tuples(self, writes: Iterable[RelationTuple], deletes: Iterable[RelationTuple]) -> None:
        self.tuples.difference_update(deletes)
        self.tuples.update(writes)
