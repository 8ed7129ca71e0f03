"""What the authorization gate needs from an engine, and tuples and checks in one spelling."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Condition:
    """A named OpenFGA condition and the parameters stored with the tuple (name, sorted pairs)."""

    name: str
    context: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, name: str, context: Mapping[str, str]) -> Condition:
        return cls(name, tuple(sorted(context.items())))


@dataclass(frozen=True)
class RelationTuple:
    """One relationship tuple: ``user`` has ``relation`` on ``object`` (when ``condition`` holds)."""

    user: str
    relation: str
    object: str
    condition: Condition | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        """OpenFGA's identity of a tuple: at most one tuple per key, whatever its condition."""
        return (self.user, self.relation, self.object)

    @property
    def object_type(self) -> str:
        return self.object.partition(":")[0]


@dataclass(frozen=True)
class Check:
    """One question: does ``user`` have ``relation`` on ``object``, given the request ``context``."""

    user: str
    relation: str
    object: str
    context: tuple[tuple[str, str], ...] = ()


class Authorizer(Protocol):
    """Answers many checks in one round trip. Raises AuthorizationUnavailable when it cannot."""

    @property
    def model_id(self) -> str: ...

    async def batch_check(self, checks: Sequence[Check]) -> list[bool]: ...


class TupleStore(Protocol):
    """Reads and writes the relationship tuples Wayfinder owns."""

    async def read_tuples(self, object: str | None = None) -> set[RelationTuple]:
        """Every stored tuple, or those on one ``object`` (e.g. ``task:weekly``)."""
        ...

    async def write_tuples(self, writes: Iterable[RelationTuple], deletes: Iterable[RelationTuple]) -> None:
        """Apply ``deletes`` first, then ``writes``: an interruption can only narrow access."""
        ...
