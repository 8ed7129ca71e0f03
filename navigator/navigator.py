"""Authorized traversal of the trees: every node returned has passed the gate in this request."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass

from authz import links, policy
from authz.gate import Gate
from core import ids
from core.errors import InvalidArgument, NotFound
from core.text import estimate_tokens, sections
from navigator.base import ChildPage, Crumb, NavigatorStore, PageSummary

MAX_CHILDREN_LIMIT = 200
MAX_SECTION_CHARS = 200
MAX_CURSOR_CHARS = 512


@dataclass(frozen=True)
class ChildrenPage:
    items: list[ChildPage]
    next_cursor: str | None


@dataclass(frozen=True)
class PageView:
    id: str
    title: str
    url: str
    space_id: str
    breadcrumb: tuple[Crumb, ...]
    outline: list[dict[str, object]]
    section: str | None
    markdown: str


class Navigator:
    def __init__(self, store: NavigatorStore) -> None:
        self._store = store

    async def list_spaces(self, gate: Gate) -> list[dict[str, str]]:
        spaces = await self._store.spaces()
        visible = await gate.visible(space.id for space in spaces)
        return [{"id": s.id, "key": s.key, "name": s.name, "url": s.url} for s in spaces if s.id in visible]

    async def list_children(self, gate: Gate, node_id: str, cursor: str | None, limit: int) -> ChildrenPage:
        ids.parse(node_id)
        if not 1 <= limit <= MAX_CHILDREN_LIMIT:
            raise InvalidArgument(f"limit must be between 1 and {MAX_CHILDREN_LIMIT}, got {limit}")
        await gate.require(node_id)
        after = await self._resume_after(gate, node_id, cursor)
        found: list[ChildPage] = []
        # One extra visible child tells whether a next page exists, so a cursor never leads to
        # an empty page that would reveal hidden children.
        while len(found) <= limit:
            batch = await self._store.children(node_id, after, limit * 2)
            if not batch:
                break
            visible = await gate.visible(child.id for child in batch)
            found.extend(child for child in batch if child.id in visible)
            after = batch[-1].position
        items = found[:limit]
        more = len(found) > limit
        return ChildrenPage(items, _encode_cursor(node_id, items[-1].id) if more else None)

    async def _resume_after(self, gate: Gate, node_id: str, cursor: str | None) -> int:
        """Position to continue after. Cursors name the last visible child, never a position, so
        they reveal nothing about hidden siblings."""
        if cursor is None:
            return -1
        last_id = _decode_cursor(cursor, node_id)
        visible = last_id in await gate.visible([last_id])  # both lookups always run: no timing hint
        position = await self._store.position(node_id, last_id)
        if not visible or position is None:
            raise InvalidArgument(_BAD_CURSOR)
        return position

    async def read_page(self, gate: Gate, page_id: str, section: str | None = None) -> PageView:
        kind, _ = ids.parse(page_id)
        if kind != "page":
            raise InvalidArgument(f"fetch takes a page id such as 'page:27362069', got {page_id!r}")
        if section is not None and (not isinstance(section, str) or not 0 < len(section) <= MAX_SECTION_CHARS):
            raise InvalidArgument(f"section must be a heading slug of 1 to {MAX_SECTION_CHARS} characters")
        await gate.require(page_id)
        page = await self._store.page(page_id)
        if page is None:  # deleted between the check and the read
            raise NotFound(page_id)
        summary = (await self.visible_summaries(gate, [page_id])).get(page_id)
        if summary is None:  # its space is hidden, or it moved or vanished since the check
            raise NotFound(page_id)
        parts = sections(page.markdown)
        chosen = page.markdown
        if section is not None:
            match = next((s for s in parts if s.slug == section), None)
            if match is None:
                raise InvalidArgument(f"page {page_id} has no section {section!r}; see the outline for slugs")
            chosen = match.text
        # Links to pages the caller cannot see lose their targets, in the text and the outline.
        markdown, *titles = await links.redact(gate, [chosen, *(s.title for s in parts)])
        outline = [
            {"slug": s.slug, "title": title, "level": s.level, "tokens": estimate_tokens(s.text)}
            for s, title in zip(parts, titles, strict=True)
        ]
        return PageView(page.id, page.title, page.url, summary.space_id, summary.ancestors, outline, section, markdown)

    async def visible_summaries(self, gate: Gate, page_ids: Sequence[str]) -> dict[str, PageSummary]:
        """Summaries of the visible pages among ``page_ids``, breadcrumbs cut (authz.policy)."""
        return await policy.visible_pages(gate, await self._store.summaries(page_ids))


_BAD_CURSOR = "invalid cursor: pass the next_cursor of the previous list_children call unchanged"


def _encode_cursor(node_id: str, last_id: str) -> str:
    raw = json.dumps({"node": node_id, "after": last_id}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str, node_id: str) -> str:
    if not isinstance(cursor, str) or len(cursor) > MAX_CURSOR_CHARS:
        raise InvalidArgument(_BAD_CURSOR)
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if data["node"] == node_id and isinstance(data["after"], str):
            ids.parse(data["after"])
            return data["after"]
    except (binascii.Error, ValueError, KeyError, TypeError, InvalidArgument):
        pass
    raise InvalidArgument(_BAD_CURSOR)
