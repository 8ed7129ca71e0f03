"""The raw store: what the sync last read from Confluence, one SQLite file under the data directory.

* ``page_versions`` keeps every body fetched, keyed by (page id, version): storage XHTML, title,
  labels, when it was fetched. Nothing fetched is thrown away, so a conversion can be redone
  without asking the site again.
* ``pages`` is the current state of each page: place in the tree, read restrictions, the version
  whose body is held, the Markdown converted from it (or the conversion error, retried next run),
  and two revisions kept apart: ``content_revision`` (title and text) and ``permission_revision``
  (restrictions), so a permission-only change touches tuples and nothing else.
* ``spaces`` holds each space's readers and its watermark; ``groups`` the members of each group.
* ``attachments`` holds the images pages show (bytes and hash), ``alt_texts`` the alt text written
  for an image in a context (by image hash and context hash), ``page_images`` which image each
  page shows with which alt text.

Every write commits on its own: a sync killed at any point leaves a consistent store, and the
next run picks up from it (watermarks move only after the sinks have succeeded).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from core.errors import SourceError
from core.models import Image
from pipeline.transform.confluence import CONVERTER
from pipeline.sources.confluence_rest import RemotePage, RemoteSpace

_SCHEMA = """
CREATE TABLE IF NOT EXISTS page_versions (
    page_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    title TEXT NOT NULL,
    storage TEXT NOT NULL,
    labels TEXT NOT NULL,
    last_modified TEXT NOT NULL,
    fetched_at TEXT NOT NULL,
    PRIMARY KEY (page_id, version)
);
CREATE TABLE IF NOT EXISTS pages (
    page_id TEXT PRIMARY KEY,
    space_key TEXT NOT NULL,
    title TEXT NOT NULL,
    parent_id TEXT,
    position INTEGER,
    version INTEGER NOT NULL,
    last_modified TEXT NOT NULL,
    url TEXT NOT NULL,
    read_users TEXT NOT NULL,
    read_groups TEXT NOT NULL,
    body_version INTEGER,
    markdown TEXT,
    links TEXT,
    converted_version INTEGER,
    converter INTEGER,
    conversion_error TEXT,
    content_revision TEXT,
    permission_revision TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS pages_by_space ON pages (space_key);
CREATE TABLE IF NOT EXISTS spaces (
    space_key TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    url TEXT NOT NULL,
    reader_users TEXT NOT NULL,
    reader_groups TEXT NOT NULL,
    watermark TEXT
);
CREATE TABLE IF NOT EXISTS groups (
    name TEXT PRIMARY KEY,
    members TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS attachments (
    attachment_id TEXT PRIMARY KEY,
    page_id TEXT NOT NULL,
    filename TEXT NOT NULL,
    media_type TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS alt_texts (
    image_sha256 TEXT NOT NULL,
    context_sha256 TEXT NOT NULL,
    source TEXT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (image_sha256, context_sha256)
);
CREATE TABLE IF NOT EXISTS page_images (
    page_id TEXT NOT NULL,
    attachment_id TEXT NOT NULL,
    alt_text TEXT NOT NULL,
    PRIMARY KEY (page_id, attachment_id)
);
"""


# Columns added to ``pages`` after its first release, added in place to older stores.
_ADDED_COLUMNS = {"converter": "INTEGER"}


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

    @property
    def needs_body(self) -> bool:
        return self.body_version != self.version

    @property
    def needs_conversion(self) -> bool:
        return self.body_version is not None and (self.converted_version != self.body_version or self.converter != CONVERTER)


@dataclass(frozen=True)
class StoredAttachment:
    attachment_id: str
    page_id: str
    filename: str
    media_type: str
    sha256: str
    data: bytes


@dataclass
class Reconciled:
    """What a listing of a space changed in the store."""

    added: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    permissions_changed: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # a newer version than the body held


def permission_revision(read_users: Iterable[str], read_groups: Iterable[str]) -> str:
    return _digest(json.dumps([sorted(read_users), sorted(read_groups)]))


def content_revision(title: str, markdown: str) -> str:
    return _digest(json.dumps([title, markdown]))


class RawStore:
    """Async facade over one SQLite file; every call runs in a worker thread with its own connection."""

    def __init__(self, path: Path) -> None:
        self._path = path

    async def open(self) -> RawStore:
        await asyncio.to_thread(self._init)
        return self

    def _init(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        db = self._connect()
        try:
            db.executescript(_SCHEMA)
            columns = {row["name"] for row in db.execute("PRAGMA table_info(pages)")}
            for column, kind in _ADDED_COLUMNS.items():  # stores written by an older release
                if column not in columns:
                    db.execute(f"ALTER TABLE pages ADD COLUMN {column} {kind}")
            db.commit()
        finally:
            db.close()

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self._path, timeout=30)
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA foreign_keys=ON")
        return db

    # -- spaces and groups ------------------------------------------------------------------

    async def save_space(self, space: RemoteSpace) -> None:
        def run(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO spaces (space_key, name, url, reader_users, reader_groups) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (space_key) DO UPDATE SET name = excluded.name, url = excluded.url, "
                "reader_users = excluded.reader_users, reader_groups = excluded.reader_groups",
                (space.key, space.name, space.url, json.dumps(space.reader_users), json.dumps(space.reader_groups)),
            )

        await self._write(run)

    async def spaces(self) -> list[RemoteSpace]:
        rows = await self._read("SELECT * FROM spaces ORDER BY space_key")
        return [RemoteSpace(r["space_key"], r["name"], r["url"], tuple(json.loads(r["reader_users"])), tuple(json.loads(r["reader_groups"]))) for r in rows]

    async def watermark(self, space_key: str) -> datetime | None:
        rows = await self._read("SELECT watermark FROM spaces WHERE space_key = ?", (space_key,))
        return datetime.fromisoformat(rows[0]["watermark"]) if rows and rows[0]["watermark"] else None

    async def set_watermark(self, space_key: str, when: datetime) -> None:
        await self._write(lambda db: db.execute("UPDATE spaces SET watermark = ? WHERE space_key = ?", (when.isoformat(), space_key)))

    async def save_groups(self, members: dict[str, Sequence[str]]) -> None:
        def run(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM groups")
            db.executemany("INSERT INTO groups (name, members) VALUES (?, ?)", [(n, json.dumps(sorted(m))) for n, m in sorted(members.items())])

        await self._write(run)

    async def groups(self) -> dict[str, tuple[str, ...]]:
        return {r["name"]: tuple(json.loads(r["members"])) for r in await self._read("SELECT * FROM groups ORDER BY name")}

    # -- pages --------------------------------------------------------------------------------

    async def reconcile(self, space_key: str, listing: Sequence[RemotePage], *, max_deleted_share: float = 1.0) -> Reconciled:
        """Make the store's tree and restrictions of ``space_key`` those of ``listing``. Bodies are
        kept; pages no longer listed are deleted (with their history). A listing that would delete
        more than ``max_deleted_share`` of the space's pages (over 20 of them) changes nothing and
        raises: a listing cut short must not empty every store."""

        def run(db: sqlite3.Connection) -> Reconciled:
            held = {r["page_id"]: r for r in db.execute("SELECT * FROM pages WHERE space_key = ?", (space_key,))}
            # A page listed here may have been held under another space: it moved between spaces.
            listed_ids = {p.page_id for p in listing}
            moved_in = {r["page_id"]: r for r in db.execute("SELECT * FROM pages WHERE space_key != ?", (space_key,)) if r["page_id"] in listed_ids}
            held |= moved_in
            changes = Reconciled()
            for page in listing:
                revision = permission_revision(page.read_users, page.read_groups)
                old = held.get(page.page_id)
                if old is None:
                    changes.added.append(page.page_id)
                else:
                    if (old["parent_id"], old["position"], old["space_key"]) != (page.parent_id, page.position, page.space_key):
                        changes.moved.append(page.page_id)
                    if old["permission_revision"] != revision:
                        changes.permissions_changed.append(page.page_id)
                if old is None or old["body_version"] != page.version:
                    changes.stale.append(page.page_id)
                db.execute(
                    "INSERT INTO pages (page_id, space_key, title, parent_id, position, version, last_modified, url, read_users, "
                    "read_groups, permission_revision) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (page_id) DO UPDATE SET "
                    "space_key = excluded.space_key, title = excluded.title, parent_id = excluded.parent_id, "
                    "position = excluded.position, version = excluded.version, last_modified = excluded.last_modified, "
                    "url = excluded.url, read_users = excluded.read_users, read_groups = excluded.read_groups, "
                    "permission_revision = excluded.permission_revision",
                    _page_row(page),
                )
            listed = {page.page_id for page in listing}
            changes.deleted = sorted(set(held) - listed - set(moved_in))
            if len(changes.deleted) > 20 and len(changes.deleted) > max_deleted_share * len(held):
                raise SourceError(
                    f"the listing of space {space_key} would delete {len(changes.deleted)} of its {len(held)} pages; nothing "
                    "was changed. If that many pages really went, raise WAYFINDER_CONFLUENCE__MAX_DELETED_SHARE for one run."
                )
            db.executemany("DELETE FROM pages WHERE page_id = ?", [(page_id,) for page_id in changes.deleted])
            db.executemany("DELETE FROM page_versions WHERE page_id = ?", [(page_id,) for page_id in changes.deleted])
            db.executemany("DELETE FROM page_images WHERE page_id = ?", [(page_id,) for page_id in changes.deleted])
            db.executemany("DELETE FROM attachments WHERE page_id = ?", [(page_id,) for page_id in changes.deleted])
            return changes

        return await self._write(run)

    async def save_body(self, page: RemotePage) -> None:
        """Keep a fetched body (and the page's current place and restrictions with it)."""
        if page.storage is None:
            raise ValueError(f"page {page.page_id} was fetched without its body")
        fetched = datetime.now(UTC).isoformat()

        def run(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT OR IGNORE INTO page_versions (page_id, version, title, storage, labels, last_modified, fetched_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (page.page_id, page.version, page.title, page.storage, json.dumps(page.labels), page.last_modified.isoformat(), fetched),
            )
            db.execute(
                "INSERT INTO pages (page_id, space_key, title, parent_id, position, version, last_modified, url, read_users, "
                "read_groups, permission_revision, body_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                # A body fetched after the listing is newer than it: its place and restrictions win too,
                # or text restricted meanwhile would be published under the old, open restrictions.
                "ON CONFLICT (page_id) DO UPDATE SET space_key = excluded.space_key, title = excluded.title, "
                "parent_id = excluded.parent_id, position = excluded.position, version = excluded.version, "
                "last_modified = excluded.last_modified, url = excluded.url, read_users = excluded.read_users, "
                "read_groups = excluded.read_groups, permission_revision = excluded.permission_revision, "
                "body_version = excluded.body_version WHERE excluded.version >= pages.version",
                (*_page_row(page), page.version),
            )

        await self._write(run)

    async def body(self, page_id: str, version: int) -> str | None:
        rows = await self._read("SELECT storage FROM page_versions WHERE page_id = ? AND version = ?", (page_id, version))
        return rows[0]["storage"] if rows else None

    async def save_conversion(self, page_id: str, version: int, markdown: str, links: Sequence[str], title: str) -> None:
        await self._write(
            lambda db: db.execute(
                "UPDATE pages SET markdown = ?, links = ?, converted_version = ?, converter = ?, conversion_error = NULL, "
                "content_revision = ? WHERE page_id = ?",
                (markdown, json.dumps(list(links)), version, CONVERTER, content_revision(title, markdown), page_id),
            )
        )

    async def save_conversion_error(self, page_id: str, error: str) -> None:
        """The previous Markdown stays; the page is converted again on the next run."""
        await self._write(lambda db: db.execute("UPDATE pages SET conversion_error = ? WHERE page_id = ?", (error, page_id)))

    async def pages(self, space_key: str | None = None) -> list[StoredPage]:
        query = "SELECT * FROM pages" + (" WHERE space_key = ?" if space_key else "") + " ORDER BY page_id"
        return [_stored(r) for r in await self._read(query, (space_key,) if space_key else ())]

    # -- images -----------------------------------------------------------------------------

    async def attachment(self, attachment_id: str) -> StoredAttachment | None:
        rows = await self._read("SELECT * FROM attachments WHERE attachment_id = ?", (attachment_id,))
        return StoredAttachment(**dict(rows[0])) if rows else None

    async def save_attachment(self, attachment: StoredAttachment) -> None:
        await self._write(
            lambda db: db.execute(
                "INSERT OR REPLACE INTO attachments (attachment_id, page_id, filename, media_type, sha256, data) VALUES (?, ?, ?, ?, ?, ?)",
                (attachment.attachment_id, attachment.page_id, attachment.filename, attachment.media_type, attachment.sha256, attachment.data),
            )
        )

    async def cached_alt_text(self, image_sha256: str, context_sha256: str) -> str | None:
        rows = await self._read("SELECT text FROM alt_texts WHERE image_sha256 = ? AND context_sha256 = ?", (image_sha256, context_sha256))
        return rows[0]["text"] if rows else None

    async def cache_alt_text(self, image_sha256: str, context_sha256: str, source: str, text: str) -> None:
        await self._write(
            lambda db: db.execute(
                "INSERT OR REPLACE INTO alt_texts (image_sha256, context_sha256, source, text) VALUES (?, ?, ?, ?)",
                (image_sha256, context_sha256, source, text),
            )
        )

    async def set_page_images(self, page_id: str, alt_texts: dict[str, str]) -> None:
        def run(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM page_images WHERE page_id = ?", (page_id,))
            db.executemany("INSERT INTO page_images (page_id, attachment_id, alt_text) VALUES (?, ?, ?)", [(page_id, a, t) for a, t in alt_texts.items()])

        await self._write(run)

    async def page_images(self) -> list[Image]:
        """Every image a held page shows, with its bytes and alt text."""
        rows = await self._read(
            "SELECT i.page_id, i.attachment_id, i.alt_text, a.filename, a.media_type, a.sha256, a.data FROM page_images i "
            "JOIN attachments a ON a.attachment_id = i.attachment_id JOIN pages p ON p.page_id = i.page_id ORDER BY i.attachment_id"
        )
        return [Image(**dict(row)) for row in rows]

    # -- plumbing -----------------------------------------------------------------------------

    async def _read(self, query: str, params: tuple = ()) -> list[sqlite3.Row]:
        def run() -> list[sqlite3.Row]:
            db = self._connect()
            try:
                return list(db.execute(query, params))
            finally:
                db.close()

        return await asyncio.to_thread(run)

    async def _write(self, change):
        def run():
            db = self._connect()
            try:
                with db:  # one transaction, committed or rolled back as a whole
                    return change(db)
            finally:
                db.close()

        return await asyncio.to_thread(run)


def _page_row(page: RemotePage) -> tuple[object, ...]:
    """The ``pages`` columns a listing or a fetch sets, in the order the INSERTs name them."""
    return (
        page.page_id,
        page.space_key,
        page.title,
        page.parent_id,
        page.position,
        page.version,
        page.last_modified.isoformat(),
        page.url,
        json.dumps(page.read_users),
        json.dumps(page.read_groups),
        permission_revision(page.read_users, page.read_groups),
    )


def _stored(row: sqlite3.Row) -> StoredPage:
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
    )


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
