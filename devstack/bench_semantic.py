"""``make bench-semantic``: does search keep its recall when a user may see a small share of a large
corpus? Measured side by side in one run, on a stack of its own.

The corpus is the Hive space and 17 copies of it in 136 synthetic spaces with permissions of their
own (:mod:`devstack.atlassian.replicas`): more than 20,000 chunks, synced over REST from the
emulator like any site (the first run indexes 5,490 pages, about 100 minutes; later runs find
nothing changed). Three readers may see about 5%, 1% and 0.3% of it. For each reader:

* **queries**: the 15 Hive dev questions and the first heading (or the title) of
  ``QUERIES_PER_READER`` pages the reader may see, picked by a hash;
* **pre-filter**: Wayfinder's search as the MCP tool runs it, with the sync's pre-filter keys, as
  the reader, through the real OpenFGA gate (sqlite datastore, the gate's default deadline); its
  latency in-process (``p50_ms``, ``p95_ms``); a search refused past the deadline counts as one
  that found nothing (``authorization_timeouts``);
* **post-filter**: the same search without the keys (rank everything, authorize the best);
* **oracle**: the same search on an index built from the reader's visible documents only
  (which ones, OpenFGA says), kept under ``<bench dir>/oracle/<reader>``.

``recall_at5_vs_oracle`` is the share of the oracle's top five pages the pre-filtered search also
returns in its top five, averaged over the queries the oracle answers; ``recall_at5_postfilter``
the same for the post-filter. JSON in ``.wayfinder/reports/bench-semantic.json``: the 5% reader's
figures at the top, every reader's under ``by_visibility``.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from authz.client import OpenFGAClient
from authz.gate import Gate
from authz.prefilter import ACL_FILE, AclFile
from core import ids
from core.errors import AuthorizationUnavailable, WayfinderError
from core.models import Principal
from core.settings import Settings
from devstack import stack
from devstack.atlassian.admin import Emulator
from devstack.atlassian.hive import SPACE_KEY as HIVE
from devstack.atlassian.hive import seed_hive
from devstack.atlassian.replicas import READERS, seed_replicas
from devstack.atlassian.runner import serving
from devstack.atlassian.site import Site
from devstack.leaks import synced_from
from devstack.reports import write_report
from navigator.navigator import Navigator
from navigator.store import Neo4jStore
from pipeline.raw_store import RawStore, StoredPage
from pipeline.sinks.semantic import index_text
from pipeline.sources.confluence_rest import ConfluenceRestSource
from pipeline.sync import run_sync
from retrievers.base import IndexDocument
from retrievers.factory import semantic_index
from retrievers.semantic import SemanticRetriever

REPORT = "bench-semantic.json"
EMULATOR_PORT = 25590  # fixed, like a real site's address: the sync remembers what it read
QUERIES_PER_READER = 40
K = 5
TARGET = 0.95
_HEADING = re.compile(r"^#{2,6}\s+(.+?)\s*$", re.MULTILINE)


class BenchFailed(WayfinderError):
    """The bench's stack could not be built."""


def bench_settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={
            "data_dir": settings.data_dir / "bench-semantic",
            "openfga": settings.openfga.model_copy(
                update={"http_port": 25580, "grpc_port": 25581, "datastore": "sqlite", "store_name": "wayfinder-bench-semantic"}
            ),
            "neo4j": settings.neo4j.model_copy(update={"bolt_port": 25987}),
            "postgres": settings.postgres.model_copy(update={"port": 25632}),
            "lightrag": settings.lightrag.model_copy(update={"storage": "files"}),  # its oracles are directories
        }
    )


@dataclass
class _Run:
    """One reader's hits per query (the pages of each, best first: its id and its near-duplicates'),
    and the time each search took."""

    hits: list[list[list[str]]]
    ms: list[float]
    timeouts: int = 0  # searches refused as authorization_unavailable (past the gate's deadline)


async def run_bench_semantic(settings: Settings, console: Console) -> dict[str, Any]:
    own = bench_settings(settings)
    site = Site()
    await seed_hive(site, settings.corpus_dir)
    replicas = await seed_replicas(site, settings.corpus_dir)
    dev = [json.loads(line)["question"] for line in (settings.corpus_dir / "questions_dev.jsonl").read_text().splitlines() if line.strip()]
    with serving(Emulator(site, secrets.token_urlsafe(32)), port=EMULATOR_PORT) as url:
        own = synced_from(own, url)
        own = own.model_copy(update={"confluence": own.confluence.model_copy(update={"spaces": [HIVE, *replicas.spaces]})})
        for status in stack.up(own):
            console.print(f"{status.name}: {status.detail}")
        try:
            async with RawStore.for_settings(own) as store:
                synced = await run_sync(own, ConfluenceRestSource(own.confluence, own.confluence.url or ""), store, console)
                stored = {ids.page_id(p.page_id): p for p in await store.pages() if p.markdown is not None}
            if synced.failed:
                raise BenchFailed(f"the bench's sync could not convert {len(synced.failed)} page(s); see the log above")
            chunks_of = _chunks_per_document(own)
            return await _measure(settings, own, console, stored, chunks_of, dev)
        finally:
            stack.down(own)


async def _measure(
    settings: Settings, own: Settings, console: Console, stored: dict[str, StoredPage], chunks_of: Counter[str], dev: list[str]
) -> dict[str, Any]:
    total_chunks = sum(chunks_of.values())
    async with OpenFGAClient(own.openfga) as authorizer, Neo4jStore(own.neo4j) as graph:
        navigator = Navigator(graph)

        def gate(login: str) -> Gate:
            return Gate(authorizer, Principal(user=login), deadline_s=own.openfga.check_timeout_s)

        # The truth the oracles are built on: every page and space asked of OpenFGA (thousands of
        # checks, so a deadline of its own).
        visible = {login: await _visible_documents(Gate(authorizer, Principal(user=login), deadline_s=120), stored) for login in READERS}
        keys = AclFile(own.index_dir / ACL_FILE)
        if keys.current() is None:
            raise BenchFailed(f"the sync wrote no pre-filter keys at {own.index_dir / ACL_FILE}")
        queries = {login: [*dev, *_queries(login, [stored[d] for d in sorted(visible[login])])] for login in READERS}
        pre: dict[str, _Run] = {}
        post: dict[str, _Run] = {}
        async with semantic_index(own) as index:
            with_keys = SemanticRetriever(index, navigator, own.mcp.search_candidates, keys)
            without = SemanticRetriever(index, navigator, own.mcp.search_candidates)
            await with_keys.search(gate(next(iter(READERS))), "warm up")  # the index loads on first use
            for login in READERS:
                console.print(f"{login}: {len(visible[login])} visible pages; {len(queries[login])} queries with and without the pre-filter")
                pre[login] = await _ask(with_keys, gate, login, queries[login])
                post[login] = await _ask(without, gate, login, queries[login])
        oracle: dict[str, _Run] = {}
        for login in READERS:
            oracle_settings = own.model_copy(update={"data_dir": own.data_dir / "oracle" / login})
            async with semantic_index(oracle_settings) as index:
                docs = [IndexDocument(doc, index_text(stored[doc])) for doc in sorted(visible[login])]
                console.print(f"{login}: oracle index of their {len(docs)} pages")
                held = await index.indexed_doc_ids()
                await index.upsert(docs, remove=sorted(held - set(visible[login])))
                oracle[login] = await _ask(SemanticRetriever(index, navigator, own.mcp.search_candidates), gate, login, queries[login])

    by_visibility = {}
    for login, share in READERS.items():
        answered = [n for n, hits in enumerate(oracle[login].hits) if hits]
        by_visibility[_share_name(share)] = {
            "reader": login,
            "share_of_chunks": round(sum(chunks_of[d] for d in visible[login]) / total_chunks, 4),
            "visible_documents": len(visible[login]),
            "visible_chunks": sum(chunks_of[d] for d in visible[login]),
            "queries": len(queries[login]),
            "queries_the_oracle_answers": len(answered),
            "recall_at5_vs_oracle": _recall(pre[login].hits, oracle[login].hits, answered),
            "recall_at5_postfilter": _recall(post[login].hits, oracle[login].hits, answered),
            "p50_ms": round(statistics.median(pre[login].ms), 1),
            "p95_ms": round(_p95(pre[login].ms), 1),
            "p50_ms_postfilter": round(statistics.median(post[login].ms), 1),
            "p95_ms_postfilter": round(_p95(post[login].ms), 1),
            "authorization_timeouts": pre[login].timeouts,
            "authorization_timeouts_postfilter": post[login].timeouts,
            "authorization_timeouts_oracle": oracle[login].timeouts,
        }
    widest = by_visibility[_share_name(max(READERS.values()))]
    report = {
        "corpus": f"{HIVE} and its copies: {len(chunks_of)} documents in {len({p.space_key for p in stored.values()})} spaces",
        "documents": len(chunks_of),
        "chunks": total_chunks,
        "recall_at5_vs_oracle": widest["recall_at5_vs_oracle"],
        "recall_at5_postfilter": widest["recall_at5_postfilter"],
        "p50_ms": widest["p50_ms"],
        "p95_ms": widest["p95_ms"],
        "by_visibility": by_visibility,
        "target_vs_oracle": TARGET,
        "meets_target": all(v["recall_at5_vs_oracle"] >= TARGET for v in by_visibility.values()),
    }
    _show(report, console)
    console.print(f"report: {write_report(settings, REPORT, report)}")
    return report


async def _visible_documents(gate: Gate, stored: dict[str, StoredPage]) -> set[str]:
    """The pages OpenFGA lets the reader see, with their spaces: the truth the oracle is built on."""
    spaces = {doc: ids.space_id(page.space_key) for doc, page in stored.items()}
    objects = [*stored, *sorted(set(spaces.values()))]
    seen: set[str] = set()
    for start in range(0, len(objects), 400):  # each round trip within the client's own timeout
        seen |= await gate.visible(objects[start : start + 400])
    return {doc for doc in stored if doc in seen and spaces[doc] in seen}


def _queries(login: str, pages: Sequence[StoredPage]) -> list[str]:
    """The first heading (or else the title) of up to QUERIES_PER_READER of ``pages``, by a hash."""
    picked = sorted(pages, key=lambda p: hashlib.sha256(f"{login}:{p.page_id}".encode()).digest())[:QUERIES_PER_READER]
    return [(match.group(1) if (match := _HEADING.search(p.markdown or "")) else p.title).strip("#* ") or p.title for p in picked]


async def _ask(retriever: SemanticRetriever, gate: Callable[[str], Gate], login: str, queries: Sequence[str]) -> _Run:
    run = _Run([], [])
    for query in queries:
        started = time.perf_counter()
        try:
            result = await retriever.search(gate(login), query, top_k=K)
        except AuthorizationUnavailable:  # what the caller gets: an error and no hits
            run.timeouts += 1
            run.hits.append([])
        else:
            run.hits.append([[hit.id, *hit.also_in] for hit in result.hits])
        run.ms.append((time.perf_counter() - started) * 1000)
    return run


def _recall(found: list[list[list[str]]], oracle: list[list[list[str]]], answered: Sequence[int]) -> float:
    """The share of the oracle's top-K pages found in the top K, a page counting as found when it
    is a hit or one of a hit's near-duplicates (which copy of a text stands first is a tie)."""
    if not answered:
        return 0.0

    def recall(n: int) -> float:
        pages = {page for hit in found[n][:K] for page in hit}
        wanted = [hit[0] for hit in oracle[n][:K]]
        return sum(page in pages for page in wanted) / len(wanted)

    return round(statistics.mean(recall(n) for n in answered), 3)


def _p95(values: Sequence[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) > 1 else values[0]


def _share_name(share: float) -> str:
    return f"{share * 100:g}%"


def _chunks_per_document(settings: Settings) -> Counter[str]:
    """Chunks per document in the index's chunk store (the files profile's)."""
    stored = json.loads((settings.index_dir / settings.lightrag.workspace / "kv_store_text_chunks.json").read_text())
    return Counter(row["full_doc_id"] for row in stored.values())


def _show(report: dict[str, Any], console: Console) -> None:
    table = Table(title=f"bench-semantic: {report['corpus']}, {report['chunks']} chunks")
    for column in ("visibility", "share of chunks", "queries", "recall@5 vs oracle", "post-filter", "p50 ms", "p95 ms", "post-filter p50/p95 ms"):
        table.add_column(column, justify="right")
    for name, row in report["by_visibility"].items():
        table.add_row(
            name,
            f"{row['share_of_chunks']:.2%}",
            f"{row['queries_the_oracle_answers']}/{row['queries']}",
            f"{row['recall_at5_vs_oracle']:.3f}",
            f"{row['recall_at5_postfilter']:.3f}",
            f"{row['p50_ms']:.0f}",
            f"{row['p95_ms']:.0f}",
            f"{row['p50_ms_postfilter']:.0f}/{row['p95_ms_postfilter']:.0f}",
        )
    console.print(table)
    console.print(f"target: ≥{report['target_vs_oracle']} of the oracle at every share — {'met' if report['meets_target'] else 'missed'}")
