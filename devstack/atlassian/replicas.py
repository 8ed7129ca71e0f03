"""A site large enough for filtered search to matter (``make bench-semantic``): the Hive space's
pages copied into synthetic spaces with permissions of their own, and readers who see a small,
known share of it.

Seeded after :func:`devstack.atlassian.hive.seed_hive`, beside the Hive space. Each of
``REPLICAS`` copies of the Hive tree is split into ``AREAS`` spaces (``R01A`` … ``R17H``): the top
pages are dealt to the areas by a hash of copy and page (so each copy's areas hold different
pages), each area keeps whole subtrees, and each is readable by its own group
(``r01a-readers``). In an area of more than one subtree the largest is restricted to a second
group (``r01a-leads``), so visibility inside a space depends on page restrictions too, as on a
real site. Copies get new page ids (``copy × 10¹⁰ + the Hive id``) and no attachments.

Each reader of ``READERS`` joins the readers group of areas until the text they may see is the
share of the whole site's text they are meant to see; the first area of the widest reader also
adds its leads group. The shares are planned on text length; the bench measures the real share
in chunks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pathlib import Path

from core.models import Page
from devstack.atlassian.export import HiveExportSource
from devstack.atlassian.hive import SPACE_KEY as HIVE
from devstack.atlassian.hive import SYNC_LOGIN, account_id
from devstack.atlassian.site import Site, User
from devstack.atlassian.storage import to_storage

REPLICAS = 17  # with the Hive space itself, 18 copies of its 1,197 chunks: more than 20,000
AREAS = 8
ID_STRIDE = 10**10  # above every Hive page id
#: login → share of the site's text the reader may see
READERS = {"reader-5": 0.05, "reader-1": 0.01, "reader-03": 0.003}
_WHEN = datetime(2024, 6, 1, tzinfo=UTC)


@dataclass
class _Area:
    key: str
    roots: list[str] = field(default_factory=list)
    size: int = 0  # characters of Markdown in its subtrees
    restricted_root: str | None = None
    restricted_size: int = 0


@dataclass(frozen=True)
class ReplicaSite:
    spaces: list[str]  # the areas, in order
    readers: dict[str, list[str]]  # login → the areas whose readers group they joined
    planned_share: dict[str, float]  # login → share of the site's text they may see


async def seed_replicas(site: Site, corpus_dir: Path) -> ReplicaSite:
    """Add the copies, their groups and the readers to a site the Hive space was seeded into."""
    pages = await HiveExportSource(corpus_dir).pages(HIVE)
    titles = {page.page_id: page.title for page in pages}
    sizes = _subtree_sizes(pages)
    roots = [page.page_id for page in pages if page.parent_id is None]
    author = account_id("hive-admin")
    areas: list[_Area] = []
    for copy in range(1, REPLICAS + 1):
        dealt = [_Area(f"R{copy:02d}{chr(ord('A') + n)}") for n in range(AREAS)]
        for root in sorted(roots, key=lambda r: (-sizes[r], _hash(f"{copy}:{r}"))):  # largest first, to the lightest area
            area = min(dealt, key=lambda a: (a.size, _hash(f"{copy}:{a.key}")))
            area.roots.append(root)
            area.size += sizes[root]
        area_of = {}
        for area in dealt:
            readers, leads = f"{area.key.lower()}-readers", f"{area.key.lower()}-leads"
            site.add_group(readers)
            site.add_group(leads)
            site.add_space(area.key, f"Hive copy {copy}, area {area.key[-1]}", readers_users={account_id(SYNC_LOGIN)}, readers_groups={readers})
            area_of.update(dict.fromkeys(area.roots, area))
            if len(area.roots) > 1:
                area.restricted_root = max(area.roots, key=lambda r: (sizes[r], r))
                area.restricted_size = sizes[area.restricted_root]
        top: dict[str, str] = {}
        for page in pages:  # parents come before children
            top[page.page_id] = root = page.page_id if page.parent_id is None else top[page.parent_id]
            area = area_of[root]
            site.create_page(
                area.key,
                page.title,
                to_storage(page.markdown, page_id=page.page_id, titles=titles, space_key=area.key),
                parent_id=None if page.parent_id is None else _copy_id(copy, page.parent_id),
                page_id=_copy_id(copy, page.page_id),
                by=author,
                at=_WHEN,
                labels=[f"copy-{copy}"],
            )
        for area in dealt:
            if area.restricted_root is not None:
                site.set_read_restrictions(_copy_id(copy, area.restricted_root), users={account_id(SYNC_LOGIN)}, groups={f"{area.key.lower()}-leads"})
        areas += dealt
    total = sum(sizes[r] for r in roots) * (REPLICAS + 1)
    readers = _readers(site, areas, total)
    planned = {
        login: sum(a.size if n == 0 and login == _widest() else a.size - a.restricted_size for n, a in enumerate(_chosen(areas, keys))) / total
        for login, keys in readers.items()
    }
    return ReplicaSite([a.key for a in areas], readers, planned)


def _readers(site: Site, areas: Sequence[_Area], total: int) -> dict[str, list[str]]:
    """Each reader joins areas, best fit first, until they may see their share of ``total``."""
    chosen: dict[str, list[str]] = {}
    taken: set[str] = set()
    for login, share in READERS.items():
        site.add_user(User(account_id=account_id(login), username=login, display_name=login, email=f"{login}@example.com", token=f"emulator-token-{login}", time_zone="UTC"))
        remaining = share * total
        keys: list[str] = []
        widest = login == _widest()
        while remaining > 0.1 * share * total:
            free = sorted((a for a in areas if a.key not in taken), key=lambda a: _hash(f"{login}:{a.key}"))
            seen = {a.key: a.size if widest and not keys else a.size - a.restricted_size for a in free}
            fitting = [a for a in free if seen[a.key] <= 1.1 * remaining]
            if not fitting:
                break
            area = max(fitting, key=lambda a: seen[a.key])
            site.add_member(f"{area.key.lower()}-readers", account_id(login))
            if widest and not keys:
                site.add_member(f"{area.key.lower()}-leads", account_id(login))
            keys.append(area.key)
            taken.add(area.key)
            remaining -= seen[area.key]
        chosen[login] = keys
    return chosen


def _widest() -> str:
    return max(READERS, key=lambda login: READERS[login])


def _chosen(areas: Sequence[_Area], keys: Sequence[str]) -> list[_Area]:
    by_key = {a.key: a for a in areas}
    return [by_key[k] for k in keys]


def _subtree_sizes(pages: Sequence[Page]) -> dict[str, int]:
    """Page id → characters of Markdown in the page and everything below it."""
    sizes = {page.page_id: len(page.markdown) for page in pages}
    for page in reversed(pages):  # children come after their parents
        if page.parent_id is not None:
            sizes[page.parent_id] += sizes[page.page_id]
    return sizes


def _copy_id(copy: int, page_id: str) -> str:
    return str(copy * ID_STRIDE + int(page_id))


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
