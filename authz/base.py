"""What the authorization gate needs from an engine, and a tuple in one spelling."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, order=True)
class RelationTuple:
    """One relationship tuple or one check question: does ``user`` have ``relation`` on ``object``."""

    user: str
    relation: str
    object: str


Check = RelationTuple


class Authorizer(Protocol):
    """Answers many checks in one round trip. Raises AuthorizationUnavailable when it cannot."""

    @property
    def model_id(self) -> str: ...

    async def batch_check(self, checks: Sequence[Check]) -> list[bool]: ...


class TupleStore(Protocol):
    """Reads and writes the relationship tuples Wayfinder owns."""

    async def read_tuples(self) -> set[RelationTuple]: ...

    async def write_tuples(
        self, writes: Iterable[RelationTuple], deletes: Iterable[RelationTuple]
    ) -> None: ...
