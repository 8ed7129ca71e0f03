"""``make bench-incremental``: what a sync costs when ~1% of the Hive space changed.

In one run, on a stack of its own (so the demo's stores are never touched):

1. a full sync of the Hive space from the Confluence emulator, from empty stores;
2. churn through the emulator's admin API, as users would make it: 3 pages edited, 1 moved under
   the restricted DesignDocs, 1 restricted to alice, 1 deleted, and bob removed from hive-users;
3. an incremental sync, then a permissions-only pass.

Every extraction, embedding and alt-text call is counted. Each change is then checked in every store it must reach: the raw store, OpenFGA, Neo4j and the
LightRAG manifest. The report goes to ``.wayfinder/reports/bench-incremental.json`` with
``full_s``, ``incremental_s``, ``ratio``, ``permissions_only_s``, ``calls_full``,
``calls_incremental`` and ``changes`` (one verdict per change). With ``storage="production"`` the
index lives in PostgreSQL (pgvector) and Neo4j and the report is
``bench-incremental-production.json``.
"""

from __future__ import annotations

import json
import secrets
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import requests
from rich.console import Console
from rich.table import Table

from authz.client import OpenFGAClient
from authz.gate import Gate
from core.models import Principal
from core.providers.base import Embedder, Extraction, Extractor, Usage
from core.providers.local import LocalEmbedder, LocalExtractor
from core.settings import Settings
from devstack import stack
from devstack.reports import write_report
from devstack.atlassian.admin import Emulator
from devstack.atlassian.hive import SYNC_LOGIN, seed_hive
from devstack.atlassian.runner import serving
from devstack.atlassian.site import Site
from devstack.leaks import synced_from
from navigator.store import Neo4jStore
from pipeline.raw_store import RawStore
from pipeline.sources.confluence_rest import ConfluenceRestSource
from devstack.atlassian.export import DESIGN_DOCS_PAGE
from pipeline.sync import SyncReport, run_sync
from retrievers.factory import semantic_index
from retrievers.lightrag_adapter import LightRAGIndex

HOME = "27362069"


@dataclass
class Calls:
    extraction: int = 0
    embedding: int = 0
    alt_text: int = 0

    def as_json(self) -> dict[str, int]:
        return {"extraction": self.extraction, "embedding": self.embedding, "alt_text": self.alt_text, "total": self.extraction + self.embedding + self.alt_text}


class CountingEmbedder:
    def __init__(self, inner: Embedder, calls: Calls) -> None:
        self._inner, self._calls = inner, calls
        self.dim, self.name = inner.dim, inner.name

    async def embed(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        if texts:
            self._calls.embedding += 1
        return await self._inner.embed(texts, query=query)


class CountingExtractor:
    def __init__(self, inner: Extractor, calls: Calls) -> None:
        self._inner, self._calls = inner, calls
        self.name = inner.name

    def extract(self, text: str) -> Extraction:
        self._calls.extraction += 1
        return self._inner.extract(text)

    def keywords(self, query: str) -> tuple[list[str], list[str]]:
        return self._inner.keywords(query)

    def prefetch(self, texts: Sequence[str]) -> None:
        self._inner.prefetch(texts)

    def close(self) -> None:
        self._inner.close()


def bench_settings(settings: Settings, storage: Literal["files", "production"] = "files") -> Settings:
    return settings.model_copy(
        update={
            "data_dir": settings.data_dir / _name(storage),
            "openfga": settings.openfga.model_copy(update={"http_port": 25180, "grpc_port": 25181, "datastore": "memory", "store_name": "wayfinder-bench-incremental"}),
            "neo4j": settings.neo4j.model_copy(update={"bolt_port": 25687}),
            "postgres": settings.postgres.model_copy(update={"port": 25182}),
            "lightrag": settings.lightrag.model_copy(update={"storage": storage}),
        }
    )


def _name(storage: str) -> str:
    return "bench-incremental" + ("-production" if storage == "production" else "")


async def run_bench_incremental(settings: Settings, console: Console, storage: Literal["files", "production"] = "files") -> dict[str, Any]:
    own = bench_settings(settings, storage)
    shutil.rmtree(own.data_dir, ignore_errors=True)  # the full sync starts from empty stores
    site = Site()
    await seed_hive(site, settings.corpus_dir)
    admin_token = secrets.token_urlsafe(32)
    with serving(Emulator(site, admin_token)) as url:
        own = synced_from(own, url)
        for status in stack.up(own):
            console.print(f"{status.name}: {status.detail}")
        try:
            async with RawStore.for_settings(own) as store:
                full_calls, incremental_calls = Calls(), Calls()
                console.rule("full sync")
                full = await _timed_sync(own, store, console, full_calls)
                pages = len(site.pages)
                indexed_before = json.loads((own.index_dir / "manifest.json").read_text())
                churn = _Churn(url, admin_token, site)
                changes = churn.apply()
                console.rule("incremental sync")
                incremental = await _timed_sync(own, store, console, incremental_calls)
                verdicts = await _verify(own, store, site, changes, incremental, indexed_before)
                console.rule("permissions-only pass")
                started = time.monotonic()
                await run_sync(own, _source(own), store, console, permissions_only=True)
                permissions_only_s = time.monotonic() - started
        finally:
            stack.down(own)
    report = {
        "storage": storage,
        "pages": pages,
        "full_s": round(full.seconds, 1),
        "incremental_s": round(incremental.seconds, 1),
        "ratio": round(incremental.seconds / full.seconds, 4),
        "permissions_only_s": round(permissions_only_s, 1),
        "calls_full": full_calls.as_json(),
        "calls_incremental": incremental_calls.as_json(),
        "rest_calls_full": full.rest_calls,
        "rest_calls_incremental": incremental.rest_calls,
        "incremental_summary": incremental.summary(),
        "changes": verdicts,
        "all_changes_reached_every_store": all(v["ok"] for v in verdicts),
    }
    _show(report, console)
    console.print(f"report: {write_report(settings, _name(storage) + '.json', report)}")
    return report


def _source(settings: Settings) -> ConfluenceRestSource:
    return ConfluenceRestSource(settings.confluence, settings.confluence.url or "")


async def _timed_sync(settings: Settings, store: RawStore, console: Console, calls: Calls) -> SyncReport:
    def counted(s: Settings, usage: Usage | None) -> LightRAGIndex:
        return semantic_index(s, usage, embedder=CountingEmbedder(LocalEmbedder(), calls), extractor=CountingExtractor(LocalExtractor(), calls))

    report = await run_sync(settings, _source(settings), store, console, open_index=counted)
    calls.alt_text += report.alt_text_calls
    return report


class _Churn:
    """~1% of the space changed through the admin API; ``apply`` says what changed where."""

    def __init__(self, url: str, token: str, site: Site) -> None:
        self._url, self._token, self._site = url, token, site

    def _admin(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        response = requests.request(method, f"{self._url}/_emulator{path}", json=body, headers={"Authorization": f"Bearer {self._token}"}, timeout=30)
        response.raise_for_status()
        return response.json()

    def apply(self) -> dict[str, Any]:
        site = self._site
        design = {DESIGN_DOCS_PAGE} | {p.id for p in site.descendants(DESIGN_DOCS_PAGE)}
        leaves = sorted(p.id for p in site.pages.values() if not site.children(p.id) and p.id not in design and p.id != "27822784")
        edited, moved, restricted, deleted = leaves[0:3], leaves[3], leaves[4], leaves[5]
        for n, page_id in enumerate(edited):
            self._admin("PUT", f"/pages/{page_id}", {"by": "alice", "body": site.pages[page_id].body + f"<p>Benchmark edit zyzzyva{n}.</p>"})
        self._admin("POST", f"/pages/{moved}/move", {"parent_id": DESIGN_DOCS_PAGE, "by": "alice"})
        self._admin("PUT", f"/pages/{restricted}/restrictions", {"users": ["alice", SYNC_LOGIN], "groups": []})  # the sync account keeps reading it
        self._admin("DELETE", f"/pages/{deleted}")
        self._admin("DELETE", "/groups/hive-users/members/bob")
        return {"edited": edited, "moved": moved, "restricted": restricted, "deleted": deleted, "membership": ("hive-users", "bob")}


async def _verify(
    settings: Settings, store: RawStore, site: Site, changes: dict[str, Any], report: SyncReport, indexed_before: dict[str, str]
) -> list[dict[str, Any]]:
    held = {page.page_id: page for page in await store.pages()}
    manifest = json.loads((settings.index_dir / "manifest.json").read_text())
    verdicts: list[dict[str, Any]] = []
    async with OpenFGAClient(settings.openfga) as fga, Neo4jStore(settings.neo4j) as neo:

        async def sees(user: str, page_id: str) -> bool:
            return f"page:{page_id}" in await Gate(fga, Principal(user=user)).visible([f"page:{page_id}"])

        for n, page_id in enumerate(changes["edited"]):
            content = await neo.page(f"page:{page_id}")
            checks = {
                "raw_store": held[page_id].converted_version == site.pages[page_id].version.number,
                "neo4j": content is not None and f"zyzzyva{n}" in content.markdown,
                "lightrag": manifest.get(f"page:{page_id}") not in (None, indexed_before.get(f"page:{page_id}")),
                "openfga": await sees("alice", page_id),
            }
            verdicts.append({"change": "edited", "page": page_id, **checks, "ok": all(checks.values())})
        moved = changes["moved"]
        placed = (await neo.summaries([f"page:{moved}"])).get(f"page:{moved}")
        checks = {
            "raw_store": held[moved].parent_id == DESIGN_DOCS_PAGE,
            "neo4j": placed is not None and [c.id for c in placed.ancestors] == [f"page:{DESIGN_DOCS_PAGE}"],
            "openfga": await sees("alice", moved) and not await sees("carol", moved),
            "lightrag_untouched": manifest.get(f"page:{moved}") == indexed_before.get(f"page:{moved}"),
        }
        verdicts.append({"change": "moved", "page": moved, **checks, "ok": all(checks.values())})
        restricted = changes["restricted"]
        checks = {
            "raw_store": held[restricted].read_users == ("alice",),
            "openfga": await sees("alice", restricted) and not await sees("bob", restricted),
            "lightrag_untouched": manifest.get(f"page:{restricted}") == indexed_before.get(f"page:{restricted}"),
        }
        verdicts.append({"change": "restricted", "page": restricted, **checks, "ok": all(checks.values())})
        deleted = changes["deleted"]
        checks = {
            "raw_store": deleted not in held,
            "neo4j": await neo.page(f"page:{deleted}") is None,
            "lightrag": f"page:{deleted}" not in manifest,
            "openfga": not await sees("alice", deleted),
        }
        verdicts.append({"change": "deleted", "page": deleted, **checks, "ok": all(checks.values())})
        checks = {"raw_store": "bob" not in (await store.groups()).get("hive-users", ()), "openfga": not await sees("bob", HOME)}
        verdicts.append({"change": "membership", "group": "hive-users", "user": "bob", **checks, "ok": all(checks.values())})
    return verdicts


def _show(report: dict[str, Any], console: Console) -> None:
    table = Table("measure", "value", title="bench-incremental")
    for key in ("pages", "full_s", "incremental_s", "ratio", "permissions_only_s", "rest_calls_full", "rest_calls_incremental"):
        table.add_row(key, str(report[key]))
    table.add_row("calls_full", str(report["calls_full"]))
    table.add_row("calls_incremental", str(report["calls_incremental"]))
    table.add_row("incremental", report["incremental_summary"])
    table.add_row("every change in every store", "yes" if report["all_changes_reached_every_store"] else "NO")
    console.print(table)
    for verdict in report["changes"]:
        if not verdict["ok"]:
            console.print(f"[red]not everywhere:[/red] {verdict}")
