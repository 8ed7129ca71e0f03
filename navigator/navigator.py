"""Authorized traversal of the trees: every node returned has passed the gate in this request.

**Decide first, read after.** A tool given one node's id asks the gate about that node alone,
in a batch of its own, before it reads anything the node holds (its text, its ancestors, its
links, an image's bytes): a hidden id and a missing one then get the same answer *and the same
work* — one check, no read that depends on what the node holds — so neither the reply nor its
timing tells them apart (DESIGN.md A6). What a visible node's answer needs (its space, ancestors
and link targets) is authorized in the next batch."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from authz import links, policy
from authz.gate import Gate
from core import ids
from core.errors import InvalidArgument, NotFound
from core.models import Project, Space
from core.text import cut, estimate_tokens, sections, title_key
from navigator.base import ChildPage, Crumb, NavigatorStore, PageSummary

MAX_CHILDREN_LIMIT = 200
CHILD_REFILL = 50
MAX_SECTION_CHARS = 200
MAX_CURSOR_CHARS = 512
#: text a fetch returns at most a call, by default (as core.text.estimate_tokens counts)
FETCH_TOKENS = 10_000
MAX_TREE_DEPTH = 3
MAX_TREE_LIMIT = 200
# Children read (and authorized) per get_tree call at most, shallow levels first: each check costs
# OpenFGA milliseconds, and one call must stay within the request's authorization deadline. A
# parent whose children were not all read has no child count.
TREE_ROWS = 400
MAX_PATH_CHARS = 1000
MAX_PATH_MATCHES = 20  # candidates an ambiguous path returns at most
# Nodes a path's last title may name, in any space or project, read (and authorized) before the
# rest of the path narrows them, so hidden namesakes do not crowd out a visible match.
PATH_ROWS = 500
MAX_RELATED_LIMIT = 100
CONTAINERS = ("space", "project")  # the roots of the trees
NODES = ("page", "issue")
# What fetch reads and get_ancestors places: the tree's nodes, and Jira comments restricted to a role or
# a group, documents of their own below their issue but outside the tree (DESIGN.md A14).
DOCUMENTS = (*NODES, "comment")
# Linked pages read (and authorized) each way before the limit is applied, so hidden pages do not
# take the places of visible ones.
RELATED_ROWS = 500
# Per kind of node: its relations, and the kind of node each reaches.
RELATIONS = {
    "page": {"links_to": "page", "linked_from": "page", "mentions": "issue"},
    "issue": {"links_to": "issue", "linked_from": "issue", "mentioned_in": "page"},
}


@dataclass(frozen=True)
class ChildrenPage:
    items: list[ChildPage]
    next_cursor: str | None


@dataclass
class TreeNode:
    id: str
    title: str
    url: str
    child_count: int | None = None  # visible children; None when there were too many to count
    children: list[TreeNode] = field(default_factory=list)


@dataclass(frozen=True)
class Tree:
    root: TreeNode
    truncated: bool  # nodes left out for the limit, or children too many to read


@dataclass(frozen=True)
class Resolved:
    """What a title path names: one node, or the visible candidates when it names several."""

    id: str | None
    candidates: list[dict[str, object]]


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
    next_cursor: str | None = None  # the rest of the text is there; None: this part ends it


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

    async def container_ids(self) -> list[str]:
        """Ids of every space and project the store holds, unauthorized: for callers that
        authorize them in a batch of their own (search)."""
        return [container.id for container in await self._store.containers()]

    async def list_spaces(self, gate: Gate) -> dict[str, list[dict[str, str]]]:
        """The Confluence spaces and the Jira projects the caller can see, asked in one batch."""
        containers = await self._store.containers()
        visible = await gate.visible(c.id for c in containers)
        return {
            kind: [{"id": c.id, "key": c.key, "name": c.name, "url": c.url} for c in containers if isinstance(c, of) and c.id in visible]
            for kind, of in (("spaces", Space), ("projects", Project))
        }

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

    async def read_page(
        self, gate: Gate, page_id: str, section: str | None = None, *, max_tokens: int = FETCH_TOKENS, cursor: str | None = None
    ) -> PageView:
        """A page or issue (or one section), at most ``max_tokens`` of its text a call: when more
        follows, ``next_cursor`` continues it (the outline comes with the first part). A cursor is
        checked against the text the caller may see now: a page changed since gives
        ``invalid_argument``, never a part of another version."""
        if type(max_tokens) is not int or max_tokens < 1:
            raise InvalidArgument("max_tokens must be a positive number of tokens")
        start = _decode_part(cursor, page_id, section) if cursor is not None else None
        kind, _ = ids.parse(page_id)
        if kind not in DOCUMENTS:
            raise InvalidArgument(f"fetch takes a page, issue or comment id such as 'page:27362069' or 'issue:HIVE-1234', got {page_id!r}")
        if section is not None and (not isinstance(section, str) or not 0 < len(section) <= MAX_SECTION_CHARS):
            raise InvalidArgument(f"section must be a heading slug of 1 to {MAX_SECTION_CHARS} characters")

        await gate.require(page_id)  # decided before anything it holds is read
        # Then its space, its ancestors and every link target in one batch; the text is used only
        # if the page and its space are visible.
        page = await self._store.page(page_id)
        summaries = await self._store.summaries([page_id]) if page is not None else {}
        also = links.references_in([page.markdown]) if page is not None else []
        summary = (await policy.visible_pages(gate, summaries, also=also)).get(page_id)
        if page is None or summary is None:  # deleted, its space hidden, or moved meanwhile
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
        version = hashlib.sha256(markdown.encode()).hexdigest()[:16]
        if start is not None and (start[1] != version or not 0 < start[0] < len(markdown)):
            raise InvalidArgument(f"{page_id} changed since that cursor was given; fetch it again without one")
        at = start[0] if start is not None else 0
        end = cut(markdown, at, max_tokens)
        more = _encode_part(page_id, section, end, version) if end < len(markdown) else None
        return PageView(
            page.id, page.title, page.url, summary.space_id, summary.ancestors, outline if at == 0 else [], section, markdown[at:end], more
        )

    async def read_image(self, gate: Gate, image_id: str) -> ImageView:
        """An image, authorized through the page that shows it (and that page's space)."""
        kind, _ = ids.parse(image_id)
        if kind != "image":
            raise InvalidArgument(f"fetch_image takes an image id such as 'image:att27362100', got {image_id!r}")
        # Decided on its page (one check) before its bytes are read. A missing image is asked
        # about a page of its number: Confluence numbers pages and attachments from one sequence,
        # so no page has an attachment's number, and the question is shaped as a hidden one's.
        page_id = await self._store.image_page(image_id) or f"page:{image_id.removeprefix('image:att')}"
        if page_id not in await gate.visible([page_id]):
            raise NotFound(image_id)
        image = await self._store.image(image_id)
        summaries = await self._store.summaries([page_id]) if image is not None else {}
        if image is None or not await policy.visible_pages(gate, summaries):
            raise NotFound(image_id)
        return ImageView(image.id, f"page:{image.page_id}", image.filename, image.media_type, image.alt_text, image.data)

    async def get_ancestors(self, gate: Gate, node_id: str) -> list[Crumb]:
        """The path from the root (the space or project) down to the parent of ``node_id`` (a
        page, or an issue: its epic, its story). Every node of it is visible: it starts below the
        lowest hidden ancestor if there is one (A3)."""
        kind, _ = ids.parse(node_id)
        if kind in CONTAINERS:
            await self._container(gate, node_id)
            return []
        if kind not in DOCUMENTS:
            raise InvalidArgument(f"get_ancestors takes a page, issue, comment, space or project id, got {node_id!r}")
        await gate.require(node_id)  # decided before its ancestors are read
        summaries = await self._store.summaries([node_id])
        summary = (await policy.visible_pages(gate, summaries)).get(node_id)
        if summary is None:
            raise NotFound(node_id)
        whole = summaries[node_id].ancestors
        if len(summary.ancestors) < len(whole):  # cut below a hidden ancestor: the root is not on this path
            return list(summary.ancestors)
        root = await self._container(gate, summary.space_id)
        return [Crumb(root.id, root.name), *summary.ancestors]

    async def get_tree(self, gate: Gate, node_id: str, depth: int, limit: int) -> Tree:
        """The subtree under a space, page, project or issue, ``depth`` levels down and at most
        ``limit`` nodes below the root (shallow levels first), hidden nodes left out with everything
        under them.
        Each node's ``child_count`` counts its visible children. One round trip to the
        authorizer per level read."""
        kind, _ = ids.parse(node_id)
        if kind not in (*CONTAINERS, *NODES):
            raise InvalidArgument(f"get_tree takes a page, issue, space or project id, got {node_id!r}")
        if not isinstance(depth, int) or not 1 <= depth <= MAX_TREE_DEPTH:
            raise InvalidArgument(f"depth must be between 1 and {MAX_TREE_DEPTH}, got {depth!r}")
        if not isinstance(limit, int) or not 1 <= limit <= MAX_TREE_LIMIT:
            raise InvalidArgument(f"limit must be between 1 and {MAX_TREE_LIMIT}, got {limit!r}")

        # Read the root and its children first, then authorize them in one batch.
        rows = await self._store.children_of([node_id], TREE_ROWS)
        below = [obj for _, child in rows for obj in (child.id, child.space_id)]
        if kind in CONTAINERS:
            container = next((c for c in await self._store.containers() if c.id == node_id), None)
            shown = await gate.visible([node_id, *below])
            if container is None or node_id not in shown:
                raise NotFound(node_id)
            root = TreeNode(node_id, container.name, container.url)
        else:
            summaries = await self._store.summaries([node_id])
            summary = (await policy.visible_pages(gate, summaries, also=below if summaries else [node_id])).get(node_id)
            if summary is None:
                raise NotFound(node_id)
            root = TreeNode(node_id, summary.title, summary.url)

        nodes, frontier, budget, truncated, rows_left = {node_id: root}, [node_id], limit, False, TREE_ROWS
        for level in range(1, depth + 2):  # the level below the last one shown is read for the counts
            if level > 1:
                rows = await self._store.children_of(frontier, rows_left) if rows_left else []
            # This parent and later ones (in the store's order) were not read whole.
            cut = (rows[-1][0] if rows else min(frontier)) if len(rows) >= rows_left else None
            rows_left -= len(rows)
            truncated = truncated or cut is not None
            shown = await gate.visible(obj for _, child in rows for obj in (child.id, child.space_id))
            kids: dict[str, list[ChildPage]] = {}
            for parent, child in rows:
                if child.id in shown and child.space_id in shown:
                    kids.setdefault(parent, []).append(child)
            for parent in frontier:
                nodes[parent].child_count = None if cut is not None and parent >= cut else len(kids.get(parent, ()))
            if level > depth:
                break
            next_frontier = []
            for parent in frontier:  # tree order, so the limit keeps the first nodes of each level
                for child in kids.get(parent, ()):
                    if budget == 0:
                        truncated = True
                        break
                    node = nodes[child.id] = TreeNode(child.id, child.title, child.url)
                    nodes[parent].children.append(node)
                    next_frontier.append(child.id)
                    budget -= 1
            frontier = next_frontier
            if not frontier:
                break
        return Tree(root, truncated)

    async def resolve_path(self, gate: Gate, path: str) -> Resolved:
        """The page, issue, space or project a title path names: ``"HIVE/LanguageManual/LanguageManual
        DDL"``, ``"HIVE/HIVE-1234"`` or, in any space or project, ``"Home/Apache Hive 4.0.X"``. Each
        title (an issue's summary, or its key) is a child of the one before; the first need not be
        at the top. Case, width and whitespace do not matter; write a ``/`` inside a title as
        ``\\/``. A path through anything the caller cannot see names nothing: hidden and absent
        are the same not found."""
        if not isinstance(path, str) or not 0 < len(path) <= MAX_PATH_CHARS:
            raise InvalidArgument(f"path must be 1 to {MAX_PATH_CHARS} characters")
        raw = [part.replace("\\/", "/").strip() for part in re.split(r"(?<!\\)/", path.strip().strip("/"))]
        segments = [title_key(part) for part in raw]
        if not all(segments):
            raise InvalidArgument(f"path {path.strip()[:80]!r} has an empty title; separate titles with one '/'")
        issue_key = raw[-1].upper() if ids.ISSUE_KEY.fullmatch(raw[-1].upper()) else None
        containers = await self._store.containers()
        titled = await self._store.titled(segments[-1], PATH_ROWS, issue_key)
        # Every container and every node with the last title, in one batch, before anything else
        # about them is read: what is read does not depend on what the first title names, so a
        # hidden space key reads as a title, as an absent one does, and a title only hidden nodes
        # carry costs what a title nobody uses does (A6).
        visible = await gate.visible([*(c.id for c in containers), *titled])
        shown = await policy.visible_pages(gate, await self._store.summaries([node for node in titled if node in visible]))
        # A space and a project may share a key.
        named = [c for c in containers if c.id in visible and c.key.casefold() == segments[0]]
        if named:
            if len(segments) == 1:
                candidates = [{"id": c.id, "title": c.name, "url": c.url, "breadcrumb": []} for c in named]
                return Resolved(named[0].id if len(named) == 1 else None, candidates)
            segments = segments[1:]
            shown = {node: summary for node, summary in shown.items() if summary.space_id in {c.id for c in named}}

        def names(summary: PageSummary) -> str:
            return segments[-1] if summary.id == f"issue:{issue_key}" else title_key(summary.title)

        matches = [
            summary
            for summary in shown.values()
            if len(summary.ancestors) >= len(segments) - 1  # every titled node on the path is visible
            and [title_key(c.title) for c in summary.ancestors[len(summary.ancestors) - len(segments) + 1 :]] == segments[:-1]
            and names(summary) == segments[-1]
        ]
        if not matches:
            raise NotFound(path.strip()[:200])
        matches = sorted(matches, key=lambda s: (len(s.ancestors), s.id))[:MAX_PATH_MATCHES]
        candidates = [
            {"id": m.id, "title": m.title, "url": m.url, "breadcrumb": [dataclasses.asdict(c) for c in m.ancestors]} for m in matches
        ]
        return Resolved(matches[0].id if len(matches) == 1 else None, candidates)

    async def related(self, gate: Gate, node_id: str, limit: int, kinds: Sequence[str] | None = None) -> dict[str, list[ChildPage]]:
        """What a page or issue is connected with, up to ``limit`` of each relation: a page's
        links both ways and the issues it mentions; an issue's links both ways and the pages
        mentioning it; only the relations reaching ``kinds`` ("page", "issue") when given. The
        node, its space or project and every related one are authorized in one batch; a related
        page or issue is shown only with its own space or project."""
        kind, _ = ids.parse(node_id)
        if kind not in NODES:
            raise InvalidArgument(f"related takes a page or issue id such as 'page:27362069', got {node_id!r}")
        if not isinstance(limit, int) or not 1 <= limit <= MAX_RELATED_LIMIT:
            raise InvalidArgument(f"limit must be between 1 and {MAX_RELATED_LIMIT}, got {limit!r}")
        if kinds is not None and (not kinds or not set(kinds) <= set(NODES)):
            raise InvalidArgument(f"kinds takes one or both of {list(NODES)}, got {kinds!r}")
        relations = [relation for relation, reached in RELATIONS[kind].items() if kinds is None or reached in kinds]
        await gate.require(node_id)  # decided before its links are read
        rows = [(relation, node) for relation, node in await self._store.related(node_id, RELATED_ROWS) if relation in relations]
        summaries = await self._store.summaries([node_id])
        others = [obj for _, node in rows for obj in (node.id, node.space_id)]
        if node_id not in await policy.pages_in_visible_spaces(gate, summaries, also=others):
            raise NotFound(node_id)
        shown = await gate.visible(others)
        found: dict[str, list[ChildPage]] = {relation: [] for relation in relations}
        for relation, node in rows:
            if node.id in shown and node.space_id in shown and len(found[relation]) < limit:
                found[relation].append(node)
        return found

    async def _container(self, gate: Gate, container_id: str) -> Space | Project:
        """The space or project, if the caller may see it; NotFound otherwise (asked like any other id)."""
        found = next((c for c in await self._store.containers() if c.id == container_id), None)
        await gate.require(container_id)
        if found is None:
            raise NotFound(container_id)
        return found

    async def placed(self, page_ids: Sequence[str]) -> dict[str, PageSummary]:
        """Where pages sit (space, ancestors), unauthorized: for callers that authorize them in a
        batch of their own through authz.policy (search)."""
        return await self._store.summaries(page_ids)


_BAD_CURSOR = "invalid cursor: pass the next_cursor of the previous list_children call unchanged"
_BAD_PART = "invalid cursor: pass the next_cursor of the previous fetch of this page and section unchanged"


def _pack(fields: dict[str, object]) -> str:
    """A cursor: its fields as URL-safe base64 JSON (opaque to callers, checked when it comes back)."""
    return base64.urlsafe_b64encode(json.dumps(fields, separators=(",", ":")).encode()).decode().rstrip("=")


def _unpack(cursor: object) -> dict[str, object]:
    """A cursor's fields; empty for anything that is not a cursor of ours."""
    if not isinstance(cursor, str) or len(cursor) > MAX_CURSOR_CHARS:
        return {}
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _encode_part(page_id: str, section: str | None, at: int, version: str) -> str:
    return _pack({"page": page_id, "section": section, "at": at, "version": version})


def _decode_part(cursor: str, page_id: str, section: str | None) -> tuple[int, str]:
    """(where the part starts, which text it is a part of) for a fetch of ``page_id``/``section``."""
    data = _unpack(cursor)
    at, version = data.get("at"), data.get("version")
    if data.get("page") == page_id and "section" in data and data["section"] == section and type(at) is int and isinstance(version, str):
        return at, version
    raise InvalidArgument(_BAD_PART)


def _encode_cursor(node_id: str, last_id: str) -> str:
    return _pack({"node": node_id, "after": last_id})


def _decode_cursor(cursor: str, node_id: str) -> str:
    data = _unpack(cursor)
    after = data.get("after")
    if data.get("node") == node_id and isinstance(after, str):
        try:
            ids.parse(after)
            return after
        except InvalidArgument:
            pass
    raise InvalidArgument(_BAD_CURSOR)
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if data["node"] == node_id and isinstance(data["after"], str):
            ids.parse(data["after"])
            return data["after"]
    except (binascii.Error, ValueError, KeyError, TypeError, InvalidArgument):
        pass
    raise InvalidArgument(_BAD_CURSOR)
