"""The stack of ``wayfinder eval`` (``make eval``): its own data directory (``<data dir>/eval``) and
ports, the Confluence emulator seeded with the Hive space and the MuSiQue passages, synced like
any site — the first run indexes both (2,195 pages), later runs find nothing changed. Then
:mod:`evals.runner` asks each dataset's questions; the report in ``<data dir>/reports/eval-<dataset>-<date>/``
(:mod:`evals.reporting`).
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from authz.client import OpenFGAClient
from authz.gate import Gate
from authz.prefilter import ACL_FILE, AclFile
from core.models import Principal
from core.settings import Settings
from devstack import stack
from devstack.atlassian.admin import Emulator
from devstack.atlassian.hive import seed_hive
from devstack.atlassian.musique import SPACE_KEY as MUSIQUE
from devstack.atlassian.musique import seed_musique
from devstack.atlassian.runner import serving
from devstack.atlassian.site import Site
from devstack.leaks import synced_from
from evals.datasets import load_dataset
from evals.reporting import build, dataset_name, show, write
from evals.runner import DEPTH, EvalFailed, Systems, evaluate
from navigator.navigator import Navigator
from navigator.store import Neo4jStore
from pipeline.raw_store import RawStore
from pipeline.sources.confluence_rest import ConfluenceRestSource
from pipeline.sync import run_sync
from retrievers.factory import semantic_index
from retrievers.semantic import SemanticRetriever

EMULATOR_PORT = 25490  # fixed, like the site of a real deployment: the sync remembers what it read


def default_datasets(settings: Settings) -> list[Path]:
    """The two dev sets: the Hive wiki's questions and MuSiQue's."""
    return [settings.corpus_dir / "questions_dev.jsonl", settings.corpus_dir.parent / "musique-100" / "questions_dev.json"]


def eval_settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={
            "data_dir": settings.data_dir / "eval",
            "openfga": settings.openfga.model_copy(update={"http_port": 25480, "grpc_port": 25481, "datastore": "sqlite", "store_name": "wayfinder-eval"}),
            "neo4j": settings.neo4j.model_copy(update={"bolt_port": 25887}),
            "postgres": settings.postgres.model_copy(update={"port": 25532}),
        }
    )


async def run_eval(settings: Settings, console: Console, datasets: Sequence[Path], user: str, ks: Sequence[int]) -> list[dict[str, Any]]:
    principal = Principal(user=user)
    loaded = {path: load_dataset(path) for path in datasets}  # bad files fail before any service starts
    own = eval_settings(settings)
    site = Site()
    await seed_hive(site, settings.corpus_dir)
    seed_musique(site, settings.corpus_dir.parent / "musique-100" / "corpus.json")
    with serving(Emulator(site, secrets.token_urlsafe(32)), port=EMULATOR_PORT) as url:
        own = synced_from(own, url)
        own = own.model_copy(update={"confluence": own.confluence.model_copy(update={"spaces": ["HIVE", MUSIQUE]})})
        for status in stack.up(own):
            console.print(f"{status.name}: {status.detail}")
        try:
            async with RawStore.for_settings(own) as store:
                synced = await run_sync(own, ConfluenceRestSource(own.confluence, own.confluence.url or ""), store, console)
            if synced.failed:
                raise EvalFailed(f"the evaluation's sync could not convert {len(synced.failed)} page(s); see the log above")
            async with OpenFGAClient(own.openfga) as authorizer, Neo4jStore(own.neo4j) as graph, semantic_index(own) as index:
                navigator = Navigator(graph)
                retriever = SemanticRetriever(index, navigator, own.mcp.search_candidates, AclFile(own.index_dir / ACL_FILE))
                systems = Systems(
                    lambda: Gate(authorizer, principal, deadline_s=own.openfga.check_timeout_s), retriever, navigator, index, max(DEPTH, *ks)
                )
                reports = []
                for path, questions in loaded.items():
                    console.print(f"{path}: {len(questions)} question(s) as {user}")
                    prepared, searched, navigated = await evaluate(dataset_name(path), systems, questions, ks)
                    result = build(path, user, datetime.now(UTC).date(), questions, prepared, searched, navigated)
                    show(result, console)
                    console.print(f"report: {write(result, settings.data_dir / 'reports')}")
                    reports.append(result)
                return reports
        finally:
            stack.down(own)
