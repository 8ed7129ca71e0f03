"""The emulated site's seed: the Apache Hive space from ``../shared/corpora/apache-hive-wiki``.

Real: page ids, titles, the tree, the text (as storage XHTML, see :mod:`devstack.atlassian.storage`)
and the 47 image attachments. Synthesised deterministically, because the export has none of them
(the README documents them): users and their time zones, groups, space permissions, read
restrictions (each naming the sync account too: like a real one, it reads only what it is granted),
labels (the slug of the page's top-level section), authors and version histories
spread over 2010-2024 from a hash of each page id.
"""

from __future__ import annotations

import hashlib
import mimetypes
import re
from datetime import UTC, datetime, timedelta
from collections.abc import Collection
from pathlib import Path

from devstack.atlassian.site import Attachment, Site, User, Version
from devstack.atlassian.storage import to_storage
from devstack.atlassian.export import DESIGN_DOCS_PAGE, SINGLE_USER_PAGE, HiveExportSource

SPACE_KEY = "HIVE"
SPACE_NAME = "Apache Hive"
SYNC_LOGIN = "wayfinder-sync"
# Tokens of the emulator's users; the emulator is a development tool bound to loopback.
TOKENS = {
    SYNC_LOGIN: "emulator-token-wayfinder-sync",
    "alice": "emulator-token-alice",
    "bob": "emulator-token-bob",
    "carol": "emulator-token-carol",
    "hive-admin": "emulator-token-hive-admin",
}
_ZONES = {
    SYNC_LOGIN: "America/Los_Angeles",  # CQL dates are read in this zone: the sync must allow for it
    "alice": "Europe/Berlin",
    "bob": "Asia/Kolkata",
    "carol": "UTC",
    "hive-admin": "UTC",
}
HISTORY_START = datetime(2010, 1, 1, tzinfo=UTC)
HISTORY_DAYS = 14 * 365


def account_id(login: str) -> str:
    """A Cloud-style account id (24 hex digits), stable for a login."""
    return hashlib.sha256(f"account:{login}".encode()).hexdigest()[:24]


async def seed_hive(site: Site, corpus_dir: Path, *, roots: Collection[str] | None = None) -> None:
    """Fill an empty ``site`` with the Hive space, or with the subtrees of ``roots`` only."""
    for login, token in TOKENS.items():
        site.add_user(
            User(
                account_id=account_id(login),
                username=login,
                display_name=login.replace("-", " ").title(),
                email=f"{login}@example.com",
                token=token,
                time_zone=_ZONES[login],
                site_admin=login == SYNC_LOGIN,
            )
        )
    site.add_group("hive-committers", {account_id("alice")})
    site.add_group("hive-users", {account_id("bob")})
    sync = account_id(SYNC_LOGIN)
    site.add_space(SPACE_KEY, SPACE_NAME, readers_users={sync}, readers_groups={"hive-users", "hive-committers"})

    pages = await HiveExportSource(corpus_dir).pages(SPACE_KEY)
    titles = {page.page_id: page.title for page in pages}  # links out of a slice stay links by title
    if roots is not None:
        kept: set[str] = set()
        for page in pages:  # parents come before children
            if page.page_id in roots or page.parent_id in kept:
                kept.add(page.page_id)
        pages = [page.model_copy(update={"parent_id": None} if page.page_id in roots else {}) for page in pages if page.page_id in kept]
    top_of: dict[str, str] = {}
    authors = [account_id(login) for login in ("hive-admin", "alice", "bob")]
    for page in pages:  # parents come before children
        root = top_of[page.page_id] = page.page_id if page.parent_id is None else top_of[page.parent_id]
        body = to_storage(page.markdown, page_id=page.page_id, titles=titles, space_key=SPACE_KEY)
        created = site.create_page(
            SPACE_KEY,
            page.title,
            body,
            parent_id=page.parent_id,
            page_id=page.page_id,
            by=authors[stable_hash(page.page_id, "author") % len(authors)],
            at=_created(page.page_id),
            labels=[slug(titles[root])],
        )
        created.versions.extend(_history(page.page_id, created.versions[0], authors))
    for path in sorted((corpus_dir / "attachments").glob("*/*")):
        page_id, data = path.parent.name, path.read_bytes()
        if page_id not in site.pages:
            continue
        media_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        first = site.pages[page_id].created  # seeded files belong to the page's first version
        site.attachments[f"att{path.stem}"] = Attachment(f"att{path.stem}", page_id, path.name, media_type, data, first.when, first.by)
    for page_id, users, groups in ((DESIGN_DOCS_PAGE, set(), {"hive-committers"}), (SINGLE_USER_PAGE, {account_id("bob")}, set())):
        if page_id in site.pages:
            site.set_read_restrictions(page_id, users=users | {sync}, groups=groups)


def stable_hash(page_id: str, purpose: str) -> int:
    """A number drawn from ``page_id`` (or any key) for one ``purpose``: the seeds' only randomness."""
    return int.from_bytes(hashlib.sha256(f"{purpose}:{page_id}".encode()).digest()[:8], "big")


def _created(page_id: str) -> datetime:
    return HISTORY_START + timedelta(minutes=stable_hash(page_id, "created") % (HISTORY_DAYS * 24 * 60))


def _history(page_id: str, first: Version, authors: list[str]) -> list[Version]:
    """Up to four later versions, days to months apart, never past the end of 2024."""
    versions, when = [], first.when
    end = datetime(2024, 12, 1, tzinfo=UTC)
    for number in range(2, 2 + stable_hash(page_id, "versions") % 5):
        when += timedelta(minutes=stable_hash(page_id, f"gap{number}") % (200 * 24 * 60) + 1)
        if when >= end:
            break
        versions.append(Version(number, when, authors[stable_hash(page_id, f"by{number}") % len(authors)], ""))
    return versions


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
