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
from typing import Any

from rich.console import Console

from core import ids
from core.ids import jira_group_name, user_name
from core.models import Comment, Issue, JiraPermissions, Project
from core.settings import Settings
from core.workers import worker_pool
from pipeline.issues import placed_issues
from pipeline.raw_store import Changes, RawStore, StoredIssue, vanished_warning
from pipeline.sources.jira_rest import JiraRestSource, comment_audience
from pipeline.transform.jira import comment_title, issue_texts

MAX_CONVERTERS = 2  # worker processes converting issue texts


@dataclass
class JiraReport(Changes):
    converted: int = 0
    restricted_comments: int = 0  # of the issues converted: comments restricted to a role or group, documents of their own
    newest: dict[str, datetime] = field(default_factory=dict)  # project → newest ``updated`` seen

    def summary(self) -> str:
        kept_out = f", {self.restricted_comments} restricted comment(s) as documents of their own" if self.restricted_comments else ""
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
            await store.save_issue_markdown(stored.listed.key, stored.body_updated or "", *await asyncio.to_thread(issue_texts, *_markdown_args(stored)))
            report.converted += 1
    else:
        loop = asyncio.get_running_loop()
        with worker_pool(workers) as pool:
            pending = [(stored, loop.run_in_executor(pool, issue_texts, *_markdown_args(stored))) for stored in todo]
            for stored, converted in pending:
                await store.save_issue_markdown(stored.listed.key, stored.body_updated or "", *await converted)
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
        comments = {s.listed.key: restricted_comments(s) for s in stored}
        issues = placed_issues([s.listed for s in stored], {s.listed.key: s.markdown for s in stored if s.markdown}, links, comments)
        hidden = frozenset(
            doc for s in stored if s.vanished for doc in (ids.issue_id(s.listed.key), *(c.id for c in comments[s.listed.key]))
        )
        found.append((Project(key=remote.key, name=remote.name, url=remote.url), issues, permissions, hidden))
    return found


def restricted_comments(stored: StoredIssue) -> tuple[Comment, ...]:
    """An issue's comments restricted to a role or a group, as documents of their own (DESIGN.md
    A14). Their audience is spelled as the project's roles and groups are; a restriction of a kind
    Jira does not document keeps its raw spelling, which the tuple builders refuse and report
    (read by nobody)."""
    issue = stored.listed
    found = []
    for raw in (stored.body or {}).get("comments", []):
        comment_id, visibility = raw.get("id"), raw.get("visibility")
        markdown = stored.comment_markdown.get(str(comment_id)) if comment_id else None
        if not visibility or markdown is None:
            continue
        created = raw.get("created")
        found.append(
            Comment(
                comment_id=str(comment_id),
                issue_key=issue.key,
                project_key=issue.project_key,
                audience=comment_audience(issue.project_key, visibility) or f"{visibility[0]}:{visibility[1]}",
                title=comment_title(issue.key, raw.get("author"), visibility),
                url=f"{issue.url}?focusedCommentId={comment_id}#comment-{comment_id}",
                markdown=markdown,
                updated_at=datetime.fromisoformat(created) if created else None,
            )
        )
    return tuple(found)


async def comment_groups(settings: Settings, source: JiraRestSource, store: RawStore) -> None:
    """The members of every group a restricted comment names and the project's permissions do not
    (its Browse, roles and levels): read with the permissions on every sync, so a member who
    leaves the group stops reading its comments at the next one."""
    for remote, permissions in await store.jira_projects():
        if remote.key not in settings.jira.projects:
            continue
        named = {
            c["visibility"][1]
            for s in await store.issues(remote.key)
            for c in (s.body or {}).get("comments", [])
            if c.get("visibility") and c["visibility"][0] == "group" and c["visibility"][1]
        }
        missing = sorted(name for name in named if jira_group_name(name) not in permissions.group_members)
        if missing:
            extra = {jira_group_name(name): tuple(f"user:{user_name(member)}" for member in sorted(await source.group_members(name))) for name in missing}
            await store.save_jira_project(remote, permissions.model_copy(update={"group_members": {**permissions.group_members, **extra}}))


def _markdown_args(stored: StoredIssue) -> tuple[str, str, object, list[dict[str, Any]]]:
    """What an issue's Markdown and its restricted comments' are made of (:func:`issue_texts`)."""
    body = stored.body or {}
    return stored.listed.key, stored.listed.summary, body.get("description"), list(body.get("comments", []))
