"""The one map from Wayfinder exceptions to the few stable MCP errors agents see.

Messages carry no internal detail: what failed inside is logged, never returned. A hidden object
and a missing one produce the same bytes: the not_found message names neither.
"""

from __future__ import annotations

import logging
from typing import Any

from fastmcp.exceptions import ToolError
from fastmcp.exceptions import NotFoundError as UnknownComponent
from fastmcp.exceptions import ValidationError as ArgumentsInvalid
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext

from core.errors import (
    AuthorizationUnavailable,
    InvalidArgument,
    NotFound,
    Unauthenticated,
)

log = logging.getLogger("wayfinder.mcp")


def to_tool_error(exc: BaseException) -> ToolError:
    """The MCP error for ``exc``. Expected answers (not found, bad input) are not logged as errors."""
    if isinstance(exc, ToolError):
        return exc
    if isinstance(exc, NotFound):
        return ToolError("not_found: no such page, issue, space, project or entity, or it is not visible to you", log_level=logging.DEBUG)
    if isinstance(exc, InvalidArgument):
        return ToolError(f"invalid_argument: {exc}", log_level=logging.DEBUG)
    if isinstance(exc, AuthorizationUnavailable):
        log.warning("authorization unavailable: %s", exc)
        return ToolError(
            "authorization_unavailable: permissions cannot be checked right now; nothing was returned",
            log_level=logging.DEBUG,  # logged once, just above
        )
    if isinstance(exc, Unauthenticated):
        # Our own messages: no internal detail.
        return ToolError(f"unauthenticated: {exc}", log_level=logging.DEBUG)
    log.error("tool failed", exc_info=exc)
    return ToolError("unavailable: the service cannot answer right now", log_level=logging.DEBUG)


def _describe(exc: BaseException) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):  # pydantic
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in errors())
    return str(exc)


class ErrorMapping(Middleware):
    """Applies :func:`to_tool_error` to what the tools did not map themselves: invalid arguments
    caught before a tool runs, and anything FastMCP wrapped (the original is its ``__cause__``).
    """

    async def on_call_tool(self, context: MiddlewareContext[Any], call_next: CallNext[Any, Any]) -> Any:
        try:
            return await call_next(context)
        except ArgumentsInvalid as exc:
            raise ToolError(f"invalid_argument: {_describe(exc.__cause__ or exc)}") from exc
        except UnknownComponent:  # no such tool, or one the token's scopes do not reach: the same answer
            raise ToolError(f"invalid_argument: no tool named {context.message.name!r}; see tools/list", log_level=logging.DEBUG) from None
        except ToolError as exc:
            if exc.__cause__ is not None:
                raise to_tool_error(exc.__cause__) from exc.__cause__
            raise
        except Exception as exc:
            raise to_tool_error(exc) from exc
