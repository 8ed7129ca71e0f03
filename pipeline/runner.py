"""The index job: source → OpenFGA tuples, Neo4j tree, semantic index. Idempotent and resumable."""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from authz.client import OpenFGAClient
from authz.tuples import confluence_tuples
from core.models import Page
from core.settings import Settings
from navigator.store import Neo4jStore
from pipeline.sinks.openfga import TupleSync, sync_tuples
from pipeline.sinks.semantic import IndexSync, Manifest, sync_index
from pipeline.sources.base import ConfluenceSource
from retrievers.factory import semantic_index


@dataclass(frozen=True)
class IndexReport:
    spaces: int
    pages: int
    tuples: TupleSync
    index: IndexSync
    index_seconds: float
    total_seconds: float

    @property
    def docs_per_second(self) -> float:
        return self.index.indexed / self.index_seconds if self.index.indexed and self.index_seconds else 0.0


async def run_index(settings: Settings, source: ConfluenceSource, console: Console) -> IndexReport:
    started = time.monotonic()
    spaces = await source.spaces()
    permissions = await source.permissions()
    pages_by_space: dict[str, list[Page]] = {space.key: await source.pages(space.key) for space in spaces}
    all_pages = [page for pages in pages_by_space.values() for page in pages]
    console.print(f"collected {len(all_pages)} pages in {len(spaces)} space(s)")

    desired = set()
    for space in spaces:
        desired |= confluence_tuples(space.key, pages_by_space[space.key], permissions)
    async with OpenFGAClient(settings.openfga, provision=True) as fga:
        tuples = await sync_tuples(fga, desired)
    console.print(f"OpenFGA: {tuples.written} tuples written, {tuples.deleted} deleted, {tuples.unchanged} unchanged")

    async with Neo4jStore(settings.neo4j) as store:
        for space in spaces:
            await store.sync_space(space, pages_by_space[space.key])
    console.print(f"Neo4j: tree of {len(all_pages)} pages synchronised")

    settings.index_dir.mkdir(parents=True, exist_ok=True)
    index_started = time.monotonic()
    progress = Progress(
        TextColumn("indexing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    )
    async with semantic_index(settings) as index:
        with progress:
            task = progress.add_task("index", total=len(all_pages))

            def advance(count: int) -> None:
                progress.advance(task, count)
                if not console.is_terminal:  # logs and CI get a line per batch instead of a bar
                    console.print(f"indexed {int(progress.tasks[0].completed)}/{len(all_pages)} pages")

            indexed = await sync_index(
                index,
                Manifest(settings.index_dir / "manifest.json"),
                all_pages,
                settings.lightrag.insert_batch_size,
                on_progress=advance,
            )
    index_seconds = time.monotonic() - index_started
    console.print(
        f"LightRAG: {indexed.indexed} pages indexed, {indexed.deleted} deleted, {indexed.unchanged} unchanged "
        f"in {index_seconds:.1f}s"
    )
    return IndexReport(len(spaces), len(all_pages), tuples, indexed, index_seconds, time.monotonic() - started)
