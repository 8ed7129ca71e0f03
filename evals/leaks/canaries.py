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

from core.models import Page, Permissions

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


def canary_note(canary: Canary) -> str:
    """The text planted at the top of a restricted page: its first chunk, among the first
    entities extracted."""
    return (
        f"Internal note {canary.phrase}: the {canary.phrase} review covers HiveServer2 and the Metastore. "
        f"Ask the {canary.phrase} group before changing them."
    )
