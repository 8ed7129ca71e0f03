"""How derived text is shown: descriptions and snippets cut to size, link targets the caller
cannot see removed (DESIGN.md A11), and merged entities and relations only when every document
supporting them is visible (A4; search also ranks with items rebuilt from the visible ones, and
never shows them). Search and explore show graph items the same way."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence

from authz import links, policy
from authz.gate import Gate
from retrievers.base import GraphHit

SNIPPET_MARGIN = 500  # characters beyond the snippet that link redaction may pull into it
# Entities/relations backed by more documents than this are left out: each supporting document
# must be authorized (A4), and a hub entity ("Hive") would cost hundreds of checks per request.
MAX_EVIDENCE_DOCS = 20


async def visible_graph(
    gate: Gate, graph: Sequence[GraphHit], documents: Collection[str], limit: int, *, rebuilt: bool = False
) -> list[GraphHit]:
    """The entities and relations the caller may see (A4), descriptions cut to what is shown and
    hidden link targets removed (A11). An item whose very name points at a hidden page is left
    out, names and all. With ``rebuilt``, also the items rebuilt from the visible ``documents``
    (:meth:`GraphHit.rebuilt_from`: ``partial``, no description), to rank with, never to show."""
    shown: list[GraphHit] = []
    for g in graph:
        if policy.derived_visible(g.doc_ids, documents):
            shown.append(g)
        elif rebuilt and (part := g.rebuilt_from(documents)) is not None:
            shown.append(part)
    texts = await links.redact(gate, [t for g in shown for t in (g.name, window(g.description, limit))])
    return [
        dataclasses.replace(g, description=description)
        for g, name, description in zip(shown, texts[::2], texts[1::2], strict=True)
        if name == g.name
    ]


def window(text: str, limit: int) -> str:
    """The part of ``text`` a snippet of ``limit`` characters can come from, with room for the
    characters link redaction removes; redacting only this much keeps the checks few. It ends
    between words, so the window itself cuts no reference short."""
    words = text.split()
    kept: list[str] = []
    size = 0
    for word in words:
        size += len(word) + 1
        if size > limit + SNIPPET_MARGIN:
            break
        kept.append(word)
    return " ".join(kept)


def snippet(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"
