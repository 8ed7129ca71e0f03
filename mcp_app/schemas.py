"""The tool definitions as advertised: what each tool answers (its output schema; every tool's
structured content validates against it) and what it takes, said compactly. Every agent pays for
tools/list in tokens each session (tests/e2e/test_mcp_clients.py holds it to its budget), so a
schema names each answer's fields and their types at the top level and the fields of listed
items, and no more."""

from __future__ import annotations

from typing import Any

from fastmcp.tools import FunctionTool
from mcp.types import Tool as MCPTool

MAYBE_STRING = {"type": ["string", "null"]}
GUARDS = ("maxLength", "maxItems")  # bounds enforced, not advertised (see advertised_input)


def rows(*fields: str) -> dict[str, Any]:
    """A list of objects, each with these fields (``required`` binds objects only: said once, at the top)."""
    return {"type": "array", "items": {"required": list(fields)}}


def answer(*fields: str, **typed: dict[str, Any]) -> dict[str, Any]:
    """An object whose ``fields`` (and ``typed``) are always present; ``typed`` are those a
    client must know the shape of: lists of objects, values that may be null."""
    shape: dict[str, Any] = {"type": "object", "required": [*fields, *typed]}
    return {**shape, "properties": typed} if typed else shape


PAGES = rows("id", "title", "url")
GRAPH_ITEMS = rows("kind", "name", "description", "evidence")
CONTAINERS = rows("id", "key", "name", "url")

OUTPUT: dict[str, dict[str, Any]] = {
    "search": answer(
        "notice", "instruction_like_text",
        hits=rows("id", "kind", "title", "space", "breadcrumb", "url", "snippet", "chunk_id", "score", "why", "also_in", "labels", "updated_at"),
        entities=GRAPH_ITEMS,
        relations=GRAPH_ITEMS,
    ),
    "fetch": answer(
        "id", "title", "url", "space_id", "breadcrumb", "section", "markdown", "notice", "instruction_like_text",
        outline=rows("slug", "title", "level", "tokens"), next_cursor=MAYBE_STRING,
    ),
    "list_spaces": answer(spaces=CONTAINERS, projects=CONTAINERS),
    "list_children": answer("instruction_like_text", children=PAGES, next_cursor=MAYBE_STRING),
    "get_ancestors": answer("instruction_like_text", ancestors=rows("id", "title")),
    "get_tree": answer("truncated", "instruction_like_text", root={"required": ["id", "title", "url", "child_count", "children"]}),
    "resolve_path": answer("instruction_like_text", id=MAYBE_STRING, candidates=rows("id", "title", "url", "breadcrumb")),
    # Only the relations of the id's kind: a page's links_to, linked_from, mentions; an issue's
    # links_to, linked_from, mentioned_in.
    "related": {"type": "object", "additionalProperties": PAGES},
    "explore": answer(
        "notice", "instruction_like_text", "truncated",
        entity={"required": ["name", "description", "evidence", "hops"]},
        entities=rows("name", "description", "evidence", "hops"),
        relations=rows("source", "target", "description", "evidence"),
    ),
    "fetch_image": answer("id", "page_id", "filename", "media_type", "alt_text", "instruction_like_text"),
}


def advertised_input(schema: dict[str, Any]) -> dict[str, Any]:
    """The input schema as advertised. An optional argument whose absence is its default appears
    as its type alone, without the ``null`` alternative and ``null`` default Pydantic writes for
    ``X | None = None``; and the length bounds that only guard the server (``maxLength``,
    ``maxItems``: ids of 200 characters, queries of 2,000) are enforced but not advertised. Every
    argument is still validated against the function's own types and bounds: only the
    advertisement is shorter. Numeric ranges that shape an answer (``top_k``, ``depth``, ``hops``)
    stay."""
    properties = {}
    for name, spec in schema.get("properties", {}).items():
        options = spec.get("anyOf")
        if spec.get("default", ...) is None and isinstance(options, list) and {"type": "null"} in options and len(options) == 2:
            (kept,) = [option for option in options if option != {"type": "null"}]
            spec = {**{k: v for k, v in spec.items() if k not in ("anyOf", "default")}, **kept}
        properties[name] = _unbounded(spec)
    return {**schema, "properties": properties}


def _unbounded(spec: dict[str, Any]) -> dict[str, Any]:
    spec = {key: value for key, value in spec.items() if key not in GUARDS}
    return {**spec, "items": _unbounded(spec["items"])} if isinstance(spec.get("items"), dict) else spec


class WayfinderTool(FunctionTool):
    """A function tool advertised as :func:`advertised_input` says, without FastMCP's own ``_meta``
    (its tags, which no client of ours reads)."""

    def to_mcp_tool(self, **overrides: Any) -> MCPTool:
        return super().to_mcp_tool(**{"inputSchema": advertised_input(self.parameters), "title": None, "_meta": self.meta, **overrides})
