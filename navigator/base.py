"""What the navigator needs from a graph store, and the records it returns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from core.models import Image, Issue, Page, Project, Space


@dataclass(frozen=True)
class Crumb:
    id: str
    title: str


@dataclass(frozen=True)
class PageSummary:
    id: str
    title: str
    url: str
    space_id: str
    ancestors: tuple[Crumb, ...] = ()  # root first, parent last
    labels: tuple[str, ...] = ()
    updated_at: datetime | None = None


@dataclass(frozen=True)
class ChildPage:
    """A child in a tree: a page (in a space) or an issue (``space_id`` is then its project's id)."""

    id: str
    title: str
    url: str
    space_id: str
    position: int


@dataclass(frozen=True)
class PageContent:
    id: str
    title: str
    url: str
    markdown: str = field(repr=False)


class NavigatorStore(Protocol):
    async def sync_space(self, space: Space, pages: Sequence[Page]) -> int:
        """Make the stored tree of ``space`` equal to ``pages`` (merge, move, prune); returns how
        many pages had to be written."""
        ...

    async def children(self, node_id: str, after: int, limit: int) -> list[ChildPage]:
        """Children of a space (its root pages) or a page, by position, after position ``after``."""
        ...

    async def children_of(self, parent_ids: Sequence[str], limit: int) -> list[tuple[str, ChildPage]]:
        """(parent, child) for the children of several spaces or pages: ordered by parent id, then
        tree order; at most ``limit`` rows, so only the last parent listed may be cut short."""
        ...

    async def titled(self, key: str, limit: int, issue_key: str | None = None) -> list[str]:
        """Ids of up to ``limit`` pages and issues whose :func:`core.text.title_key` is ``key``, and
        the issue keyed ``issue_key``, in id order."""
        ...

    async def sync_project(self, project: Project, issues: Sequence[Issue]) -> int:
        """Make the stored issue tree of ``project`` equal to ``issues``; returns the issues written."""
        ...

    async def containers(self) -> list[Space | Project]:
        """Every space (by key), then every project (by key)."""
        ...

    async def related(self, node_id: str, limit: int) -> list[tuple[str, ChildPage]]:
        """(relation, page or issue) for up to ``limit`` of each relation (``position`` is 0): a
        page's "links_to", "linked_from" (pages) and "mentions" (issues); an issue's "links_to",
        "linked_from" (issues) and "mentioned_in" (pages)."""
        ...

    async def sync_mentions(self, space: Space, mentions: Mapping[str, Sequence[str]]) -> int:
        """Make the issues each page of ``space`` mentions those of ``mentions`` (page id → issue ids)."""
        ...

    async def position(self, parent_id: str, page_id: str) -> int | None:
        """Position of ``page_id`` under ``parent_id`` (a space or a page), None if it is not a child."""
        ...

    async def page(self, page_id: str) -> PageContent | None:
        """A page's text, or an issue's (``issue:`` ids)."""
        ...

    async def summaries(self, page_ids: Sequence[str]) -> dict[str, PageSummary]: ...

    async def sync_images(self, space: Space, images: Sequence[Image]) -> None:
        """Make the stored images of ``space``'s pages equal to ``images``."""
        ...

    async def image_page(self, image_id: str) -> str | None:
        """The id of the page that shows an image (``page:…``), without the image's bytes."""
        ...

    async def image(self, image_id: str) -> Image | None: ...
