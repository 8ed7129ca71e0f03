"""The stages that end every sync: permissions to OpenFGA, the trees to Neo4j, text to LightRAG.

:func:`pipeline.sync.run_sync` collects from Confluence into the raw store and hands the spaces,
pages and permissions to :func:`run_sinks`. Each sink compares what it holds with what it is
given and changes only the difference, so every run is idempotent and resumable.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from authz.client import OpenFGAClient
from authz.prefilter import ACL_FILE, AclKeys
from authz.tuples import Unexpressed, anchors, confluence_tuples, issue_anchors, jira_tuples
from core import ids
from core.models import Comment, Image, Issue, JiraPermissions, Page, Permissions, Project, Space
from core.settings import Settings
from navigator.store import Neo4jStore
from pipeline.sinks.openfga import TupleSync, sync_tuples
from pipeline.sinks.semantic import IndexSync, Manifest, sync_index
from core.providers.base import Usage
from retrievers.factory import OpenIndex, semantic_index


_ISSUE_KEY = re.compile(r"\b[A-Z][A-Z0-9_]{0,63}-[0-9]{1,12}\b")
MAX_REFUSALS_SHOWN = 20  # of the grants left out, named in the sync's output (all are in its report)


@dataclass(frozen=True)
class IndexReport:
    spaces: int
    pages: int
    tuples: TupleSync
    index: IndexSync | None  # None when the run touched permissions only
    index_seconds: float
    total_seconds: float
    refused: tuple[Unexpressed, ...] = ()  # grants the model cannot hold, left out (fail closed)

    @property
    def docs_per_second(self) -> float:
        if self.index is None or not self.index.indexed or not self.index_seconds:
            return 0.0
        return self.index.indexed / self.index_seconds


async def run_sinks(
    settings: Settings,
    spaces: Sequence[Space],
    pages_by_space: Mapping[str, Sequence[Page]],
    permissions: Permissions,
    console: Console,
    *,
    content: bool = True,
    indexable: set[str] | None = None,
    images: Sequence[Image] = (),
    started: float | None = None,
    open_index: OpenIndex = semantic_index,
    usage: Usage | None = None,
    jira: Sequence[tuple[Project, Sequence[Issue], JiraPermissions]] = (),
    hidden: frozenset[str] = frozenset(),
) -> IndexReport:
    """Bring OpenFGA, and unless ``content`` is False Neo4j and LightRAG, to ``pages_by_space``
    and the Jira projects in ``jira`` (project, its issues placed, its permissions). ``indexable``
    (page ids) limits the pages LightRAG holds: pages without converted text stay out. ``hidden``
    (typed ids) are held for their content alone: no tuple names them and no pre-filter key
    admits them, so nobody sees them — nor anything they guard — until the source shows them again."""
    started = time.monotonic() if started is None else started
    all_pages = [page for pages in pages_by_space.values() for page in pages]
    desired = set()
    found: list[Unexpressed] = []
    for space in spaces:
        desired |= confluence_tuples(space.key, pages_by_space[space.key], permissions, found)
    for project, issues, project_permissions in jira:
        desired |= jira_tuples(project.key, issues, project_permissions, found)
    desired = {t for t in desired if t.object not in hidden}
    refused = tuple(dict.fromkeys(found))  # a group's refusal repeats in every space that names it
    async with OpenFGAClient(settings.openfga, provision=True) as fga:
        tuples = await sync_tuples(fga, desired)
    console.print(f"OpenFGA: {tuples.written} tuples written, {tuples.deleted} deleted, {tuples.unchanged} unchanged")
    if refused:
        console.print(f"[yellow]OpenFGA: {len(refused)} grant(s) the model cannot hold were left out; each leaves its object narrower, never wider:[/yellow]")
        for refusal in refused[:MAX_REFUSALS_SHOWN]:
            console.print(f"  {refusal}")
    # Beside the index, in step with the tuples: which pages share a view check (the pre-filter's keys).
    settings.index_dir.mkdir(parents=True, exist_ok=True)
    keys = {ids.space_id(s.key): anchors(s.key, pages_by_space[s.key], permissions) for s in spaces}
    keys |= {project.id: issue_anchors(project.key, issues, project_permissions, hidden) for project, issues, project_permissions in jira}
    AclKeys.of({container: {doc: anchor for doc, anchor in docs.items() if doc not in hidden} for container, docs in keys.items()}).save(settings.index_dir / ACL_FILE)
    if not content:
        return IndexReport(len(spaces), len(all_pages), tuples, None, 0.0, time.monotonic() - started, refused)

    written = 0
    async with Neo4jStore(settings.neo4j) as store:
        for space in spaces:
            written += await store.sync_space(space, pages_by_space[space.key])
            held = {page.page_id for page in pages_by_space[space.key]}
            await store.sync_images(space, [image for image in images if image.page_id in held])
        issues_written = sum([await store.sync_project(project, issues) for project, issues, _ in jira])
        if jira:  # the issue keys each page's text names, among the issues held
            held_keys = {issue.key for _, issues, _ in jira for issue in issues}
            for space in spaces:
                mentions = {page.id: sorted({f"issue:{k}" for k in _ISSUE_KEY.findall(page.markdown) if k in held_keys}) for page in pages_by_space[space.key]}
                await store.sync_mentions(space, {page: issues for page, issues in mentions.items() if issues})
    console.print(f"Neo4j: tree of {len(all_pages)} pages ({written} written) and {len(images)} images synchronised")
    if jira:
        console.print(f"Neo4j: {sum(len(issues) for _, issues, _ in jira)} issues of {len(jira)} Jira project(s) ({issues_written} written)")

    to_index: list[Page | Issue | Comment] = [page for page in all_pages if indexable is None or page.page_id in indexable]
    to_index += [doc for _, issues, _ in jira for issue in issues for doc in (issue, *issue.comments)]
    index_started = time.monotonic()
    progress = Progress(TextColumn("indexing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console)
    async with open_index(settings, usage) as index:
        with progress:
            task = progress.add_task("index", total=len(to_index))

            def advance(count: int) -> None:
                progress.advance(task, count)
                if not console.is_terminal:  # logs and CI get a line per batch instead of a bar
                    console.print(f"indexed {int(progress.tasks[0].completed)}/{len(to_index)} pages and issues")

            indexed = await sync_index(index, Manifest(settings.index_dir / "manifest.json"), to_index, on_progress=advance)
    index_seconds = time.monotonic() - index_started
    console.print(
        f"LightRAG: {indexed.indexed} pages and issues indexed, {indexed.deleted} deleted, {indexed.unchanged} unchanged in {index_seconds:.1f}s"
    )
    return IndexReport(len(spaces), len(all_pages), tuples, indexed, index_seconds, time.monotonic() - started, refused)
