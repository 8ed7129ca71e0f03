"""The Jira half of ``wayfinder sync``: projects over REST → raw store → Markdown, then handed to
the sinks with the Confluence spaces (:func:`pipeline.sync.run_sync` orders the stages).

Per project: its permissions (browse, roles, security levels, the groups they name) and a listing
of every issue without text (what sees deletions, moves between epics and level changes, which
date queries do not); then issues updated since the watermark less the overlap, with their text,
and by key any issue whose listed ``updated`` is still newer than the text held; then Markdown
for every text not yet converted (wiki markup or ADF, in worker processes: jira2markdown is slow).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from rich.console import Console

from core import ids
from core.models import Issue, JiraPermissions, Project
from core.settings import Settings
from core.workers import worker_pool
from pipeline.issues import placed_issues
from pipeline.raw_store import Changes, RawStore, StoredIssue, vanished_warning
from pipeline.sources.jira_rest import JiraRestSource
from pipeline.transform.jira import issue_markdown

MAX_CONVERTERS = 2  # worker processes converting issue texts


@dataclass
class JiraReport(Changes):
    converted: int = 0
    restricted_comments: int = 0  # of the issues converted: comments kept out of their text (role or group only)
    newest: dict[str, datetime] = field(default_factory=dict)  # project → newest ``updated`` seen

    def summary(self) -> str:
        kept_out = f", {self.restricted_comments} restricted comment(s) kept out of issue text" if self.restricted_comments else ""
        return super().summary() + kept_out


async def reconcile_projects(settings: Settings, source: JiraRestSource, store: RawStore, report: JiraReport, console: Console) -> dict[str, list[str]]:
    """Permissions and listings of the configured projects into the store; returns, per project,
    the issues whose level or people changed."""
    changed_permissions: dict[str, list[str]] = {}
    for key in settings.jira.projects:
        project = await source.project(key)
        await store.save_jira_project(project, await source.permissions(key))
        listing = await source.list_issues(key)
        changes = await store.reconcile_issues(key, listing, max_deleted_share=settings.jira.max_deleted_share)
        report.added += changes.added
        report.moved += changes.moved
        report.deleted += changes.deleted
        report.vanished += changes.vanished
        changed_permissions[key] = changes.permissions_changed
        console.print(f"{key} (Jira): {len(listing)} issues listed; {len(changes.added)} new, {len(changes.deleted)} deleted, {len(changes.moved)} moved")
        if changes.vanished:
            console.print(f"[yellow]{vanished_warning(f'project {key}', len(changes.vanished), 'issues', 'WAYFINDER_JIRA__MAX_DELETED_SHARE')}[/yellow]")
    return changed_permissions


async def collect_issues(settings: Settings, source: JiraRestSource, store: RawStore, report: JiraReport, console: Console) -> None:
    """Texts of the issues updated since each project's watermark (less the overlap), then by key
    those the date query missed."""
    for key in settings.jira.projects:
        watermark = await store.jira_watermark(key)
        since = watermark - timedelta(minutes=settings.jira.overlap_minutes) if watermark else None
        held = {stored.listed.key: stored for stored in await store.issues(key)}
        fetched: set[str] = set()
        newest = watermark
        async for batch in source.changed_issues(key, since):
            fresh = [issue for issue in batch if issue.key not in held or held[issue.key].body_updated != issue.updated.isoformat()]
            await store.save_issue_bodies(fresh)
            fetched.update(issue.key for issue in fresh)
            for issue in batch:
                newest = max(newest, issue.updated) if newest else issue.updated
        missed = [stored.listed.key for stored in await store.issues(key) if stored.needs_body]
        if missed:
            await store.save_issue_bodies(await source.issues_by_key(missed))
            fetched.update(missed)
        report.changed += sorted(fetched - set(report.added))
        if newest is not None:
            report.newest[key] = newest
        console.print(f"{key} (Jira): {len(fetched)} issue texts fetched" + (f" since {since:%Y-%m-%d %H:%M} UTC" if since else ""))


async def convert_issues(settings: Settings, store: RawStore, report: JiraReport, console: Console) -> None:
    """Markdown for every issue text not yet converted, in worker processes (jira2markdown is
    pure Python and slow: ~40 ms an issue), written to the store as each one is done."""
    todo = [stored for key in settings.jira.projects for stored in await store.issues(key) if stored.needs_conversion and stored.body]
    if not todo:
        return
    report.restricted_comments += sum(1 for stored in todo for c in (stored.body or {}).get("comments", []) if c.get("visibility"))
    workers = min(MAX_CONVERTERS, os.cpu_count() or 1, len(todo) // 20)
    if workers < 2:  # a few issues (the usual incremental run): a thread, no process to start
        for stored in todo:
            await store.save_issue_markdown(stored.listed.key, stored.body_updated or "", await asyncio.to_thread(issue_markdown, *_markdown_args(stored)))
            report.converted += 1
    else:
        loop = asyncio.get_running_loop()
        with worker_pool(workers) as pool:
            pending = [(stored, loop.run_in_executor(pool, issue_markdown, *_markdown_args(stored))) for stored in todo]
            for stored, converted in pending:
                await store.save_issue_markdown(stored.listed.key, stored.body_updated or "", await converted)
                report.converted += 1
    console.print(f"converted {report.converted} issue(s) to Markdown")


async def for_sinks(settings: Settings, store: RawStore) -> list[tuple[Project, Sequence[Issue], JiraPermissions, frozenset[str]]]:
    """Each configured project as the sinks take it: the project, its issues placed in their tree,
    its permissions, and the ids of its vanished issues (held, hidden from everyone)."""
    found = []
    for remote, permissions in await store.jira_projects():
        if remote.key not in settings.jira.projects:
            continue
        stored = await store.issues(remote.key)
        links = {s.listed.key: [other for _, direction, other in (s.body or {}).get("links", []) if direction == "outward"] for s in stored}
        issues = placed_issues([s.listed for s in stored], {s.listed.key: s.markdown for s in stored if s.markdown}, links)
        hidden = frozenset(ids.issue_id(s.listed.key) for s in stored if s.vanished)
        found.append((Project(key=remote.key, name=remote.name, url=remote.url), issues, permissions, hidden))
    return found


def _markdown_args(stored: StoredIssue) -> tuple[str, str, object, list[tuple[str | None, str, object]]]:
    """What an issue's Markdown is made of: its text and the comments everyone who sees the issue
    sees. A comment restricted to a role or group has readers of its own, so it never joins the
    issue's text (DESIGN.md A14): its readers are fewer than the issue's."""
    body = stored.body or {}
    comments = [(c.get("author"), c.get("created", ""), c.get("body")) for c in body.get("comments", []) if not c.get("visibility")]
    return stored.listed.key, stored.listed.summary, body.get("description"), comments
