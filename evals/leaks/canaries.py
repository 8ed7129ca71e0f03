"""Canary phrases: unique nonsense tokens planted at index time in restricted pages only.

A canary stands next to words visible pages share ("HiveServer2", "Metastore"), so it also ends up
in merged entity descriptions and relations, the derived text a leak would most likely travel
through. Each canary has a control: a token of the same shape that exists nowhere. Searching for
a canary one may not see must give exactly what searching for its control gives.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from core.models import Page, Permissions, Space

_CONSONANTS = "bdfgklmnprstvxz"
_VOWELS = "aeiou"


@dataclass(frozen=True)
class Canary:
    page_id: str  # typed id of the page it is planted in
    phrase: str
    control: str


def _word(seed: bytes) -> str:
    """A pronounceable nonsense word with a number: ``Vorqualex4821``."""
    digest = hashlib.sha256(seed).digest()
    letters = "".join(_CONSONANTS[digest[i] % len(_CONSONANTS)] + _VOWELS[digest[i + 1] % len(_VOWELS)] for i in range(0, 8, 2))
    return f"{letters.capitalize()}{int.from_bytes(digest[8:10], 'big') % 9000 + 1000}"


def make_canaries(page_ids: Iterable[str], seed: str = "wayfinder-leak-suite") -> list[Canary]:
    return [
        Canary(page_id, _word(f"{seed}:canary:{page_id}".encode()), _word(f"{seed}:control:{page_id}".encode()))
        for page_id in sorted(page_ids)
    ]


def restricted_pages(pages: Iterable[Page], permissions: Permissions) -> set[str]:
    """Typed ids of the pages under a view restriction, their own or an ancestor's."""
    pages = list(pages)
    parent = {p.page_id: p.parent_id for p in pages}
    restricted = set()
    for page in pages:
        node: str | None = page.page_id
        while node is not None:
            if permissions.page_restrictions.get(node):
                restricted.add(page.id)
                break
            node = parent.get(node)
    return restricted


def planted(page: Page, canary: Canary) -> Page:
    """The page with a note at its top: the first chunk, among the first entities extracted."""
    note = (
        f"Internal note {canary.phrase}: the {canary.phrase} review covers HiveServer2 and the Metastore. "
        f"Ask the {canary.phrase} group before changing them.\n\n"
    )
    return page.model_copy(update={"markdown": note + page.markdown})


class Source(Protocol):
    async def spaces(self) -> list[Space]: ...

    async def pages(self, space_key: str) -> list[Page]: ...

    async def permissions(self) -> Permissions: ...


class CanarySource:
    """A content source with a canary planted in each of its restricted pages."""

    def __init__(self, inner: Source) -> None:
        self._inner = inner
        self.canaries: list[Canary] = []

    async def spaces(self) -> list[Space]:
        return await self._inner.spaces()

    async def permissions(self) -> Permissions:
        return await self._inner.permissions()

    async def pages(self, space_key: str) -> list[Page]:
        pages = await self._inner.pages(space_key)
        canaries = {c.page_id: c for c in make_canaries(restricted_pages(pages, await self.permissions()))}
        self.canaries = sorted({*self.canaries, *canaries.values()}, key=lambda c: c.page_id)
        return [planted(page, canaries[page.id]) if page.id in canaries else page for page in pages]
