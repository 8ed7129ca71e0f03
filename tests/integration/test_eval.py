"""`wayfinder eval`'s scoring on the real stack: the indexed slice, the real gate, every system and
the navigator.

Each system's pages are authorized before they are scored, and gold pages the principal may not
see are left out of its score rather than counted as misses.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

from authz.client import OpenFGAClient
from authz.gate import Gate
from core.models import Principal
from core.settings import Settings
from tests.conftest import HiveSlice
from devstack.atlassian.view import site_view
from core.providers.gemini import GeminiAnswers, GeminiToolAgent
from core.settings import GeminiSettings
from devstack.atlassian.runner import serving_app
from devstack.evaluation import _judged
from devstack.fake_gemini import FakeGemini
from evals.agent import WAYFINDER
from evals.datasets import load_dataset
from evals.gemini import JUDGE_VERSION, GeminiJudge
from fastmcp import Client, FastMCP
from rich.console import Console
from evals.leaks.oracle import Oracle
from evals.reporting import Run, build
from evals.runner import SYSTEMS, Systems, evaluate
from navigator.navigator import Navigator
from navigator.store import Neo4jStore
from retrievers.factory import semantic_index
from retrievers.semantic import SemanticRetriever

DESIGN_DOCS_CHILD = "34019487"  # Correlation Optimizer, committers only (with all of DesignDocs)
QUESTIONS = [
    {"id": "metastore", "kind": "semantic", "question": "Which metastore servers does a client try when hive.metastore.uris lists several?", "gold_pages": ["27362076"],
     "answer": "The first one in the list, then a random one on connection failure."},
    {"id": "correlation", "kind": "semantic", "question": "correlation optimizer design", "gold_pages": [DESIGN_DOCS_CHILD]},
    {"id": "schema", "kind": "multihop", "question": "Which tool initializes the metastore schema, and which page explains metastore administration?", "gold_pages": ["34835119", "27362076"]},
    {"id": "tree", "kind": "navigation", "question": "children of the metastore page", "gold_pages": ["55156221"]},
    {"id": "children", "kind": "navigation", "question": "children of the metastore page, in order", "gold_pages": ["55156221", "34835119"],
     "nav": {"op": "children", "node": "27362076"}},
    {"id": "meetings", "kind": "navigation", "question": "the contributors' meetings", "gold_pages": ["27820725", "27826430", "27833038", "27844528", "27822784"],
     "nav": {"op": "subtree", "node": "27362087", "depth": 1}},
    {"id": "path", "kind": "navigation", "question": "where is the schema tool?", "gold_pages": ["34835119"],
     "nav": {"op": "resolve_path", "node": "AdminManual Metastore Administration/Hive Schema Tool"}},
]
BOB_ONLY = "page:27822784"  # ContributorsMinutes110726


async def test_each_system_is_scored_on_what_the_principal_may_see(indexed, services: Settings, hive_slice: HiveSlice, tmp_path: Path):
    dataset = tmp_path / "questions.jsonl"
    dataset.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    questions = load_dataset(dataset)
    async with OpenFGAClient(services.openfga) as authorizer, Neo4jStore(services.neo4j) as graph, semantic_index(services) as index:
        navigator = Navigator(graph)
        retriever = SemanticRetriever(index, navigator, services.mcp.search_candidates)
        runs, gates, systems = {}, {}, {}
        for user in ("alice", "bob"):
            gates[user] = []

            def gate(user: str = user) -> Gate:
                gates[user].append(Gate(authorizer, Principal(user=user)))
                return gates[user][-1]

            systems[user] = Systems(gate, retriever, navigator, index)
            runs[user] = await evaluate("slice", systems[user], questions, [1, 5])
            _, searched, navigated = runs[user]
            shown = {page for outcome in (*searched.values(), *navigated.values()) for answer in outcome.answers.values() for page in answer}
            allowed = {r.object for g in gates[user] for r in g.records if r.allowed}
            assert shown and shown <= allowed  # each was checked and allowed

        # With a Gemini key (the fake here): answers from each system's first pages, read as alice
        # through her gate, graded; and the Gemini agent over a toolset
        fake = FakeGemini()
        with serving_app(fake.app()) as gemini_url:
            gemini_settings = GeminiSettings(api_key="test-key", base_url=gemini_url, max_attempts=2, timeout_s=10)
            models = (GeminiAnswers(gemini_settings), GeminiJudge(gemini_settings), GeminiToolAgent(gemini_settings))
            before = len(gates["bob"])
            hidden_text = {f"page:{DESIGN_DOCS_CHILD}": ("Correlation Optimizer", "zyzzyva merges correlated jobs")}  # bob's hidden gold
            async with Client(_one_page_toolset("page:27362076")) as toolset_client:
                judged = await _judged(
                    models, runs["bob"][0], runs["bob"][1], navigator, systems["bob"], [(WAYFINDER, toolset_client)], Console(quiet=True), hidden_text
                )
        quality = judged["answers"]
        assert set(quality) == set(SYSTEMS) and all(q["questions"] == 1 and q["leak_probes"] == 1 for q in quality.values())
        assert all(q["answer_leakage"] == 0.0 for q in quality.values())  # nothing of the hidden page reached bob's answers
        composed = [call.prompt for call in fake.calls if call.kind == "generate"]
        assert len(SYSTEMS) <= len(composed) <= 2 * len(SYSTEMS) and any("AdminManual Metastore Administration" in prompt for prompt in composed)  # the pages themselves
        assert not any("zyzzyva" in prompt for prompt in composed)  # the hidden text goes to the leak check only
        assert any("zyzzyva" in call.prompt for call in fake.calls if call.kind == "leak")
        assert len(gates["bob"]) > before  # the pages were read through bob's gate
        assert judged["agent"]["wayfinder"]["solved"] == 1 and judged["judge"] == JUDGE_VERSION

    alice_prepared, alice, alice_nav = runs["alice"]
    bob_prepared, bob, bob_nav = runs["bob"]
    correlation = f"page:{DESIGN_DOCS_CHILD}"
    # alice (a committer) is scored on the design page; bob's score leaves it out, and no system
    # shows it to him
    assert alice["wayfinder"].answers["correlation"][0] == correlation and alice["wayfinder"].scores["correlation"]["mrr"] == 1.0
    assert "correlation" not in bob["wayfinder"].scores and "correlation" in bob["wayfinder"].answers  # asked, not scored
    assert next(p for p in bob_prepared if p.question.id == "correlation").left_out == (correlation,)
    assert all(correlation not in answer for outcome in bob.values() for answer in outcome.answers.values())
    assert "page:27362076" in alice["wayfinder"].answers["metastore"][:5]
    assert set(alice) == set(SYSTEMS) and all(len(a) <= 10 for o in alice.values() for a in o.answers.values())
    assert alice["dense"].answers["metastore"] and alice["dense"].answers != alice["bm25"].answers  # a channel of its own

    # the navigator answers exactly what each may see: bob's own meeting page only for bob
    assert alice_nav["wayfinder"].scores == bob_nav["wayfinder"].scores == {"children": {"exact": 1.0}, "meetings": {"exact": 1.0}, "path": {"exact": 1.0}}
    assert BOB_ONLY in bob_nav["wayfinder"].answers["meetings"] and BOB_ONLY not in alice_nav["wayfinder"].answers["meetings"]

    # what each system drew before authorization: bob's candidates for the design question held
    # the hidden page, and none of it reached him (by the leak oracle, read from the site)
    assert correlation in {page for drawn in systems["bob"].unauthorized.values() for page in drawn["correlation"]}
    view = site_view(hive_slice.site, ["HIVE"])
    visible = frozenset(Oracle.of(view.spaces, view.pages, view.permissions).visible("bob"))
    summary = build(dataset, date(2026, 12, 3), questions, {"bob": Run(bob_prepared, bob, bob_nav, unauthorized=systems["bob"].unauthorized, visible=visible)})
    run = summary["principals"]["bob"]
    assert run["scored"] == 2 and run["no_visible_gold"] == ["correlation"] and run["not_asked"] == ["tree"]
    assert set(run["systems"]) == set(SYSTEMS) and run["navigation"]["exact"] == 1.0
    assert set(run["systems"]["wayfinder"]["by_kind"]) == {"semantic", "multihop"}
    assert {"recall@1", "recall@5", "mrr", "ndcg@10", "all_hops@5"} == set(run["systems"]["wayfinder"]["all"])
    assert all(pages == [] for pages in run["authorization"]["leaks"].values())
    assert run["authorization"]["exposure_rate"]["wayfinder"] > 0


def _one_page_toolset(page: str) -> FastMCP:
    """Tools shaped like Wayfinder's whose search finds ``page`` and whose fetch opens any page."""
    server = FastMCP("one page")

    @server.tool
    def search(query: str, top_k: int = 10) -> dict:
        """Search."""
        return {"hits": [{"id": page}]}

    @server.tool
    def fetch(id: str) -> dict:
        """Read a page."""
        return {"id": id, "markdown": f"the text of {id}"}

    return server
