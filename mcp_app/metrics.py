"""Each tool call measured for the Prometheus metrics (core.telemetry.Metrics): latency, outcome,
the checks its gate made and denied, and the tokens of its answer."""

from __future__ import annotations

import re
import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from fastmcp.exceptions import ToolError
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext

from authz.gate import Gate
from core.telemetry import Metrics, response_tokens


@dataclass
class _Call:
    gate: Gate | None = None


_KIND = re.compile(r"[a-z_]{1,40}")
_call: ContextVar[_Call | None] = ContextVar("wayfinder_measured_call", default=None)


def note_gate(gate: Gate) -> None:
    """Tell the measurement of the current call which gate authorized it."""
    call = _call.get()
    if call is not None:
        call.gate = gate


class Measure(Middleware):
    """Outermost middleware: sees every answer, the refusals of the limits and the error mapping
    included. The outcome is ``ok`` or the error's kind, the text before its first colon."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    async def on_call_tool(self, context: MiddlewareContext[Any], call_next: CallNext[Any, Any]) -> Any:
        call = _Call()
        token = _call.set(call)
        started = time.perf_counter()
        outcome, tokens = "ok", 0
        try:
            result = await call_next(context)
            tokens = response_tokens(getattr(result, "structured_content", None) or {})
            return result
        except ToolError as exc:
            kind = str(exc).split(":", 1)[0]
            outcome = kind if _KIND.fullmatch(kind) else "error"  # a label of a few known values
            raise
        except BaseException:
            outcome = "internal"
            raise
        finally:
            _call.reset(token)
            records = call.gate.records if call.gate is not None else []
            self._metrics.record(
                context.message.name,
                outcome=outcome,
                seconds=time.perf_counter() - started,
                checks=len(records),
                denied=sum(not r.allowed for r in records),
                tokens=tokens,
            )
