"""``wayfinder sync``: Confluence (and Jira: :mod:`pipeline.jira_sync`) over REST → raw store →
Markdown → OpenFGA, Neo4j, LightRAG.

Per space, in this order:

1. **Reconcile**: list every page without bodies (ids, parents, versions, read restrictions) and
   make the store's tree and restrictions match. This is what sees deletions, moves and
   restriction changes, which date queries do not. A page the sync account no longer sees is
   hidden from everyone by this very sync, even when too many went at once to purge their content
   (:mod:`pipeline.raw_store`): revocation never waits for an operator (DESIGN.md A13).
2. **Collect** (skipped with ``permissions_only``): CQL for pages modified since the watermark
   less the overlap window, with bodies; then, by id, any page whose listed version is still newer
   than the body held (a change the date query missed).
3. **Convert** every body not yet converted. A page that fails keeps its previous Markdown and
   is tried again on the next run; a new page that fails stays out of the semantic index.

Then the space readers and group members are read, and the sinks run. The watermark moves only
after the sinks succeed, so a run killed anywhere is simply repeated by the next one.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from rich.console import Console

from core.errors import SourceError, TransformError
from core.ids import safe_name, user_name
from core.models import Page, Permissions, Space
from core.providers.base import AltTextWriter, ImageContext, Usage
from core.settings import Settings
from pipeline.alt_text import alt_text_writer, cache_key
from pipeline.jira_sync import JiraReport, collect_issues, comment_groups, convert_issues, for_sinks, reconcile_projects
from pipeline.raw_store import Changes, RawStore, StoredAttachment, StoredPage, vanished_warning
from pipeline.runner import IndexReport, run_sinks
from pipeline.sources.confluence_rest import ConfluenceRestSource, RemoteAttachment, RemoteSpace
from pipeline.sources.jira_rest import JiraRestSource
from pipeline.transform.confluence import Converted, ImageRef, to_markdown
from retrievers.factory import OpenIndex, semantic_index

log = logging.getLogger("wayfinder.sync")


@dataclass
class SyncReport(Changes):
    failed: dict[str, str] = field(default_factory=dict)  # page id → why it could not be converted
    converted: int = 0
    alt_text_calls: int = 0
    rest_calls: int = 0
    usage: Usage = field(default_factory=Usage)  # hosted models' calls and tokens (Gemini)
    sinks: IndexReport | None = None
    seconds: float = 0.0
    jira: JiraReport | None = None  # when Jira was synced too

    def summary(self) -> str:
        return f"{super().summary()}, {len(self.failed)} failed"


async def run_sync(
    settings: Settings,
    source: ConfluenceRestSource,
    store: RawStore,
    console: Console,
    *,
    permissions_only: bool = False,
    open_index: OpenIndex = semantic_index,
    jira: JiraRestSource | None = None,
) -> SyncReport:
    """One sync of the configured spaces and, with ``jira``, of the configured Jira projects."""
    report = SyncReport(jira=JiraReport() if jira is not None else None)
    try:
        await _sync(settings, source, store, console, report, permissions_only=permissions_only, open_index=open_index, jira=jira)
    finally:
        spent = report.usage.summary(settings.gemini.prices)
        if spent:  # also when the run failed: the calls were made, and paid for
            console.print(f"Gemini: {spent}")
    return report


async def _sync(
    settings: Settings,
    source: ConfluenceRestSource,
    store: RawStore,
    console: Console,
    report: SyncReport,
    *,
    permissions_only: bool,
    open_index: OpenIndex,
    jira: JiraRestSource | None,
) -> None:
    started = time.monotonic()
    calls_before = source.calls + (jira.calls if jira else 0)
    keys = settings.confluence.spaces
    permission_changes: dict[str, list[str]] = {}
    for key in keys:
        await store.save_space(await source.space(key))
        listing = await source.list_pages(key)
        changes = await store.reconcile(key, listing, max_deleted_share=settings.confluence.max_deleted_share)
        report.added += changes.added
        report.moved += changes.moved
        report.deleted += changes.deleted
        report.vanished += changes.vanished
        permission_changes[key] = changes.permissions_changed
        console.print(f"{key}: {len(listing)} pages listed; {len(changes.added)} new, {len(changes.deleted)} deleted, {len(changes.moved)} moved")
        if changes.vanished:
            console.print(f"[yellow]{vanished_warning(f'space {key}', len(changes.vanished), 'pages', 'WAYFINDER_CONFLUENCE__MAX_DELETED_SHARE')}[/yellow]")
    await _read_groups(source, store, keys)
    issue_permission_changes: dict[str, list[str]] = {}
    if jira is not None and report.jira is not None:
        issue_permission_changes = await reconcile_projects(settings, jira, store, report.jira, console)
        await comment_groups(settings, jira, store)  # the groups the comments held name, with the permissions
    # Permissions reach OpenFGA first, before any body is fetched or converted: a revoked
    # restriction or membership never waits for the slow stages.
    report.sinks = await _sinks(settings, store, console, content=False, started=started, open_index=open_index, usage=report.usage, jira=jira is not None)

    new_watermarks: dict[str, datetime] = {}
    for key in [] if permissions_only else keys:
        fetched, newest = await _collect(settings, source, store, key, console)
        report.changed += sorted(fetched - set(report.added))
        report.permission_only += sorted(set(permission_changes[key]) - fetched)
        if newest is not None:
            new_watermarks[key] = newest
    if permissions_only:
        report.permission_only = sorted(p for changed in permission_changes.values() for p in changed)
    else:
        await _convert(source, store, alt_text_writer(settings.gemini, report.usage), report, console)
        await _read_groups(source, store, keys)  # bodies fetched since may name groups the listing did not
        if jira is not None and report.jira is not None:
            await collect_issues(settings, jira, store, report.jira, console)
            await comment_groups(settings, jira, store)  # comments fetched since may name groups the permissions did not
            await convert_issues(settings, store, report.jira, console)
        report.sinks = await _sinks(settings, store, console, content=True, started=started, open_index=open_index, usage=report.usage, jira=jira is not None)
    if report.jira is not None:
        fetched = set(report.jira.changed) | set(report.jira.added)
        report.jira.permission_only = sorted(k for changed in issue_permission_changes.values() for k in changed if k not in fetched)
    report.rest_calls = source.calls + (jira.calls if jira else 0) - calls_before
    for key, when in new_watermarks.items():
        await store.set_watermark(key, when)
    for key, when in (report.jira.newest.items() if report.jira else ()):
        await store.set_jira_watermark(key, when)
    report.seconds = time.monotonic() - started
    console.print(f"sync: {report.summary()} in {report.seconds:.1f}s ({report.rest_calls} REST calls)")
    if report.jira is not None:
        console.print(f"Jira: {report.jira.summary()}")
    for page_id, why in sorted(report.failed.items()):
        console.print(f"[yellow]page {page_id} not converted, retried next run:[/yellow] {why}")


async def _collect(settings: Settings, source: ConfluenceRestSource, store: RawStore, key: str, console: Console) -> tuple[set[str], datetime | None]:
    """Bodies of the space's pages changed since the watermark (less the overlap), then by id any
    page still listed with a newer version than the body held. Returns the pages fetched and the
    newest modification time seen."""
    watermark = await store.watermark(key)
    since = watermark - timedelta(minutes=settings.confluence.overlap_minutes) if watermark else None
    held = {page.page_id: page for page in await store.pages(key)}
    newest = watermark
    fetched: set[str] = set()
    async for batch in source.changed_pages(key, since):
        for page in batch:
            newest = max(newest, page.last_modified) if newest else page.last_modified
            if page.page_id not in held or held[page.page_id].body_version != page.version:
                await store.save_body(page)
                fetched.add(page.page_id)
    for page in await store.pages(key):
        if page.needs_body:  # a change the date query missed
            remote = await source.page(page.page_id)
            if remote is not None:
                await store.save_body(remote)
                fetched.add(page.page_id)
    console.print(f"{key}: {len(fetched)} bodies fetched" + (f" since {since:%Y-%m-%d %H:%M} UTC" if since else ""))
    return fetched, newest


async def _read_groups(source: ConfluenceRestSource, store: RawStore, keys: Sequence[str]) -> None:
    """Members of every group a synced space or page names."""
    spaces = [s for s in await store.spaces() if s.key in keys]
    pages = [p for p in await store.pages() if p.space_key in keys]
    groups = sorted({g for s in spaces for g in s.reader_groups} | {g for p in pages for g in p.read_groups})
    await store.save_groups({name: await source.group_members(name) for name in groups})


async def _sinks(
    settings: Settings, store: RawStore, console: Console, *, content: bool, started: float, open_index: OpenIndex, usage: Usage, jira: bool
) -> IndexReport:
    """The raw store's view of the synced spaces, handed to the sinks (OpenFGA only, or all)."""
    keys = settings.confluence.spaces
    wanted = [s for s in await store.spaces() if s.key in keys]
    stored = [page for page in await store.pages() if page.space_key in keys]
    pages_by_space = _placed_pages(stored)  # vanished pages too: their content stays until purged, hidden
    jira_projects = await for_sinks(settings, store) if jira else []
    held_ids = {page.page_id for pages in pages_by_space.values() for page in pages}
    images = [image for image in (await store.page_images() if content else []) if image.page_id in held_ids]
    return await run_sinks(
        settings,
        [Space(key=s.key, name=s.name, url=s.url) for s in wanted],
        {s.key: pages_by_space.get(s.key, []) for s in wanted},
        _permissions(wanted, stored, await store.groups()),
        console,
        content=content,
        indexable={page.page_id for page in stored if page.markdown is not None},
        images=images,
        started=started,
        open_index=open_index,
        usage=usage,
        jira=[(project, issues, permissions) for project, issues, permissions, _ in jira_projects],
        hidden=frozenset(f"page:{page.page_id}" for page in stored if page.vanished).union(*(gone for *_, gone in jira_projects)),
    )


async def _convert(source: ConfluenceRestSource, store: RawStore, writer: AltTextWriter, report: SyncReport, console: Console) -> None:
    everything = await store.pages()
    titles = {(page.space_key, page.title): page.page_id for page in everything}
    for page in everything:
        if not page.needs_conversion or page.body_version is None:
            continue
        body = await store.body(page.page_id, page.body_version)
        if body is None:
            continue
        attached: dict[str, RemoteAttachment] = {}
        if "<ri:attachment" in body:
            attached = {a.filename: a for a in await source.attachments(page.page_id)}

        def convert(alt_texts: dict[str, str] | None = None) -> Converted:
            return to_markdown(
                body,
                space_key=page.space_key,
                resolve_page=lambda space, title: titles.get((space, title)),
                attachments={name: a.attachment_id for name, a in attached.items()},
                alt_texts=alt_texts,
            )

        try:
            converted = convert()
            alt_texts = await _alt_texts(source, store, writer, page.page_id, page.title, converted.images, attached, report)
            if alt_texts:
                converted = convert(alt_texts)  # the same text, the images' alt text filled in
        except (TransformError, SourceError) as exc:
            report.failed[page.page_id] = str(exc)
            await store.save_conversion_error(page.page_id, str(exc))
            continue
        await store.set_page_images(page.page_id, alt_texts)
        await store.save_conversion(page.page_id, page.body_version, _with_title(page.title, converted.markdown), converted.links, page.title)
        report.converted += 1
    if report.converted:
        console.print(f"converted {report.converted} page(s) to Markdown ({report.alt_text_calls} alt-text call(s))")


async def _alt_texts(
    source: ConfluenceRestSource,
    store: RawStore,
    writer: AltTextWriter,
    page_id: str,
    title: str,
    images: Sequence[ImageRef],
    attached: dict[str, RemoteAttachment],
    report: SyncReport,
) -> dict[str, str]:
    """Alt text for each image of a page (attachment id → text): from the cache when the same image
    sat in the same context before, else written now. Image bytes are kept in the raw store."""
    found: dict[str, str] = {}
    for ref in images:
        remote = attached.get(ref.filename)
        if remote is None:
            continue
        held = await store.attachment(remote.attachment_id)
        if held is None or held.filename != remote.filename or len(held.data) != remote.size:
            data = await source.download(remote)
            held = StoredAttachment(remote.attachment_id, page_id, remote.filename, remote.media_type, hashlib.sha256(data).hexdigest(), data)
            await store.save_attachment(held)
        image = ImageContext(held.filename, held.media_type, held.data, title, ref.heading_path, ref.context, ref.alt)
        image_hash, context_hash = cache_key(image, writer.source)
        text = await store.cached_alt_text(image_hash, context_hash)
        if text is None:
            text = await writer.describe(image)
            report.alt_text_calls += 1
            await store.cache_alt_text(image_hash, context_hash, writer.source, text)
        found[ref.attachment_id] = text
    return found


def _with_title(title: str, markdown: str) -> str:
    """Pages are indexed and shown with their title as the first heading, once."""
    return markdown if markdown.startswith(f"# {title}\n") else f"# {title}\n\n{markdown}"


def _placed_pages(stored: Sequence[StoredPage]) -> dict[str, list[Page]]:
    """The pages as the sinks take them: siblings numbered in Confluence's order (its position,
    then title). A page whose parent is not held (the sync account cannot see it) is left out with
    its subtree: its inherited restrictions are unknown, so it must not be shown at all."""
    by_id = {page.page_id: page for page in stored}
    placed: dict[str, list[Page]] = defaultdict(list)
    children: dict[str | None, list[StoredPage]] = defaultdict(list)
    for page in stored:
        children[page.parent_id].append(page)
    for page in stored:
        if page.parent_id is not None and page.parent_id not in by_id:
            log.warning("page %s is left out: its parent %s is not visible to the sync account", page.page_id, page.parent_id)

    def walk(parent: str | None) -> None:
        ordered = sorted(children.get(parent, []), key=lambda p: (p.position is None, p.position or 0, p.title, p.page_id))
        for position, page in enumerate(ordered):
            if parent is not None and by_id[parent].space_key != page.space_key:
                continue
            placed[page.space_key].append(
                Page(
                    page_id=page.page_id,
                    space_key=page.space_key,
                    title=page.title,
                    parent_id=page.parent_id,
                    position=position,
                    url=page.url,
                    markdown=page.markdown or "",
                    links=tuple(link for link in page.links if link != page.page_id),
                    labels=page.labels,
                    updated_at=page.last_modified,
                )
            )
            walk(page.page_id)

    walk(None)
    return placed


def _permissions(spaces: Sequence[RemoteSpace], stored: Sequence[StoredPage], groups: dict[str, tuple[str, ...]]) -> Permissions:
    return Permissions(
        space_viewers={s.key: _subjects(s.reader_users, s.reader_groups) for s in spaces},
        page_restrictions={page.page_id: _subjects(page.read_users, page.read_groups) for page in stored},
        group_members={safe_name(name): tuple(f"user:{user_name(member)}" for member in members) for name, members in groups.items()},
    )


def _subjects(users: Iterable[str], groups: Iterable[str]) -> tuple[str, ...]:
    """Confluence's raw user and group names as subjects: every user through the one identity
    function (DESIGN.md A14), every group through :func:`core.ids.safe_name`."""
    return tuple(f"user:{user_name(u)}" for u in users) + tuple(f"group:{safe_name(g)}#member" for g in groups)
