"""Traces and metrics: spans per tool call with the gate's, the index's and Neo4j's under them,
scrubbed of who asked and of what; Prometheus counters per tool; tokens in the audit receipt."""

from __future__ import annotations

import json
import logging

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import get_tracer

from core.errors import PortInUse
from core.settings import TelemetrySettings
from core.telemetry import Metrics, tracing
from mcp_app.server import audit_receipts
from tests.unit.test_mcp_tools import make_client


@pytest.fixture(scope="module")
def exported() -> InMemorySpanExporter:
    """This process's tracer provider (there is one per process), exporting through the scrubber;
    shut down after this module, so later tests' spans go nowhere."""
    memory = InMemorySpanExporter()
    provider = tracing(TelemetrySettings(), exporter=memory)
    assert provider is not None
    yield memory
    provider.shutdown()


def finished(exported: InMemorySpanExporter) -> list:
    from opentelemetry import trace

    trace.get_tracer_provider().force_flush()
    return list(exported.get_finished_spans())


def test_tracing_is_off_without_an_endpoint():
    assert tracing(TelemetrySettings()) is None


def test_spans_leave_without_who_asked_or_what_was_said(exported):
    exported.clear()
    with get_tracer("test").start_as_current_span(
        "tools/call fetch", attributes={"enduser.id": "user:bob", "mcp.session.id": "s-1", "gen_ai.tool.name": "fetch", "wayfinder.checks": 3}
    ) as span:
        span.add_event("exception", {"exception.message": "page:2 The Metastore secret plan"})
        span.set_status(1, "page:2 not visible")
    (out,) = [s for s in finished(exported) if s.name == "tools/call fetch"]
    assert dict(out.attributes) == {"gen_ai.tool.name": "fetch", "wayfinder.checks": 3}
    assert out.events == () and out.status.description is None


async def test_a_tool_call_is_one_trace_with_the_gate_and_the_index_under_it(exported):
    exported.clear()
    client, _ = await make_client("space:S", "page:1")
    async with client:
        await client.call_tool("search", {"query": "Metastore"})
    spans = finished(exported)
    call = next(s for s in spans if s.attributes.get("gen_ai.tool.name") == "search")
    children = {s.name for s in spans if s.parent is not None and s.context.trace_id == call.context.trace_id}
    assert {"wayfinder.authz.batch_check", "wayfinder.index.query"} <= children
    text = json.dumps([dict(s.attributes) for s in spans])
    assert "page:" not in text and "bob" not in text and "Metastore" not in text


async def test_metrics_count_calls_checks_denials_errors_and_tokens():
    metrics = Metrics()
    client, _ = await make_client("space:S", "page:1", metrics=metrics)
    async with client:
        await client.call_tool("fetch", {"id": "page:1"})
        await client.call_tool("fetch", {"id": "page:2"}, raise_on_error=False)
    value = metrics.registry.get_sample_value
    assert value("wayfinder_tool_seconds_count", {"tool": "fetch", "outcome": "ok"}) == 1
    assert value("wayfinder_tool_errors_total", {"tool": "fetch", "kind": "not_found"}) == 1
    assert value("wayfinder_authz_checks_total", {"tool": "fetch"}) >= 3
    assert value("wayfinder_authz_denials_total", {"tool": "fetch"}) >= 1
    assert value("wayfinder_response_tokens_total", {"tool": "fetch"}) > 5


def test_metrics_are_served_for_prometheus():
    metrics = Metrics()
    metrics.record("search", outcome="ok", seconds=0.2, checks=7, denied=2, tokens=420)
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    metrics.serve("127.0.0.1", port)
    body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    assert 'wayfinder_authz_checks_total{tool="search"} 7.0' in body
    assert 'wayfinder_response_tokens_total{tool="search"} 420.0' in body
    with pytest.raises(PortInUse, match=f"127.0.0.1:{port}"):  # taken: a clear error, not a traceback
        Metrics().serve("127.0.0.1", port)


async def test_the_audit_receipt_counts_the_tokens_returned(caplog):
    client, observed = await make_client("space:S", "page:1")
    async with client:
        await client.call_tool("fetch", {"id": "page:1"})
    (tool, gate, result), = observed
    with caplog.at_level(logging.INFO, logger="wayfinder.audit"):
        audit_receipts(b"k" * 32)(tool, gate, result)
        audit_receipts(b"k" * 32)(tool, gate, {"error": "NotFound"})
    ok, refused = (json.loads(r.getMessage()) for r in caplog.records)
    assert ok["tokens"] > 5 and refused["tokens"] == 0
