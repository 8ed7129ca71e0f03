"""One MCP tool call over streamable HTTP with a bearer token, as the e2e tests make them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fastmcp import Client
from fastmcp.exceptions import ToolError


async def call_with(url: str, token: str, tool: str, **args: Any) -> dict[str, Any] | str:
    """The tool's structured result, or the error text when the tool refuses."""
    async with Client(url, auth=token) as client:
        try:
            return (await client.call_tool(tool, args)).structured_content
        except ToolError as exc:
            return str(exc)


def strings_in(value: Any) -> Iterator[str]:
    """Every string in a tool's result, however deep."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)
