"""The Apache Hive Confluence space as exported to Markdown files (see the corpus PROVENANCE.md):
what the emulator's Hive site is seeded from (``devstack.atlassian.hive``), and a few tests.

The export has the page tree and the text but no permissions; the Hive permissions the emulator
serves are synthesised deterministically by :func:`synthetic_hive_permissions` and documented in
the README.
"""

from __future__ import annotations

import asyncio
import re
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from core.errors import SourceError
from core.models import Page, Permissions, Space

SPACE_KEY = "HIVE"
SPACE_NAME = "Apache Hive"
BASE_URL = "https://cwiki.apache.org/confluence"
TITLE_PREFIX = "Apache Hive : "

# "* [Title]({{< ref "slug_123" >}})" with one tab per level of depth.
_TREE_LINE = re.compile(r'^(?P<indent>\t*)[*+-] \[(?P<title>.*)\]\(\{\{< ref "(?P<ref>[^"]+)" >\}\}\)\s*$')
_REF = re.compile(r'\{\{< ref "(?P<target>[^"]*)" >\}\}')
_PAGE_REF = re.compile(r"^(?:.*_)?(?P<id>\d+)(?P<anchor>#.*)?$")
_FRONT_MATTER = re.compile(r"\A---\n(?P<meta>.*?)\n---\n", re.S)
_BLANK_RUNS = re.compile(r"\n(?:[ \t]*\n){2,}")
# Links to pages of the space by title, as absolute Confluence URLs in the page text.
_DISPLAY_URL = re.compile(
    r"https?://cwiki\.apache\.org/confluence/display/(?:Hive|HIVE)/(?P<title>[^\s)#\"'<>\]]+)(?P<anchor>#[^\s)\"'<>\]]*)?"
)

DESIGN_DOCS_PAGE = "27362075"  # "DesignDocs": restricted subtree
SINGLE_USER_PAGE = "27822784"  # "ContributorsMinutes110726": restricted to bob alone


def synthetic_hive_permissions(page_ids: Iterable[str]) -> Permissions:
    """Deterministic permissions for the export's pages (it has none); documented in the README."""
    restricted = {
        DESIGN_DOCS_PAGE: ("group:hive-committers#member",),
        SINGLE_USER_PAGE: ("user:bob",),
    }
    return Permissions(
        space_viewers={SPACE_KEY: ("group:hive-users#member",)},
        page_restrictions={page_id: restricted.get(page_id, ()) for page_id in page_ids},
        group_members={
            "hive-committers": ("user:alice",),
            "hive-users": ("group:hive-committers#member", "user:bob"),
        },
    )


@dataclass(frozen=True)
class _TreeEntry:
    page_id: str
    parent_id: str | None
    position: int


def page_url(page_id: str) -> str:
    return f"{BASE_URL}/pages/viewpage.action?pageId={page_id}"


def parse_space_index(text: str) -> list[_TreeEntry]:
    """The page tree from the export's "Available Pages" lists, parents before children."""
    entries: list[_TreeEntry] = []
    stack: list[str] = []  # page ids of the current ancestors, one per depth
    positions: dict[str | None, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        match = _TREE_LINE.match(line)
        if not match:
            continue
        depth = len(match["indent"])
        if depth > len(stack):
            raise SourceError(f"space index line {number}: depth {depth} skips a level")
        ref_match = _PAGE_REF.match(match["ref"])
        if not ref_match or ref_match["anchor"]:
            raise SourceError(f"space index line {number}: unexpected page reference {match['ref']!r}")
        del stack[depth:]
        parent = stack[-1] if stack else None
        positions[parent] = positions.get(parent, -1) + 1
        entries.append(_TreeEntry(ref_match["id"], parent, positions[parent]))
        stack.append(ref_match["id"])
    if not entries:
        raise SourceError("space index has no page tree")
    return entries


def to_markdown(raw: str) -> tuple[str, str]:
    """(title, Markdown body) of one exported page: front matter off, Hugo refs to page ids."""
    front = _FRONT_MATTER.match(raw)
    if not front:
        raise SourceError("page has no front matter")
    title_match = re.search(r'^title:\s*"(?P<title>.*)"\s*$', front["meta"], re.M)
    if not title_match:
        raise SourceError("page front matter has no title")
    title = title_match["title"].replace('\\"', '"').removeprefix(TITLE_PREFIX).strip()
    body = raw[front.end() :]
    body = body.replace(f"# {TITLE_PREFIX}", "# ", 1)
    body = _REF.sub(_rewrite_ref, body)
    body = _BLANK_RUNS.sub("\n\n", body).strip() + "\n"
    return title, body


def link_titles(markdown: str, page_ids_by_title: dict[str, str]) -> str:
    """Confluence "display" URLs of pages in the space become ``page:<id>`` links, like Hugo refs,
    so a link to a page is always spelled by id and can be authorized. Unknown titles stay."""

    def by_id(match: re.Match[str]) -> str:
        page_id = page_ids_by_title.get(urllib.parse.unquote_plus(match["title"]))
        return match[0] if page_id is None else f"page:{page_id}{match['anchor'] or ''}"

    return _DISPLAY_URL.sub(by_id, markdown)


def _rewrite_ref(match: re.Match[str]) -> str:
    target = match["target"]
    page = _PAGE_REF.match(target)
    if page:
        return f"page:{page['id']}{page['anchor'] or ''}"
    return target if target.startswith("#") else target.split('"', 1)[0]


class HiveExportSource:
    """The exported files as spaces, pages and permissions: what the Confluence emulator is seeded
    from. Reads lazily; the constructor does no I/O."""

    def __init__(self, corpus_dir: Path) -> None:
        self._dir = corpus_dir

    async def spaces(self) -> list[Space]:
        return [Space(key=SPACE_KEY, name=SPACE_NAME, url=f"{BASE_URL}/display/Hive")]

    async def pages(self, space_key: str) -> list[Page]:
        if space_key != SPACE_KEY:
            raise SourceError(f"the Hive export has no space {space_key!r}")
        return await asyncio.to_thread(self._read_pages)

    async def permissions(self) -> Permissions:
        index = await asyncio.to_thread(self._read_index)
        return synthetic_hive_permissions(entry.page_id for entry in index)

    def _read_index(self) -> list[_TreeEntry]:
        index = self._dir / "space-index.md"
        try:
            return parse_space_index(index.read_text(encoding="utf-8"))
        except OSError as exc:
            raise SourceError(f"cannot read the space index {index}: {exc.strerror}") from exc

    def _read_pages(self) -> list[Page]:
        entries = self._read_index()
        # File names follow the export's slugs, which differ from the index refs now and then
        # ("3.0" against "3-0"); the page id at the end of both is what identifies a page.
        files = {_PAGE_REF.match(path.stem)["id"]: path for path in (self._dir / "pages").glob("*.md")}
        pages = []
        for entry in entries:
            path = files.get(entry.page_id)
            if path is None:
                raise SourceError(f"page {entry.page_id} of the space index has no file in {self._dir / 'pages'}")
            try:
                title, body = to_markdown(path.read_text(encoding="utf-8"))
            except OSError as exc:
                raise SourceError(f"cannot read page {entry.page_id} ({path}): {exc.strerror}") from exc
            except SourceError as exc:
                raise SourceError(f"page {entry.page_id} ({path}): {exc}") from exc
            pages.append(
                Page(
                    page_id=entry.page_id,
                    space_key=SPACE_KEY,
                    title=title,
                    parent_id=entry.parent_id,
                    position=entry.position,
                    url=page_url(entry.page_id),
                    markdown=body,
                )
            )
        titles = {page.title: page.page_id for page in pages}
        return [page.model_copy(update={"markdown": link_titles(page.markdown, titles)}) for page in pages]
