"""``make bench-authz``: what authorization costs per request, measured side by side in one run.

One MCP server over HTTP on the Hive index, whose authorizer is switched between the configured
OpenFGA (the demo's, on sqlite), a second OpenFGA with the same tuples in memory (what a faster
datastore gives), and an allow-all stand-in that exists only here. Every workload item is called
in every mode, interleaved (the order rotates), so machine noise hits all modes alike. Reported
per tool: p50/p95 per mode, the ratios to allow-all, and OpenFGA round trips and checks per
request. JSON in ``.wayfinder/reports/bench-authz.json``.
"""

from __future__ import annotations

import json
import secrets
import statistics
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from fastmcp import Client
from rich.console import Console
from rich.table import Table

from authz.base import Authorizer, Check
from authz.client import OpenFGAClient
from authz.tuples import SOURCE_TYPES
from core.settings import Settings
from devstack import stack
from devstack.reports import percentiles, write_report
from devstack.serving import serving
from mcp_app.auth import StaticTokens, http_identity
from mcp_app.server import Services, create_server, open_services
from devstack.atlassian.service import sync_configured
from pipeline.raw_store import RawStore, StoredPage
from pipeline.sinks.openfga import sync_tuples

REPORT = "bench-authz.json"
USER = "alice"  # sees all but one page: the widest view, the most checks
ROUNDS = 3


class AllowAll:
    """Answers yes to everything, instantly. Only ever used to measure the gate's cost."""

    model_id = "allow-all"

    async def batch_check(self, checks: Sequence[Check]) -> list[bool]:
        return [True] * len(checks)


MODES = ("gate", "gate_memory", "allow_all")


@dataclass
class Switch:
    """The server's authorizer, switched between the modes by the benchmark; counts round trips."""

    authorizers: dict[str, Authorizer]
    mode: str = "gate"
    round_trips: int = 0
    checks: int = 0

    @property
    def model_id(self) -> str:
        return self.authorizers[self.mode].model_id

    async def batch_check(self, checks: Sequence[Check]) -> list[bool]:
        self.round_trips += 1
        self.checks += len(checks)
        return await self.authorizers[self.mode].batch_check(checks)


@dataclass
class Timings:
    ms: dict[str, list[float]] = field(default_factory=lambda: {mode: [] for mode in MODES})
    round_trips: list[int] = field(default_factory=list)
    checks: list[int] = field(default_factory=list)

    def summary(self) -> dict[str, float]:
        p = {mode: percentiles(values) for mode, values in self.ms.items()}
        free_p50, free_p95 = p["allow_all"]
        return {
            "requests": len(self.ms["gate"]),
            "p50_ms_gate": round(p["gate"][0], 1),
            "p95_ms_gate": round(p["gate"][1], 1),
            "p50_ms_allow_all": round(free_p50, 1),
            "p95_ms_allow_all": round(free_p95, 1),
            "ratio_p50": round(p["gate"][0] / free_p50, 2),
            "ratio_p95": round(p["gate"][1] / free_p95, 2),
            "p50_ms_gate_memory": round(p["gate_memory"][0], 1),
            "p95_ms_gate_memory": round(p["gate_memory"][1], 1),
            "ratio_p50_memory": round(p["gate_memory"][0] / free_p50, 2),
            "ratio_p95_memory": round(p["gate_memory"][1] / free_p95, 2),
            "openfga_round_trips_per_request": round(statistics.mean(self.round_trips), 2),
            "checks_per_request": round(statistics.mean(self.checks), 1),
        }


def _workload(settings: Settings, pages: Sequence[StoredPage]) -> list[tuple[str, dict[str, Any]]]:
    questions_file = settings.corpus_dir / "questions_dev.jsonl"
    questions = [json.loads(line)["question"] for line in questions_file.read_text().splitlines() if line.strip()]
    parents = sorted({p.parent_id for p in pages if p.parent_id})
    readable = [f"page:{p.page_id}" for p in pages][:: max(1, len(pages) // 40)]
    return (
        [("search", {"query": q, "top_k": 10}) for q in questions]
        + [("fetch", {"id": page}) for page in readable]
        + [("list_children", {"id": "space:HIVE", "limit": 50})]
        + [("list_children", {"id": f"page:{p}", "limit": 50}) for p in parents[:40]]
    )


def memory_settings(settings: Settings) -> Settings:
    """A second OpenFGA, in memory, beside the configured one: what a faster datastore would give."""
    return settings.model_copy(
        update={
            "data_dir": settings.data_dir / "bench-authz",
            "openfga": settings.openfga.model_copy(
                update={"http_port": 25080, "grpc_port": 25081, "datastore": "memory", "store_name": "wayfinder-bench"}
            ),
        }
    )


async def run_bench_authz(settings: Settings, console: Console) -> dict[str, Any]:
    for status in stack.up(settings):
        console.print(f"{status.name}: {status.detail}")
    await sync_configured(settings, console)
    async with RawStore.for_settings(settings) as store:
        pages = await store.pages("HIVE")
    workload = _workload(settings, pages)
    memory = memory_settings(settings)
    stack.up(memory, only={"openfga"})
    try:
        async with OpenFGAClient(settings.openfga) as on_disk, OpenFGAClient(memory.openfga, provision=True) as in_memory:
            await sync_tuples(in_memory, {t for t in await on_disk.read_tuples() if t.object_type in SOURCE_TYPES})
            report = await _measure(settings, workload, in_memory, console)
    finally:
        stack.down(memory, only={"openfga"})
    _show(report, console)
    console.print(f"report: {write_report(settings, REPORT, report)}")
    return report


async def _measure(
    settings: Settings, workload: list[tuple[str, dict[str, Any]]], in_memory: Authorizer, console: Console
) -> dict[str, Any]:
    switch: Switch | None = None

    @asynccontextmanager
    async def services() -> AsyncIterator[Services]:
        nonlocal switch
        async with open_services(settings) as real:
            switch = Switch({"gate": real.authorizer, "gate_memory": in_memory, "allow_all": AllowAll()})
            yield replace(real, authorizer=switch)

    token = secrets.token_urlsafe(32)
    server = create_server(services, http_identity, observe=lambda *_: None, auth=StaticTokens({token: USER}))
    timings: dict[str, Timings] = {}
    async with serving(server, settings.mcp.host, 0) as url, Client(url, auth=token) as client:
        assert switch is not None
        for tool, args in workload[:3]:  # warm up every path (connections, caches, model load)
            for mode in MODES:
                switch.mode = mode
                await client.call_tool_mcp(tool, args)
        console.print(f"measuring {len(workload)} calls x {len(MODES)} modes x {ROUNDS} rounds as {USER}")
        for round_number in range(ROUNDS):
            for number, (tool, args) in enumerate(workload):
                entry = timings.setdefault(tool, Timings())
                shift = (number + round_number) % len(MODES)  # rotate the order: noise hits all modes alike
                for mode in MODES[shift:] + MODES[:shift]:
                    switch.mode = mode
                    before = (switch.round_trips, switch.checks)
                    started = time.perf_counter()
                    result = await client.call_tool_mcp(tool, args)
                    entry.ms[mode].append((time.perf_counter() - started) * 1000)
                    if result.is_error:
                        raise RuntimeError(f"{tool}({args}) failed in the benchmark: {result.content}")
                    if mode == "gate":
                        entry.round_trips.append(switch.round_trips - before[0])
                        entry.checks.append(switch.checks - before[1])
    return {
        "principal": USER,
        "rounds": ROUNDS,
        "datastore": settings.openfga.datastore,
        "tools": {tool: t.summary() for tool, t in sorted(timings.items())},
    }


def _show(report: dict[str, Any], console: Console) -> None:
    table = Table(
        "tool",
        "p50 gate",
        "p50 allow-all",
        "ratio p50",
        "ratio p95",
        "ratio p50 (memory)",
        "ratio p95 (memory)",
        "round trips",
        "checks",
        title=f"authorization overhead (ms, as {report['principal']}, OpenFGA on {report['datastore']})",
    )
    for tool, s in report["tools"].items():
        table.add_row(
            tool,
            str(s["p50_ms_gate"]),
            str(s["p50_ms_allow_all"]),
            str(s["ratio_p50"]),
            str(s["ratio_p95"]),
            str(s["ratio_p50_memory"]),
            str(s["ratio_p95_memory"]),
            str(s["openfga_round_trips_per_request"]),
            str(s["checks_per_request"]),
        )
    console.print(table)
