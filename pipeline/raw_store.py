"""The raw store: what the sync last read from Confluence. One SQLite file under the data
directory by default; a PostgreSQL database when ``WAYFINDER_RAW_STORE_URL`` names one.

* ``page_versions`` keeps every body fetched, keyed by (page id, version): storage XHTML, title,
  labels, when it was fetched. Nothing fetched is thrown away, so a conversion can be redone
  without asking the site again.
* ``pages`` is the current state of each page: place in the tree, read restrictions, the version
  whose body is held, the Markdown converted from it (or the conversion error, retried next run),
  and two revisions kept apart: ``content_revision`` (title and text) and ``permission_revision``
  (restrictions), so a permission-only change touches tuples and nothing else. ``vanished`` says
  since when a held page is missing from the listing without being purged (below).
* ``spaces`` holds each space's readers and its watermark; ``groups`` the members of each group.
* ``attachments`` holds the images pages show (bytes and hash), ``alt_texts`` the alt text written
  for an image in a context (by image hash and context hash), ``page_images`` which image each
  page shows with which alt text.
* ``jira_projects`` holds each Jira project's permissions and watermark; ``jira_issues`` each
  issue's listed fields (type, parent, level, people), the text last fetched as sent (only the
  latest is kept) and its Markdown.

**Vanished is hidden at once, purged only when it is plausible.** A page (or issue) the listing no
longer shows has been deleted, or the sync account may no longer read it — a restriction that
leaves it out looks exactly like a deletion. Either way nobody may see it from this sync on
(DESIGN.md A13), so the sinks get no tuples for it. Its content is purged with it when few went;
when more than the allowed share of a space went at once (a restriction over a large subtree, or a
listing cut short), the content is kept and marked ``vanished`` until an operator allows the purge
(or the pages come back), and nothing else about the sync waits for that.

Every write is one transaction: a sync killed at any point leaves a consistent store, and the
next run picks up from it (watermarks move only after the sinks have succeeded). The same
SQLAlchemy Core statements run on both engines; only the upsert construct is the dialect's own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    and_,
    create_engine,
    delete,
    event,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError

from core.errors import ConfigurationError
from core.models import Image, JiraPermissions
from core.settings import Settings
from pipeline.sources.confluence_rest import RemotePage, RemoteSpace
from pipeline.sources.jira_rest import RemoteIssue, RemoteProject
from pipeline.transform.confluence import CONVERTER
from pipeline.transform.jira import CONVERTER as JIRA_CONVERTER

_T = TypeVar("_T")
_metadata = MetaData()

page_versions = Table(
    "page_versions",
    _metadata,
    Column("page_id", Text, primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("title", Text, nullable=False),
    Column("storage", Text, nullable=False),
    Column("labels", Text, nullable=False),
    Column("last_modified", Text, nullable=False),
    Column("fetched_at", Text, nullable=False),
)
pages = Table(
    "pages",
    _metadata,
    Column("page_id", Text, primary_key=True),
    Column("space_key", Text, nullable=False),
    Column("title", Text, nullable=False),
    Column("parent_id", Text),
    Column("position", Integer),
    Column("version", Integer, nullable=False),
    Column("last_modified", Text, nullable=False),
    Column("url", Text, nullable=False),
    Column("read_users", Text, nullable=False),
    Column("read_groups", Text, nullable=False),
    Column("body_version", Integer),
    Column("markdown", Text),
    Column("links", Text),
    Column("converted_version", Integer),
    Column("converter", Integer),
    Column("conversion_error", Text),
    Column("content_revision", Text),
    Column("permission_revision", Text, nullable=False),
    Column("vanished", Text),  # when it first went missing from the listing, content kept; None while listed
    Index("pages_by_space", "space_key"),
)
spaces = Table(
    "spaces",
    _metadata,
    Column("space_key", Text, primary_key=True),
    Column("name", Text, nullable=False),
    Column("url", Text, nullable=False),
    Column("reader_users", Text, nullable=False),
    Column("reader_groups", Text, nullable=False),
    Column("watermark", Text),
)
groups = Table("groups", _metadata, Column("name", Text, primary_key=True), Column("members", Text, nullable=False))
attachments = Table(
    "attachments",
    _metadata,
    Column("attachment_id", Text, primary_key=True),
    Column("page_id", Text, nullable=False),
    Column("filename", Text, nullable=False),
    Column("media_type", Text, nullable=False),
    Column("sha256", Text, nullable=False),
    Column("data", LargeBinary, nullable=False),
)
alt_texts = Table(
    "alt_texts",
    _metadata,
    Column("image_sha256", Text, primary_key=True),
    Column("context_sha256", Text, primary_key=True),
    Column("source", Text, nullable=False),
    Column("text", Text, nullable=False),
)
page_images = Table(
    "page_images",
    _metadata,
    Column("page_id", Text, primary_key=True),
    Column("attachment_id", Text, primary_key=True),
    Column("alt_text", Text, nullable=False),
)

jira_projects = Table(
    "jira_projects",
    _metadata,
    Column("project_key", Text, primary_key=True),
    Column("name", Text, nullable=False),
    Column("url", Text, nullable=False),
    Column("permissions", Text, nullable=False),  # JiraPermissions as JSON
    Column("watermark", Text),
)
jira_issues = Table(
    "jira_issues",
    _metadata,
    Column("issue_key", Text, primary_key=True),
    Column("project_key", Text, nullable=False),
    Column("listing", Text, nullable=False),  # the listed fields (RemoteIssue without its text) as JSON
    Column("updated", Text, nullable=False),
    Column("body_updated", Text),  # the ``updated`` of the text held
    Column("body", Text),  # description, comments and links as sent, JSON
    Column("markdown", Text),
    Column("comment_markdown", Text),  # restricted comments' Markdown by comment id, JSON: documents of their own
    Column("converted_updated", Text),
    Column("converter", Integer),
    Column("vanished", Text),  # as for pages
    Index("jira_issues_by_project", "project_key"),
)

# The shape of ``jira_issues.body``; a text kept in an older one is fetched again (2: each
# comment's visibility; 3: each comment's id).
ISSUE_BODY_FORMAT = 3
# Columns added after a table's first release, added in place to older stores.
_ADDED_COLUMNS = (("pages", "converter"), ("pages", "vanished"), ("jira_issues", "vanished"), ("jira_issues", "comment_markdown"))
# Ids per IN (...) list: far below every engine's limit on bound parameters.
_CHUNK = 500
# The columns of ``pages`` that a listing or a fetch sets (``_page_row``).
_LISTED = ("space_key", "title", "parent_id", "position", "version", "last_modified", "url", "read_users", "read_groups", "permission_revision", "vanished")


@dataclass(frozen=True)
class StoredPage:
    page_id: str
    space_key: str
    title: str
    parent_id: str | None
    position: int | None
    version: int
    url: str
    read_users: tuple[str, ...]
    read_groups: tuple[str, ...]
    body_version: int | None
    markdown: str | None
    links: tuple[str, ...]
    converted_version: int | None
    converter: int | None  # the CONVERTER generation that wrote the Markdown
    conversion_error: str | None
    last_modified: datetime | None = None
    labels: tuple[str, ...] = ()  # of the version whose body is held
    vanished: bool = False  # missing from the listing, content kept until the purge is allowed: hidden

    @property
    def needs_body(self) -> bool:
        return self.body_version != self.version

    @property
    def needs_conversion(self) -> bool:
        return self.body_version is not None and (self.converted_version != self.body_version or self.converter != CONVERTER)


@dataclass(frozen=True)
class StoredIssue:
    listed: RemoteIssue  # its listed fields (no text)
    body_updated: str | None
    body: dict[str, Any] | None  # description, comments, links as sent
    markdown: str | None
    converted_updated: str | None
    converter: int | None
    vanished: bool = False  # as for pages
    comment_markdown: Mapping[str, str] = dataclasses.field(default_factory=dict)  # restricted comments' Markdown by id

    @property
    def needs_body(self) -> bool:
        """Its text is older than the listing, or was kept in an older shape (without comment
        visibility, say): fetched again rather than read as something it does not say."""
        return self.body_updated != self.listed.updated.isoformat() or (self.body or {}).get("format") != ISSUE_BODY_FORMAT

    @property
    def needs_conversion(self) -> bool:
        return self.body is not None and (self.converted_updated != self.body_updated or self.converter != JIRA_CONVERTER)


@dataclass(frozen=True)
class StoredAttachment:
    attachment_id: str
    page_id: str
    filename: str
    media_type: str
    sha256: str
    data: bytes


@dataclass
class Changes:
    """What a sync changed, by page id or issue key: the counts Confluence and Jira both report."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    permission_only: list[str] = field(default_factory=list)
    vanished: list[str] = field(default_factory=list)  # hidden now, content kept until the purge is allowed

    def summary(self) -> str:
        return (
            f"{len(self.added)} added, {len(self.changed)} changed, {len(self.moved)} moved, {len(self.deleted)} deleted, "
            f"{len(self.permission_only)} permission-only" + (f", {len(self.vanished)} vanished (hidden, content kept)" if self.vanished else "")
        )


@dataclass
class Reconciled:
    """What a listing of a space changed in the store."""

    added: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)  # gone from the listing and purged
    vanished: list[str] = field(default_factory=list)  # gone from the listing, too many at once to purge: hidden, kept
    moved: list[str] = field(default_factory=list)
    permissions_changed: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # a newer version than the body held


def permission_revision(read_users: Iterable[str], read_groups: Iterable[str]) -> str:
    return _digest(json.dumps([sorted(read_users), sorted(read_groups)]))


def content_revision(title: str, markdown: str) -> str:
    return _digest(json.dumps([title, markdown]))


def sqlite_url(path: object) -> str:
    return f"sqlite:///{path}"


class RawStore:
    """Async facade over one database; every call runs in a worker thread on a pooled connection.

    ``url`` is a SQLAlchemy URL: ``sqlite:///<absolute path>`` or
    ``postgresql+psycopg://user:password@host:port/database``.
    """

    def __init__(self, url: str) -> None:
        try:
            self._url = make_url(url)
        except ArgumentError as exc:
            raise ConfigurationError(f"the raw store URL is not a database URL: {exc}") from None
        if self._url.get_backend_name() not in ("sqlite", "postgresql"):
            raise ConfigurationError(
                f"the raw store runs on SQLite or PostgreSQL, not {self._url.get_backend_name()!r} "
                f"({self.address}); use sqlite:///<path> or postgresql+psycopg://user:password@host:port/database"
            )
        self._engine: Engine | None = None

    @classmethod
    def for_settings(cls, settings: Settings) -> RawStore:
        """The configured store: ``raw_store_url``, or the SQLite file in the data directory."""
        url = settings.raw_store_url.get_secret_value() if settings.raw_store_url else sqlite_url(settings.raw_store_path)
        return cls(url)

    @property
    def address(self) -> str:
        """The URL without its password, for messages and logs."""
        return self._url.render_as_string(hide_password=True)

    @property
    def dialect(self) -> str:
        return self._url.get_backend_name()

    async def open(self) -> RawStore:
        """Connect, create missing tables and columns; raise ConfigurationError when the database cannot be used."""
        await asyncio.to_thread(self._init)
        return self

    async def __aenter__(self) -> RawStore:
        return await self.open()

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._engine is not None:
            engine, self._engine = self._engine, None
            await asyncio.to_thread(engine.dispose)

    def _init(self) -> None:
        if self.dialect == "sqlite" and self._url.database:
            Path(self._url.database).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._engine = _engine(self._url)
            with self._engine.begin() as db:
                _metadata.create_all(db)
                for table, name in _ADDED_COLUMNS:  # stores written by an older release
                    if name not in {column["name"] for column in inspect(db).get_columns(table)}:
                        column = _metadata.tables[table].c[name]
                        db.execute(text(f"ALTER TABLE {table} ADD COLUMN {name} {column.type.compile(db.dialect)}"))
        except (OperationalError, NoSuchModuleError) as exc:
            raise ConfigurationError(f"the raw store at {self.address} cannot be used: {_first_line(exc)}") from None

    # -- spaces and groups ------------------------------------------------------------------

    async def save_space(self, space: RemoteSpace) -> None:
        row = {
            "space_key": space.key,
            "name": space.name,
            "url": space.url,
            "reader_users": json.dumps(space.reader_users),
            "reader_groups": json.dumps(space.reader_groups),
        }
        await self._write(lambda db: db.execute(self._upsert(spaces, ("name", "url", "reader_users", "reader_groups")), row))

    async def spaces(self) -> list[RemoteSpace]:
        rows = await self._read(select(spaces).order_by(spaces.c.space_key))
        return [
            RemoteSpace(r["space_key"], r["name"], r["url"], tuple(json.loads(r["reader_users"])), tuple(json.loads(r["reader_groups"])))
            for r in rows
        ]

    async def watermark(self, space_key: str) -> datetime | None:
        rows = await self._read(select(spaces.c.watermark).where(spaces.c.space_key == space_key))
        return datetime.fromisoformat(rows[0]["watermark"]) if rows and rows[0]["watermark"] else None

    async def set_watermark(self, space_key: str, when: datetime) -> None:
        await self._write(lambda db: db.execute(update(spaces).where(spaces.c.space_key == space_key).values(watermark=when.isoformat())))

    async def save_groups(self, members: dict[str, Sequence[str]]) -> None:
        rows = [{"name": name, "members": json.dumps(sorted(held))} for name, held in sorted(members.items())]

        def run(db: Connection) -> None:
            db.execute(delete(groups))
            if rows:
                db.execute(groups.insert(), rows)

        await self._write(run)

    async def groups(self) -> dict[str, tuple[str, ...]]:
        return {r["name"]: tuple(json.loads(r["members"])) for r in await self._read(select(groups).order_by(groups.c.name))}

    # -- pages --------------------------------------------------------------------------------

    async def reconcile(self, space_key: str, listing: Sequence[RemotePage], *, max_deleted_share: float = 1.0) -> Reconciled:
        """Make the store's tree and restrictions of ``space_key`` those of ``listing``. Bodies are
        kept; pages no longer listed are deleted (with their history) — unless more than
        ``max_deleted_share`` of the space's pages (over 20 of them) went at once: then they are
        kept, marked vanished (hidden from everyone by the sinks), until a run allows their purge."""
        listed_ids = [page.page_id for page in listing]
        state = select(pages.c.page_id, pages.c.space_key, pages.c.parent_id, pages.c.position, pages.c.permission_revision, pages.c.body_version)

        def run(db: Connection) -> Reconciled:
            held = {r["page_id"]: r for r in db.execute(state.where(pages.c.space_key == space_key)).mappings()}
            # A page listed here may have been held under another space: it moved between spaces.
            moved_in = {
                r["page_id"]: r
                for ids in _chunks(listed_ids)
                for r in db.execute(state.where(pages.c.space_key != space_key, pages.c.page_id.in_(ids))).mappings()
            }
            held |= moved_in
            changes = Reconciled()
            for page in listing:
                old = held.get(page.page_id)
                if old is None:
                    changes.added.append(page.page_id)
                else:
                    if (old["parent_id"], old["position"], old["space_key"]) != (page.parent_id, page.position, page.space_key):
                        changes.moved.append(page.page_id)
                    if old["permission_revision"] != permission_revision(page.read_users, page.read_groups):
                        changes.permissions_changed.append(page.page_id)
                if old is None or old["body_version"] != page.version:
                    changes.stale.append(page.page_id)
            _purge_or_keep(changes, sorted(set(held) - set(listed_ids)), len(held), max_deleted_share)
            if listing:
                db.execute(self._upsert(pages, _LISTED), [_page_row(page) for page in listing])
            for ids in _chunks(changes.vanished):
                db.execute(update(pages).where(pages.c.page_id.in_(ids), pages.c.vanished.is_(None)).values(vanished=_now()))
            for ids in _chunks(changes.deleted):
                for table in (pages, page_versions, page_images, attachments):
                    db.execute(delete(table).where(table.c.page_id.in_(ids)))
            return changes

        return await self._write(run)

    async def save_body(self, page: RemotePage) -> None:
        """Keep a fetched body (and the page's current place and restrictions with it)."""
        if page.storage is None:
            raise ValueError(f"page {page.page_id} was fetched without its body")
        version_row = {
            "page_id": page.page_id,
            "version": page.version,
            "title": page.title,
            "storage": page.storage,
            "labels": json.dumps(page.labels),
            "last_modified": page.last_modified.isoformat(),
            "fetched_at": datetime.now(UTC).isoformat(),
        }
        keep_version = self._insert(page_versions).on_conflict_do_nothing()
        # A body fetched after the listing is newer than it: its place and restrictions win too,
        # or text restricted meanwhile would be published under the old, open restrictions.
        newer = self._insert(pages)
        current = newer.on_conflict_do_update(
            index_elements=[pages.c.page_id],
            set_={name: newer.excluded[name] for name in (*_LISTED, "body_version")},
            where=newer.excluded.version >= pages.c.version,
        )

        def run(db: Connection) -> None:
            db.execute(keep_version, version_row)
            db.execute(current, {**_page_row(page), "body_version": page.version})

        await self._write(run)

    async def body(self, page_id: str, version: int) -> str | None:
        rows = await self._read(select(page_versions.c.storage).where(page_versions.c.page_id == page_id, page_versions.c.version == version))
        return rows[0]["storage"] if rows else None

    async def save_conversion(self, page_id: str, version: int, markdown: str, links: Sequence[str], title: str) -> None:
        values = {
            "markdown": markdown,
            "links": json.dumps(list(links)),
            "converted_version": version,
            "converter": CONVERTER,
            "conversion_error": None,
            "content_revision": content_revision(title, markdown),
        }
        await self._write(lambda db: db.execute(update(pages).where(pages.c.page_id == page_id).values(**values)))

    async def save_conversion_error(self, page_id: str, error: str) -> None:
        """The previous Markdown stays; the page is converted again on the next run."""
        await self._write(lambda db: db.execute(update(pages).where(pages.c.page_id == page_id).values(conversion_error=error)))

    async def pages(self, space_key: str | None = None) -> list[StoredPage]:
        held = page_versions.c.page_id == pages.c.page_id, page_versions.c.version == pages.c.body_version
        query = select(pages, page_versions.c.labels).outerjoin(page_versions, and_(*held)).order_by(pages.c.page_id)
        if space_key:
            query = query.where(pages.c.space_key == space_key)
        return [_stored(r) for r in await self._read(query)]

    # -- Jira -------------------------------------------------------------------------------

    async def save_jira_project(self, project: RemoteProject, permissions: JiraPermissions) -> None:
        row = {"project_key": project.key, "name": project.name, "url": project.url, "permissions": permissions.model_dump_json()}
        await self._write(lambda db: db.execute(self._upsert(jira_projects, ("name", "url", "permissions")), row))

    async def jira_projects(self) -> list[tuple[RemoteProject, JiraPermissions]]:
        rows = await self._read(select(jira_projects).order_by(jira_projects.c.project_key))
        return [(RemoteProject(r["project_key"], r["name"], r["url"]), JiraPermissions.model_validate_json(r["permissions"])) for r in rows]

    async def jira_watermark(self, project_key: str) -> datetime | None:
        rows = await self._read(select(jira_projects.c.watermark).where(jira_projects.c.project_key == project_key))
        return datetime.fromisoformat(rows[0]["watermark"]) if rows and rows[0]["watermark"] else None

    async def set_jira_watermark(self, project_key: str, when: datetime) -> None:
        change = update(jira_projects).where(jira_projects.c.project_key == project_key).values(watermark=when.isoformat())
        await self._write(lambda db: db.execute(change))

    async def reconcile_issues(self, project_key: str, listing: Sequence[RemoteIssue], *, max_deleted_share: float = 1.0) -> Reconciled:
        """Make the store's issues of ``project_key`` those of ``listing`` (place, level, people);
        texts are kept, issues no longer listed deleted — unless more than ``max_deleted_share``
        of them (over 20) went at once: then they are kept and marked vanished, as pages are."""

        def run(db: Connection) -> Reconciled:
            state = select(jira_issues.c.issue_key, jira_issues.c.listing, jira_issues.c.body_updated)
            held = {r["issue_key"]: r for r in db.execute(state.where(jira_issues.c.project_key == project_key)).mappings()}
            changes = Reconciled()
            for issue in listing:
                old = held.get(issue.key)
                if old is None:
                    changes.added.append(issue.key)
                else:
                    before = json.loads(old["listing"])
                    if before["parent_key"] != issue.parent_key:
                        changes.moved.append(issue.key)
                    if (before["security_level"], before["reporter"], before["assignee"]) != (issue.security_level, issue.reporter, issue.assignee):
                        changes.permissions_changed.append(issue.key)
                if old is None or old["body_updated"] != issue.updated.isoformat():
                    changes.stale.append(issue.key)
            _purge_or_keep(changes, sorted(set(held) - {issue.key for issue in listing}), len(held), max_deleted_share)
            if listing:
                db.execute(self._upsert(jira_issues, ("project_key", "listing", "updated", "vanished")), [_issue_row(issue) for issue in listing])
            for keys in _chunks(changes.vanished):
                db.execute(update(jira_issues).where(jira_issues.c.issue_key.in_(keys), jira_issues.c.vanished.is_(None)).values(vanished=_now()))
            for keys in _chunks(changes.deleted):
                db.execute(delete(jira_issues).where(jira_issues.c.issue_key.in_(keys)))
            return changes

        return await self._write(run)

    async def save_issue_bodies(self, issues: Sequence[RemoteIssue]) -> None:
        """Keep fetched texts (with the issues' current listed fields: a text fetched after the
        listing is newer than it)."""
        rows = [{**_issue_row(issue), "body_updated": issue.updated.isoformat(), "body": json.dumps(_issue_body(issue))} for issue in issues]
        if rows:
            await self._write(lambda db: db.execute(self._upsert(jira_issues, ("project_key", "listing", "updated", "body_updated", "body")), rows))

    async def save_issue_markdown(self, key: str, body_updated: str, markdown: str, comments: Mapping[str, str] | None = None) -> None:
        """An issue's Markdown, and that of its restricted comments by comment id."""
        values = {
            "markdown": markdown, "comment_markdown": json.dumps(dict(comments or {})), "converted_updated": body_updated, "converter": JIRA_CONVERTER,
        }
        await self._write(lambda db: db.execute(update(jira_issues).where(jira_issues.c.issue_key == key).values(**values)))

    async def issues(self, project_key: str) -> list[StoredIssue]:
        query = select(jira_issues).where(jira_issues.c.project_key == project_key).order_by(jira_issues.c.issue_key)
        return [_stored_issue(r) for r in await self._read(query)]

    # -- images -----------------------------------------------------------------------------

    async def attachment(self, attachment_id: str) -> StoredAttachment | None:
        rows = await self._read(select(attachments).where(attachments.c.attachment_id == attachment_id))
        return StoredAttachment(**{**rows[0], "data": bytes(rows[0]["data"])}) if rows else None

    async def save_attachment(self, attachment: StoredAttachment) -> None:
        row = {name: getattr(attachment, name) for name in attachments.c.keys()}
        await self._write(lambda db: db.execute(self._upsert(attachments, ("page_id", "filename", "media_type", "sha256", "data")), row))

    async def cached_alt_text(self, image_sha256: str, context_sha256: str) -> str | None:
        rows = await self._read(select(alt_texts.c.text).where(alt_texts.c.image_sha256 == image_sha256, alt_texts.c.context_sha256 == context_sha256))
        return rows[0]["text"] if rows else None

    async def cache_alt_text(self, image_sha256: str, context_sha256: str, source: str, text: str) -> None:
        row = {"image_sha256": image_sha256, "context_sha256": context_sha256, "source": source, "text": text}
        await self._write(lambda db: db.execute(self._upsert(alt_texts, ("source", "text")), row))

    async def set_page_images(self, page_id: str, alt_texts: dict[str, str]) -> None:
        rows = [{"page_id": page_id, "attachment_id": a, "alt_text": t} for a, t in alt_texts.items()]

        def run(db: Connection) -> None:
            db.execute(delete(page_images).where(page_images.c.page_id == page_id))
            if rows:
                db.execute(page_images.insert(), rows)

        await self._write(run)

    async def page_images(self) -> list[Image]:
        """Every image a held page shows, with its bytes and alt text."""
        i, a = page_images.c, attachments.c
        query = (
            select(i.page_id, i.attachment_id, i.alt_text, a.filename, a.media_type, a.sha256, a.data)
            .select_from(page_images.join(attachments, a.attachment_id == i.attachment_id).join(pages, pages.c.page_id == i.page_id))
            .order_by(i.attachment_id)
        )
        return [Image(**{**row, "data": bytes(row["data"])}) for row in await self._read(query)]

    # -- plumbing -----------------------------------------------------------------------------

    def _insert(self, table: Table) -> Any:
        """The dialect's INSERT, which knows ON CONFLICT (the same clause on both engines)."""
        return (postgresql if self.dialect == "postgresql" else sqlite).insert(table)

    def _upsert(self, table: Table, columns: Sequence[str]) -> Any:
        """INSERT, or on a primary-key conflict overwrite ``columns`` with the new row's."""
        statement = self._insert(table)
        keys = [column for column in table.primary_key.columns]
        return statement.on_conflict_do_update(index_elements=keys, set_={name: statement.excluded[name] for name in columns})

    async def _read(self, query: Any) -> list[Mapping[str, Any]]:
        def run() -> list[Mapping[str, Any]]:
            with self._connected().connect() as db:
                return list(db.execute(query).mappings())

        return await asyncio.to_thread(run)

    async def _write(self, change: Callable[[Connection], _T]) -> _T:
        def run() -> _T:
            with self._connected().begin() as db:  # one transaction, committed or rolled back as a whole
                return change(db)

        return await asyncio.to_thread(run)

    def _connected(self) -> Engine:
        if self._engine is None:
            raise RuntimeError("RawStore.open() was not awaited (or the store was closed)")
        return self._engine


def _engine(url: Any) -> Engine:
    if url.get_backend_name() == "postgresql":
        return create_engine(url, pool_pre_ping=True, pool_size=2, max_overflow=4)
    engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _pragmas(connection: Any, _record: Any) -> None:
        cursor = connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    return engine


def _page_row(page: RemotePage) -> dict[str, object]:
    """The ``pages`` columns a listing or a fetch sets."""
    return {
        "page_id": page.page_id,
        "space_key": page.space_key,
        "title": page.title,
        "parent_id": page.parent_id,
        "position": page.position,
        "version": page.version,
        "last_modified": page.last_modified.isoformat(),
        "url": page.url,
        "read_users": json.dumps(page.read_users),
        "read_groups": json.dumps(page.read_groups),
        "permission_revision": permission_revision(page.read_users, page.read_groups),
        "vanished": None,  # listed or fetched: seen by the sync account now
    }


def _stored(row: Mapping[str, Any]) -> StoredPage:
    return StoredPage(
        page_id=row["page_id"],
        space_key=row["space_key"],
        title=row["title"],
        parent_id=row["parent_id"],
        position=row["position"],
        version=row["version"],
        url=row["url"],
        read_users=tuple(json.loads(row["read_users"])),
        read_groups=tuple(json.loads(row["read_groups"])),
        body_version=row["body_version"],
        markdown=row["markdown"],
        links=tuple(json.loads(row["links"])) if row["links"] else (),
        converted_version=row["converted_version"],
        converter=row["converter"],
        conversion_error=row["conversion_error"],
        last_modified=datetime.fromisoformat(row["last_modified"]) if row.get("last_modified") else None,
        labels=tuple(json.loads(row["labels"])) if row.get("labels") else (),
        vanished=row.get("vanished") is not None,
    )


def _issue_row(issue: RemoteIssue) -> dict[str, object]:
    fields = {**dataclasses.asdict(issue), "updated": issue.updated.isoformat()}
    for name in ("description", "comments", "links"):  # the text is the body's
        fields.pop(name)
    return {"issue_key": issue.key, "project_key": issue.project_key, "listing": json.dumps(fields), "updated": issue.updated.isoformat(), "vanished": None}


def _issue_body(issue: RemoteIssue) -> dict[str, Any]:
    return {
        "format": ISSUE_BODY_FORMAT,
        "description": issue.description,
        "comments": [
            {"id": c.id, "author": c.author, "created": c.created.isoformat(), "body": c.body, "visibility": list(c.visibility) if c.visibility else None}
            for c in issue.comments
        ],
        "links": [list(link) for link in issue.links],
    }


def _stored_issue(row: Mapping[str, Any]) -> StoredIssue:
    fields = json.loads(row["listing"])
    listed = RemoteIssue(**{**fields, "updated": datetime.fromisoformat(fields["updated"]), "labels": tuple(fields["labels"])})
    body = json.loads(row["body"]) if row["body"] else None
    comments = json.loads(row["comment_markdown"]) if row.get("comment_markdown") else {}
    return StoredIssue(
        listed, row["body_updated"], body, row["markdown"], row["converted_updated"], row["converter"], row.get("vanished") is not None, comments
    )


def _purge_or_keep(changes: Reconciled, gone: list[str], held: int, max_share: float) -> None:
    """What went missing from a listing is purged, or — when more than ``max_share`` of the
    ``held`` went at once (over 20) — kept as vanished. Hidden either way: the caller's sinks
    write no tuples for it."""
    if len(gone) > 20 and len(gone) > max_share * held:
        changes.vanished = gone
    else:
        changes.deleted = gone


def vanished_warning(where: str, count: int, kind: str, setting: str) -> str:
    """What a sync says of objects kept as vanished, and how an operator purges them."""
    return (
        f"{where}: {count} {kind} vanished from the sync account's view (deleted, or newly restricted without it); "
        f"hidden from everyone now, their content kept. If they really went, raise {setting} for one run to purge them."
    )


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _chunks(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def _first_line(exc: Exception) -> str:
    return str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
