"""Synchronise the semantic index: only new or changed pages are (re)indexed, removed ones deleted.

A manifest of content hashes beside the index makes a re-run with no changes free.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.files import write_atomically
from core.models import Comment, Issue, Page
from pipeline.raw_store import StoredPage
from retrievers.base import IndexDocument, SemanticIndex


@dataclass(frozen=True)
class IndexSync:
    indexed: int
    deleted: int
    unchanged: int


def index_text(doc: Page | StoredPage | Issue | Comment) -> str:
    """A page's text under its title; an issue's or a restricted comment's Markdown, which opens
    with its issue's key."""
    if isinstance(doc, Issue | Comment):
        return doc.markdown
    return f"# {doc.title}\n\n{doc.markdown}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Manifest:
    """doc id → content hash of what the index holds. Written each time the index reports progress."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def load(self) -> dict[str, str]:
        if not self._path.exists():
            return {}
        return json.loads(self._path.read_text())

    def save(self, entries: dict[str, str]) -> None:
        write_atomically(self._path, json.dumps(entries, sort_keys=True, indent=0))


async def sync_index(
    index: SemanticIndex,
    manifest: Manifest,
    pages: Sequence[Page | Issue | Comment],
    on_progress: Callable[[int], None] | None = None,
) -> IndexSync:
    """Index what changed among ``pages`` (pages and issues) in one ``upsert`` (the index batches
    it, and works ahead on the next batch while it writes this one); the manifest follows each
    batch the index reports done."""
    held = manifest.load()
    indexed = await index.indexed_doc_ids()
    # A doc the manifest lists but the index lost (interrupted run), or one another extractor
    # extracted, is redone.
    outdated = await index.outdated_doc_ids()
    held = {doc: digest for doc, digest in held.items() if doc in indexed and doc not in outdated}
    wanted = {page.id: (page, _digest(index_text(page))) for page in pages}
    stale = sorted(indexed - set(wanted))  # what the index holds and the source no longer has
    held = {doc: digest for doc, digest in held.items() if doc not in stale}
    # A fixed, mixed order (by a digest of the id): every stretch of the run holds long and short
    # pages of every space alike, so the progress rate, and the time left it implies, hold from the start.
    todo = sorted(
        ((page, digest) for page, digest in wanted.values() if held.get(page.id) != digest),
        key=lambda item: hashlib.sha256(item[0].id.encode()).digest(),
    )
    if on_progress and len(wanted) > len(todo):
        on_progress(len(wanted) - len(todo))  # already indexed and unchanged
    saved = 0

    def done(count: int) -> None:
        nonlocal saved
        held.update((page.id, digest) for page, digest in todo[saved:count])
        manifest.save(held)
        if on_progress:
            on_progress(count - saved)
        saved = count

    if todo:  # removals ride along with the first batch: the stores are written once for both
        await index.upsert([IndexDocument(page.id, index_text(page)) for page, _ in todo], on_progress=done, remove=stale)
    elif stale:
        await index.delete(stale)
        manifest.save(held)
    return IndexSync(indexed=len(todo), deleted=len(stale), unchanged=len(wanted) - len(todo))
