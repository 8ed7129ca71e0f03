"""Traces and metrics of the MCP server, both off unless configured (``TelemetrySettings``).

Spans come from FastMCP (one per MCP request, the tool call's) and from :func:`span` around the
gate's checks, the index and Neo4j. They name tools and count things; they never hold page text,
ids or who asked. FastMCP's own spans do (the token's client id, which is ours ``user:<id>``, and
the session id), so every span passes :class:`Scrubbed` on its way out, which keeps only the
attributes of :data:`EXPORTED` and drops events and status messages.

Metrics are Prometheus counters and histograms in a registry of the server's own, served on a
port of their own (:meth:`Metrics.serve`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Status
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

from core.errors import PortInUse
from core.text import estimate_tokens

if TYPE_CHECKING:
    from core.settings import TelemetrySettings

#: attributes a span may carry out of the process (prefixes): names, counts, outcomes
EXPORTED = (
    "wayfinder.",
    "gen_ai.tool.name",
    "mcp.method.name",
    "mcp.protocol.version",
    "error.type",
    "fastmcp.component.type",
    "fastmcp.server.name",
)
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

_tracer = trace.get_tracer("wayfinder")


@contextmanager
def span(name: str, **counts: int) -> Iterator[None]:
    """A child span of the current one, ``wayfinder.<name>``, with counts as its attributes."""
    with _tracer.start_as_current_span(f"wayfinder.{name}", attributes={f"wayfinder.{k}": v for k, v in counts.items()}):
        yield


class Scrubbed(SpanExporter):
    """Hands spans on to ``inner`` with only the attributes of :data:`EXPORTED`, no events and no
    status message (an exception's text may quote what it was about)."""

    def __init__(self, inner: SpanExporter) -> None:
        self._inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self._inner.export([_scrubbed(s) for s in spans])

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._inner.force_flush(timeout_millis)


def _scrubbed(span: ReadableSpan) -> ReadableSpan:
    attributes = {key: value for key, value in (span.attributes or {}).items() if key.startswith(EXPORTED)}
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=attributes,
        events=(),
        links=span.links,
        kind=span.kind,
        status=Status(span.status.status_code),
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def tracing(settings: TelemetrySettings, exporter: SpanExporter | None = None) -> TracerProvider | None:
    """Send this process's spans, scrubbed, to the OTLP endpoint (or to ``exporter``); ``None``
    when neither is set. Call once, before serving; shut the provider down at the end to flush."""
    if exporter is None and settings.otlp_endpoint is None:
        return None
    provider = TracerProvider(resource=Resource.create({"service.name": settings.service_name}))
    provider.add_span_processor(BatchSpanProcessor(Scrubbed(exporter or OTLPSpanExporter(endpoint=settings.otlp_endpoint))))
    trace.set_tracer_provider(provider)
    return provider


def response_tokens(result: dict[str, Any]) -> int:
    """What a tool's answer costs the caller's context, as :func:`estimate_tokens` counts."""
    return estimate_tokens(json.dumps(result, ensure_ascii=False, default=str))


class Metrics:
    """Per tool: latency by outcome, checks and denials, errors by kind, tokens returned."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._latency = Histogram(
            "wayfinder_tool_seconds", "Time to answer a tool call.", ["tool", "outcome"], registry=self.registry, buckets=LATENCY_BUCKETS
        )
        self._checks = Counter("wayfinder_authz_checks", "Authorization checks made.", ["tool"], registry=self.registry)
        self._denials = Counter("wayfinder_authz_denials", "Authorization checks denied.", ["tool"], registry=self.registry)
        self._errors = Counter("wayfinder_tool_errors", "Tool calls answered with an error, by kind.", ["tool", "kind"], registry=self.registry)
        self._tokens = Counter("wayfinder_response_tokens", "Tokens of the answers returned.", ["tool"], registry=self.registry)

    def record(self, tool: str, *, outcome: str, seconds: float, checks: int, denied: int, tokens: int) -> None:
        """One finished call; ``outcome`` is ``ok`` or the error's kind (``not_found``, …)."""
        self._latency.labels(tool, "ok" if outcome == "ok" else "error").observe(seconds)
        self._checks.labels(tool).inc(checks)
        self._denials.labels(tool).inc(denied)
        self._tokens.labels(tool).inc(tokens)
        if outcome != "ok":
            self._errors.labels(tool, outcome).inc()

    def serve(self, host: str, port: int) -> None:
        """``/metrics`` on ``host:port``, in a thread of its own."""
        try:
            start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            raise PortInUse(f"the metrics endpoint cannot listen on {host}:{port} ({exc.strerror}); set WAYFINDER_MCP__TELEMETRY__METRICS_PORT") from exc
