"""In-memory NavigatorStore with the same semantics as Neo4jStore, for unit tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from core.models import Image, Issue, Page, Project, Space
from core.text import title_key
from navigator.base import ChildPage, Crumb, PageContent, PageSummary


class FakeNavigatorStore:
    def __init__(self) -> None:
        self._spaces: dict[str, Space] = {}
        self._pages: dict[str, Page] = {}
        self._images: dict[str, Image] = {}
        self._projects: dict[str, Project] = {}
        self._issues: dict[str, Issue] = {}
        self._mentions: dict[str, tuple[str, ...]] = {}  # page id → issue ids

    async def sync_space(self, space: Space, pages: Sequence[Page]) -> int:
        self._spaces[space.id] = space
        before = dict(self._pages)
        self._pages = {pid: p for pid, p in self._pages.items() if p.space_key != space.key}
        self._pages.update((page.id, page) for page in pages)
        return sum(1 for page in pages if before.get(page.id) != page)

    async def sync_project(self, project: Project, issues: Sequence[Issue]) -> int:
        self._projects[project.id] = project
        before = dict(self._issues)
        held = {issue.key for issue in issues}
        self._issues = {iid: i for iid, i in self._issues.items() if i.project_key != project.key}
        self._issues.update((i.id, i if i.parent_key in held or i.parent_key is None else i.model_copy(update={"parent_key": None})) for i in issues)
        return sum(1 for issue in issues if before.get(issue.id) != issue)

    async def containers(self) -> list[Space | Project]:
        return [*sorted(self._spaces.values(), key=lambda s: s.key), *sorted(self._projects.values(), key=lambda p: p.key)]

    def _children_of(self, node_id: str) -> list[Page | Issue]:
        if node_id in self._spaces:
            key = self._spaces[node_id].key
            found: list[Page | Issue] = [p for p in self._pages.values() if p.space_key == key and p.parent_id is None]
        elif node_id in self._projects:
            key = self._projects[node_id].key
            found = [i for i in self._issues.values() if i.project_key == key and i.parent_key is None]
        elif node_id.startswith("issue:"):
            found = [i for i in self._issues.values() if i.parent_key and f"issue:{i.parent_key}" == node_id]
        else:
            found = [p for p in self._pages.values() if p.parent_id and f"page:{p.parent_id}" == node_id]
        return sorted(found, key=lambda p: p.position)

    async def children(self, node_id: str, after: int, limit: int) -> list[ChildPage]:
        return [_child(p) for p in self._children_of(node_id) if p.position > after][:limit]

    async def children_of(self, parent_ids: Sequence[str], limit: int) -> list[tuple[str, ChildPage]]:
        rows = [(parent, child) for parent in sorted(set(parent_ids)) for child in await self.children(parent, -1, 10**9)]
        return rows[:limit]

    async def titled(self, key: str, limit: int, issue_key: str | None = None) -> list[str]:
        pages = [p.id for p in self._pages.values() if title_key(p.title) == key]
        issues = [i.id for i in self._issues.values() if title_key(i.summary) == key or i.key == issue_key]
        return sorted(pages + issues)[:limit]

    async def related(self, node_id: str, limit: int) -> list[tuple[str, ChildPage]]:
        def rows(relation: str, nodes: list[Page | Issue]) -> list[tuple[str, ChildPage]]:
            return [(relation, _child(n)) for n in sorted(nodes, key=lambda n: (_child(n).title, n.id))[:limit]]

        if node_id in self._issues:
            issue = self._issues[node_id]
            out = [self._issues[f"issue:{k}"] for k in issue.links if f"issue:{k}" in self._issues]
            into = [i for i in self._issues.values() if issue.key in i.links]
            mentioning = [self._pages[p] for p, issues in self._mentions.items() if node_id in issues and p in self._pages]
            return rows("links_to", out) + rows("linked_from", into) + rows("mentioned_in", mentioning)
        source = self._pages.get(node_id)
        targets = [self._pages[f"page:{t}"] for t in (source.links if source else ()) if f"page:{t}" in self._pages]
        sources = [p for p in self._pages.values() if node_id.removeprefix("page:") in p.links]
        mentioned = [self._issues[i] for i in self._mentions.get(node_id, ()) if i in self._issues]
        return rows("links_to", targets) + rows("linked_from", sources) + rows("mentions", mentioned)

    async def sync_mentions(self, space: Space, mentions: Mapping[str, Sequence[str]]) -> int:
        held = {p for p, page in self._pages.items() if page.space_key == space.key}
        before = {p: self._mentions.get(p) for p in held}
        for page in held:
            self._mentions.pop(page, None)
        self._mentions.update((p, tuple(issues)) for p, issues in mentions.items() if p in held and issues)
        return sum(1 for p in held if before[p] != self._mentions.get(p))

    async def position(self, parent_id: str, page_id: str) -> int | None:
        return next((c.position for c in await self.children(parent_id, -1, 10**9) if c.id == page_id), None)

    async def page(self, page_id: str) -> PageContent | None:
        if page_id in self._issues:
            issue = self._issues[page_id]
            return PageContent(issue.id, issue.summary, issue.url, issue.markdown)
        p = self._pages.get(page_id)
        return PageContent(p.id, p.title, p.url, p.markdown) if p else None

    async def summaries(self, page_ids: Sequence[str]) -> dict[str, PageSummary]:
        found = {}
        for node_id in page_ids:
            node = self._issues.get(node_id) or self._pages.get(node_id)
            if node is None:
                continue
            chain: list[Crumb] = []
            parent = self._parent(node)
            while parent is not None:
                chain.insert(0, Crumb(parent.id, _child(parent).title))
                parent = self._parent(parent)
            child = _child(node)
            found[node_id] = PageSummary(node.id, child.title, node.url, child.space_id, tuple(chain), node.labels, node.updated_at)
        return found

    def _parent(self, node: Page | Issue) -> Page | Issue | None:
        if isinstance(node, Issue):
            return self._issues[f"issue:{node.parent_key}"] if node.parent_key else None
        return self._pages[f"page:{node.parent_id}"] if node.parent_id else None

    async def sync_images(self, space: Space, images: Sequence[Image]) -> None:
        def in_space(image: Image) -> bool:
            page = self._pages.get(f"page:{image.page_id}")
            return page is not None and page.space_key == space.key

        self._images = {key: image for key, image in self._images.items() if not in_space(image)}
        self._images.update((image.id, image) for image in images if in_space(image))

    async def image_page(self, image_id: str) -> str | None:
        image = self._images.get(image_id)
        return f"page:{image.page_id}" if image is not None else None

    async def image(self, image_id: str) -> Image | None:
        return self._images.get(image_id)


def _child(node: Page | Issue) -> ChildPage:
    if isinstance(node, Issue):
        return ChildPage(node.id, node.summary, node.url, f"project:{node.project_key}", node.position)
    return ChildPage(node.id, node.title, node.url, f"space:{node.space_key}", node.position)
