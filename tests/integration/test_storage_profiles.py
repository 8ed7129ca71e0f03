"""The production storage profile answers as the file profile does. The session's Hive slice is
synced again through the real pipeline, this time into LightRAG on PostgreSQL (pgvector) and
Neo4j, and every dev question of the Hive corpus gets the same index results and the same
authorized search results from both."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from authz.client import OpenFGAClient
from authz.gate import Gate
from core.models import Principal
from core.settings import Settings
from navigator.navigator import Navigator
from navigator.store import Neo4jStore
from pipeline.raw_store import RawStore
from pipeline.sources.confluence_rest import ConfluenceRestSource
from pipeline.sync import run_sync
from retrievers.factory import semantic_index
from retrievers.base import RawResults
from retrievers.lightrag_adapter import EMBEDDER_MARKER, EXTRACTION_FILE, HEADS_FILE, LEXICAL_FILE
from retrievers.semantic import MAX_EVIDENCE_DOCS, RRF_K, WEIGHTS, SemanticRetriever
from tests.conftest import CORPUS

QUESTIONS = [json.loads(line)["question"] for line in (CORPUS / "questions_dev.jsonl").read_text().splitlines() if line.strip()]


#: How far two scores of one hit may differ. A chunk's vector is the same in both profiles. An
#: entity or relation seen in several pages has their descriptions merged in the order LightRAG
#: processes the pages, and the PostgreSQL document-status store hands pending pages over in
#: another order than the file store: the merged text, and so its vector, differs a little, and
#: hits whose scores nearly tie may trade places.
#: Search scores are fused ranks: a near-tie that trades places in one channel moves a page's score
#: by at most weight × (1/(RRF_K + 1) − 1/(RRF_K + 2)); the BM25 channel reads the same chunks in
#: both profiles, every other channel may trade one such place.
SEARCH_TOLERANCE = sum(w * (1 / (RRF_K + 1) - 1 / (RRF_K + 2)) for channel, w in WEIGHTS.items() if channel != "lexical")
SCORE_TOLERANCE = {"chunks": 1e-4, "entities": 0.03, "relations": 0.03, "search": SEARCH_TOLERANCE}
#: results asked for, and how many of the best of each profile must be among the other's
ASKED, COMPARED = 20, 10


def comparable(results: RawResults) -> dict[str, list[tuple[str, float]]]:
    """Chunks by id and document; entities and relations by name (the chunks that support a
    much-mentioned entity are merged in processing order too, so its pages are not compared).
    Only the entities and relations search can use: one supported by more than MAX_EVIDENCE_DOCS
    pages ("Hive") is never a candidate, and its description, merged from hundreds of fragments in
    processing order, moves its vector further than the tolerance."""
    return {
        "chunks": [(f"{hit.chunk_id} of {hit.doc_id}", hit.score) for hit in results.chunks],
        "entities": [(hit.name, hit.score) for hit in results.entities if len(hit.doc_ids) <= MAX_EVIDENCE_DOCS],
        "relations": [(hit.name, hit.score) for hit in results.relations if len(hit.doc_ids) <= MAX_EVIDENCE_DOCS],
    }


def assert_same(expected: list[tuple[str, float]], found: list[tuple[str, float]], what: str, tolerance: float) -> None:
    """Each profile's best hits are among the other's, with the same scores within ``tolerance``
    (comparing the best half of what was asked keeps hits at the cut-off out of it)."""
    for these, those in ((expected, found), (found, expected)):
        score_of = dict(those)
        for name, score in these[:COMPARED]:
            assert name in score_of, f"{what}: {name} ({score:.4f}) in one profile only; the other has {those[:COMPARED]}"
            assert score_of[name] == pytest.approx(score, abs=tolerance), f"{what}: {name}"


async def answers(settings: Settings) -> tuple[list[dict[str, list[tuple[str, float]]]], list[list[tuple[str, float]]]]:
    """Each question's index results, and its search results as alice through the real gate."""
    raw, searched = [], []
    async with semantic_index(settings) as index, Neo4jStore(settings.neo4j) as store, OpenFGAClient(settings.openfga) as fga:
        retriever = SemanticRetriever(index, Navigator(store), settings.mcp.search_candidates)
        for question in QUESTIONS:
            raw.append(comparable(await index.query(question, ASKED)))
            result = await retriever.search(Gate(fga, Principal(user="alice")), question, top_k=ASKED)
            searched.append([(hit.id, hit.score) for hit in result.hits])
    return raw, searched


@pytest.fixture(scope="module")
async def production(indexed, services: Settings, postgres, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    postgres.create_database("lightrag_profile")
    settings = services.model_copy(
        update={
            "data_dir": tmp_path_factory.mktemp("production") / "run",
            "lightrag": services.lightrag.model_copy(update={"storage": "production"}),
            "postgres": postgres.settings("lightrag_profile"),
        }
    )
    async with RawStore.for_settings(settings) as store:
        report = await run_sync(settings, ConfluenceRestSource(settings.confluence, settings.confluence.url or ""), store, Console(quiet=True))
    assert report.sinks.index.indexed == indexed.sinks.index.indexed > 0
    return settings


async def test_the_production_engines_hold_the_index(production: Settings) -> None:
    workspace = production.index_dir / production.lightrag.workspace
    # no storage files: only what Wayfinder keeps beside LightRAG (rebuilt from the engines when missing)
    assert sorted(path.name for path in workspace.iterdir()) == sorted([EMBEDDER_MARKER, EXTRACTION_FILE, HEADS_FILE, LEXICAL_FILE])
    async with semantic_index(production) as index:
        assert len(await index.indexed_doc_ids()) > 0


async def test_both_profiles_give_the_same_results_for_every_dev_question(services: Settings, production: Settings) -> None:
    files_raw, files_searched = await answers(services)
    engines_raw, engines_searched = await answers(production)
    assert sum(len(r["chunks"]) + len(r["entities"]) for r in files_raw) > 0 and any(files_searched)
    for question, on_files, on_engines in zip(QUESTIONS, files_raw, engines_raw, strict=True):
        for channel in on_files:
            assert_same(on_files[channel], on_engines[channel], f"{question} / {channel}", SCORE_TOLERANCE[channel])
    for question, on_files, on_engines in zip(QUESTIONS, files_searched, engines_searched, strict=True):
        assert_same(on_files, on_engines, f"{question} / search as alice", SCORE_TOLERANCE["search"])


async def walks(settings: Settings) -> list[tuple[object, ...]]:
    """explore from the golden entities as alice, two hops out: who is reached, at which hop, on
    which pages, and the relations walked (descriptions aside: merged in processing order)."""
    found: list[tuple[object, ...]] = []
    async with semantic_index(settings, queries_only=True) as index, Neo4jStore(settings.neo4j) as store, OpenFGAClient(settings.openfga) as fga:
        retriever = SemanticRetriever(index, Navigator(store), settings.mcp.search_candidates)
        for name in EXPLORED:
            walk = await retriever.explore(Gate(fga, Principal(user="alice")), name, hops=2, limit=50)
            found.append((
                walk.entity.name, tuple(walk.entity.evidence), walk.truncated,
                tuple((e.name, e.hops, tuple(e.evidence)) for e in walk.entities),
                tuple(sorted((r.source, r.target, tuple(r.evidence)) for r in walk.relations)),
            ))
    return found


EXPLORED = ["Correlation Optimizer", "MapJoin", "Beeline", "hive.metastore.uris"]


async def test_both_profiles_explore_the_entity_graph_alike(services: Settings, production: Settings) -> None:
    on_files, on_engines = await walks(services), await walks(production)
    assert all(walk[3] for walk in on_files), on_files  # each walk reached something
    assert on_files == on_engines
