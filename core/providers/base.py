"""What the semantic index needs from model providers, as two small Protocols.

An ``Embedder`` turns passages into vectors; an ``Extractor`` turns a passage into entities and
relations and a query into keywords. The offline implementations live in ``core.providers.local``;
hosted models (Gemini) plug in through the same shapes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

#: ``(name, type, description)``
Entity = tuple[str, str, str]
#: ``(source, target, keywords, description)``
Relation = tuple[str, str, str, str]


@dataclass(frozen=True)
class Extraction:
    """Entities and relations found in one passage."""

    entities: list[Entity] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)


@runtime_checkable
class Embedder(Protocol):
    """Turns passages into fixed-size vectors (one row per passage)."""

    dim: int

    async def embed(self, texts: list[str]) -> np.ndarray:
        """Return an array of shape ``(len(texts), dim)``."""
        ...


@runtime_checkable
class Extractor(Protocol):
    """Finds entities and relations in text, and search keywords in a query."""

    def extract(self, text: str) -> Extraction:
        """Entities and relations stated in ``text``."""
        ...

    def keywords(self, query: str) -> tuple[list[str], list[str]]:
        """``(high_level, low_level)`` keywords: themes and concepts, then named things."""
        ...

    def prefetch(self, texts: Sequence[str]) -> None:
        """A hint: ``extract`` will soon be asked for these texts. An extractor that can work
        ahead (in other processes, or by batching a hosted model's calls) starts now; one that
        cannot ignores it."""
        ...

    def close(self) -> None:
        """Release workers or clients; the extractor may be used again afterwards."""
        ...


@dataclass(frozen=True)
class ImageContext:
    """An image and where it sits: what alt text is written from."""

    filename: str
    media_type: str
    data: bytes
    page_title: str
    heading_path: tuple[str, ...]
    context: str  # the text around the image
    caption: str  # the author's caption or alt text, if any


@runtime_checkable
class AltTextWriter(Protocol):
    """Writes alt text for an image in its context. ``source`` names the writer in the cache."""

    source: str

    async def describe(self, image: ImageContext) -> str: ...
