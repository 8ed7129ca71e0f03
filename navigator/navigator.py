"""Authorized traversal of the trees: every node returned has passed the gate in this request."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from authz import links, policy
from authz.gate import Gate
from core import ids
from core.errors import InvalidArgument, NotFound
from core.text import estimate_tokens, sections
from navigator.base import ChildPage, Crumb, NavigatorStore, PageSummary

MAX_CHILDREN_LIMIT = 200
CHILD_REFILL = 50
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


@dataclass(frozen=True)
class ImageView:
    id: str
    page_id: str
    filename: str
    media_type: str
    alt_text: str
    data: bytes = field(repr=False)


class Navigator:
    def __init__(self, store: NavigatorStore) -> None:
        self._store = store

    async def space_ids(self) -> list[str]:
        """Ids of every space the store holds, unauthorized: for callers that authorize them in
        a batch of their own (search)."""
        return [space.id for space in await self._store.spaces()]

    async def list_spaces(self, gate: Gate) -> list[dict[str, str]]:
        spaces = await self._store.spaces()
        visible = await gate.visible(space.id for space in spaces)
        return [{"id": s.id, "key": s.key, "name": s.name, "url": s.url} for s in spaces if s.id in visible]

    async def list_children(self, gate: Gate, node_id: str, cursor: str | None, limit: int) -> ChildrenPage:
        ids.parse(node_id)
        if not 1 <= limit <= MAX_CHILDREN_LIMIT:
            raise InvalidArgument(f"limit must be between 1 and {MAX_CHILDREN_LIMIT}, got {limit}")
        last_id = _decode_cursor(cursor, node_id) if cursor is not None else None

        # Read first, then authorize the node, the cursor's last child and the first children in
        # one batch: nothing read is used unless the node is visible.
        after = await self._store.position(node_id, last_id) if last_id else -1
        batch = await self._store.children(node_id, after, limit + 1) if after is not None else []
        visible = await gate.visible([node_id, *([last_id] if last_id else []), *(child.id for child in batch)])
        if node_id not in visible:
            raise NotFound(node_id)
        if after is None or (last_id is not None and last_id not in visible):
            raise InvalidArgument(_BAD_CURSOR)  # cursors name the last visible child, never a position
        found: list[ChildPage] = []
        # One extra visible child tells whether a next page exists, so a cursor never leads to
        # an empty page that would reveal hidden children.
        while batch:
            shown = await gate.visible(child.id for child in batch)
            found.extend(child for child in batch if child.id in shown)
            if len(found) > limit:
                break
            # Refill in batches of some size: many hidden children cost few round trips.
            batch = await self._store.children(node_id, batch[-1].position, max(limit + 1 - len(found), CHILD_REFILL))
        items = found[:limit]
        more = len(found) > limit
        return ChildrenPage(items, _encode_cursor(node_id, items[-1].id) if more else None)

    async def read_page(self, gate: Gate, page_id: str, section: str | None = None) -> PageView:
        kind, _ = ids.parse(page_id)
        if kind != "page":
            raise InvalidArgument(f"fetch takes a page id such as 'page:27362069', got {page_id!r}")
        if section is not None and (not isinstance(section, str) or not 0 < len(section) <= MAX_SECTION_CHARS):
            raise InvalidArgument(f"section must be a heading slug of 1 to {MAX_SECTION_CHARS} characters")

        # Read first, then authorize the page, its space, its ancestors and every link target in
        # one batch; the text is used only if the page and its space are visible.
        page = await self._store.page(page_id)
        summaries = await self._store.summaries([page_id]) if page is not None else {}
        also = links.references_in([page.markdown]) if page is not None else [page_id]
        summary = (await policy.visible_pages(gate, summaries, also=also)).get(page_id)
        if page is None or summary is None:  # hidden, missing, its space hidden, or moved meanwhile
            raise NotFound(page_id)
        # Links to pages the caller cannot see lose their targets (A11), in the text and in the
        # outline. Sections and slugs come from the stored text, where no reference shapes a slug.
        parts = sections(page.markdown)
        if section is not None and section not in [part.slug for part in parts]:
            raise InvalidArgument(f"page {page_id} has no section {section!r}; see the outline for slugs")
        shown = await links.redact(gate, [page.markdown, *(t for part in parts for t in (part.title, part.text))])
        markdown, titles, texts = shown[0], shown[1::2], shown[2::2]
        outline = [
            {"slug": part.slug, "title": title, "level": part.level, "tokens": estimate_tokens(text)}
            for part, title, text in zip(parts, titles, texts, strict=True)
        ]
        if section is not None:
            markdown = next(text for part, text in zip(parts, texts, strict=True) if part.slug == section)
        return PageView(page.id, page.title, page.url, summary.space_id, summary.ancestors, outline, section, markdown)

    async def read_image(self, gate: Gate, image_id: str) -> ImageView:
        """An image, authorized through the page that shows it (and that page's space)."""
        kind, _ = ids.parse(image_id)
        if kind != "image":
            raise InvalidArgument(f"fetch_image takes an image id such as 'image:att27362100', got {image_id!r}")
        image = await self._store.image(image_id)
        summaries = await self._store.summaries([f"page:{image.page_id}"]) if image is not None else {}
        if image is None or not await policy.visible_pages(gate, summaries):
            raise NotFound(image_id)
        return ImageView(image.id, f"page:{image.page_id}", image.filename, image.media_type, image.alt_text, image.data)

    async def placed(self, page_ids: Sequence[str]) -> dict[str, PageSummary]:
        """Where pages sit (space, ancestors), unauthorized: for callers that authorize them in a
        batch of their own through authz.policy (search)."""
        return await self._store.summaries(page_ids)


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
