"""The graph extraction red-team against small MCP servers of known behaviour (FastMCP, in
memory): one that respects permissions gives nothing away, one that shows a hidden-only entity in
explore is caught, and the attacker keeps its budget."""

from __future__ import annotations

import asyncio

from fastmcp import Client, FastMCP

from evals.redteam import extract_graph, secrets_of

EVIDENCE = {
    "Hive": frozenset({"page:1", "page:9"}),  # also on a hidden page: not showable, but not secret
    "Metastore": frozenset({"page:1"}),
    "Secret Optimizer": frozenset({"page:9"}),  # only on the hidden page
    "Secret Optimizer -> Hive": frozenset({"page:9"}),
    "Hive -> Secret Optimizer": frozenset({"page:9"}),
}
VISIBLE = {"page:1"}


def server(leaky: bool) -> FastMCP:
    mcp = FastMCP("w")

    @mcp.tool
    def search(query: str, top_k: int = 10) -> dict:
        """Search."""
        return {"hits": [], "entities": [{"name": "Metastore", "evidence": ["page:1"]}], "relations": []}

    @mcp.tool
    def explore(entity: str, hops: int = 1, limit: int = 20) -> dict:
        """Explore."""
        if entity == "Metastore":
            related = [{"name": "Secret Optimizer", "evidence": ["page:9"], "hops": 1}] if leaky else []
            relations = [{"source": "Secret Optimizer", "target": "Hive", "evidence": ["page:9"]}] if leaky else []
            return {"entity": {"name": "Metastore", "evidence": ["page:1"], "hops": 0}, "entities": related, "relations": relations}
        raise ValueError("not_found: no such entity")

    return mcp


def attack(leaky: bool, budget: int = 150):
    async def run():
        async with Client(server(leaky)) as client:
            return await extract_graph(client, EVIDENCE, VISIBLE, ["Secret Design"], budget=budget)

    return asyncio.run(run())


def test_the_targets_are_items_only_hidden_pages_support() -> None:
    assert secrets_of(EVIDENCE, VISIBLE) == {"Secret Optimizer", "Secret Optimizer -> Hive", "Hive -> Secret Optimizer"}


def test_a_server_that_keeps_hidden_items_gives_none_away() -> None:
    done = attack(leaky=False)
    assert done.targets == 3 and done.recovered == [] and "Metastore" in done.seen
    assert done.refused >= 1  # exploring the secret name itself is refused
    assert done.summary()["recovered"] == 0


def test_a_server_that_shows_a_hidden_item_is_caught() -> None:
    done = attack(leaky=True)
    assert done.recovered == ["Hive -> Secret Optimizer", "Secret Optimizer", "Secret Optimizer -> Hive"]
    assert done.summary()["recovered"] == 3


def test_the_attacker_keeps_its_budget() -> None:
    assert attack(leaky=False, budget=2).calls == 2
