"""Confluence over REST (Cloud and Data Center), the one module that uses atlassian-python-api.

What a sync needs from a site, as plain records: spaces with their read permission, pages changed
since a time (CQL ``lastModified``, with bodies), a listing of every page without bodies (ids,
parents, versions, read restrictions: what date queries cannot see), group members and attachments.

* **Paging** follows ``_links.base`` + ``_links.next`` itself: Atlassian's next links leave out the
  context path (``/wiki``), and the library's own paging gets that wrong in one direction or the
  other depending on its version.
* **Retries**: :mod:`pipeline.sources.atlassian_http` (429, 5xx, dropped connections).
* **CQL dates** are minute-precise and read in the sync account's time zone, which is asked from
  the site: a time in UTC would be hours off.
* **Identity**: users are named by ``accountId`` on Cloud and by username on Data Center.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from atlassian.confluence import ConfluenceServer

from core.errors import ConfigurationError, SourceError
from core.settings import ConfluenceSettings
from pipeline.sources.atlassian_http import AtlassianHttp

log = logging.getLogger("wayfinder.sources.confluence")

PAGE_FIELDS = "version,ancestors,space,extensions.position,restrictions.read.restrictions.user,restrictions.read.restrictions.group"
BODY_FIELDS = f"body.storage,metadata.labels,{PAGE_FIELDS}"


@dataclass(frozen=True)
class RemoteSpace:
    key: str
    name: str
    url: str
    reader_users: tuple[str, ...]
    reader_groups: tuple[str, ...]


@dataclass(frozen=True)
class RemotePage:
    page_id: str
    space_key: str
    title: str
    parent_id: str | None
    position: int | None
    version: int
    last_modified: datetime
    url: str
    read_users: tuple[str, ...]
    read_groups: tuple[str, ...]
    labels: tuple[str, ...] = ()
    storage: str | None = None  # the body, when it was asked for


@dataclass(frozen=True)
class RemoteAttachment:
    attachment_id: str
    page_id: str
    filename: str
    media_type: str
    size: int
    download_url: str


def _is_cloud(settings: ConfluenceSettings, url: str) -> bool:
    if settings.cloud is not None:
        return settings.cloud
    return (urlsplit(url).hostname or "").endswith(".atlassian.net")


class ConfluenceRestSource:
    """One Confluence site. Construction does no I/O; every call runs the blocking client in a thread."""

    def __init__(self, settings: ConfluenceSettings, url: str, *, sleep: Callable[[float], None] | None = None) -> None:
        if settings.token is None:
            raise ConfigurationError("WAYFINDER_CONFLUENCE__TOKEN is required to read a Confluence site")
        self._settings = settings
        self._url = url.rstrip("/")
        self.cloud = _is_cloud(settings, self._url)
        token = settings.token.get_secret_value()
        if settings.username:
            credentials: dict[str, Any] = {"username": settings.username, "password": token}
        else:
            credentials = {"token": token}
        # Retries are ours (tenacity, every transient failure); the library's own would retry 429 once more.
        client = ConfluenceServer(self._url, cloud=self.cloud, timeout=settings.timeout_s, retry_with_header=False, **credentials)
        self._http = AtlassianHttp(
            client, product="Confluence", max_attempts=settings.max_attempts, sleep=sleep,
            refused="check WAYFINDER_CONFLUENCE__USERNAME and WAYFINDER_CONFLUENCE__TOKEN, and that the account may read the space",
        )
        self._zone: ZoneInfo | None = None

    @property
    def calls(self) -> int:
        """REST calls made, retries included."""
        return self._http.calls

    # -- what a sync asks ---------------------------------------------------------------------

    async def space(self, key: str) -> RemoteSpace:
        body = await self._get_json(f"rest/api/space/{key}", {"expand": "permissions"})
        if body is None:
            raise SourceError(f"Confluence has no space {key!r}, or the sync account may not read it")
        if "permissions" not in body:
            raise SourceError(
                f"Confluence did not list the permissions of space {key!r} (expand=permissions): the sync account "
                "must be allowed to read them"
            )
        users, groups = [], []
        for permission in body["permissions"]:
            operation = permission.get("operation", {})
            if operation.get("operation") != "read" or operation.get("targetType") != "space":
                continue
            subjects = permission.get("subjects", {})
            users += [self.user_key(u) for u in subjects.get("user", {}).get("results", [])]
            groups += [g["name"] for g in subjects.get("group", {}).get("results", [])]
        links = body.get("_links", {})
        return RemoteSpace(key, body.get("name", key), links.get("base", self._url) + links.get("webui", ""), _unique(users), _unique(groups))

    async def changed_pages(self, space_key: str, since: datetime | None) -> AsyncIterator[list[RemotePage]]:
        """Pages of the space modified at or after ``since`` (all when None), oldest first, with bodies."""
        cql = f'space = "{space_key}" AND type = page'
        if since is not None:
            cql += f' AND lastModified >= "{await self.cql_time(since)}"'
        async for batch in self._paged("rest/api/content/search", {"cql": cql + " ORDER BY lastModified", "expand": BODY_FIELDS}):
            yield [self._page(item) for item in batch]

    async def list_pages(self, space_key: str) -> list[RemotePage]:
        """Every page of the space, without bodies: what a reconcile compares against the store."""
        found: list[RemotePage] = []
        # A stable order, so that paging by offset neither skips nor repeats a page.
        cql = f'space = "{space_key}" AND type = page ORDER BY created, title'
        async for batch in self._paged("rest/api/content/search", {"cql": cql, "expand": PAGE_FIELDS}):
            found.extend(self._page(item) for item in batch)
        return found

    async def page(self, page_id: str) -> RemotePage | None:
        body = await self._get_json(f"rest/api/content/{page_id}", {"expand": BODY_FIELDS})
        return None if body is None else self._page(body)

    async def group_members(self, name: str) -> list[str]:
        members: list[str] = []
        path = "rest/api/group/member" if self.cloud else f"rest/api/group/{quote(name, safe='')}/member"
        params = {"name": name} if self.cloud else {}
        async for batch in self._paged(path, params, missing_ok=True):
            members.extend(self.user_key(user) for user in batch)
        return members

    async def attachments(self, page_id: str) -> list[RemoteAttachment]:
        found: list[RemoteAttachment] = []
        async for batch in self._paged(f"rest/api/content/{page_id}/child/attachment", {}, missing_ok=True):
            for item in batch:
                links = item.get("_links", {})
                extensions = item.get("extensions", {})
                found.append(
                    RemoteAttachment(
                        item["id"],
                        page_id,
                        item["title"],
                        extensions.get("mediaType", "application/octet-stream"),
                        int(extensions.get("fileSize", 0)),
                        links.get("base", self._url) + links.get("download", ""),
                    )
                )
        return found

    async def download(self, attachment: RemoteAttachment) -> bytes:
        data = await asyncio.to_thread(self._http.request, attachment.download_url, {}, absolute=True, as_json=False)
        if data is None:
            raise SourceError(f"attachment {attachment.attachment_id} of page {attachment.page_id} is gone")
        return data

    async def cql_time(self, when: datetime) -> str:
        """``when`` as a CQL date literal in the sync account's time zone, cut to the minute."""
        if self._zone is None:
            me = await self._get_json("rest/api/user/current", {})
            zone_name = (me or {}).get("timeZone") or "UTC"
            try:
                self._zone = ZoneInfo(zone_name)
            except (ZoneInfoNotFoundError, ValueError):
                log.warning("Confluence reports an unknown time zone %r for the sync account; using UTC", zone_name)
                self._zone = ZoneInfo("UTC")
        return when.astimezone(self._zone).strftime("%Y-%m-%d %H:%M")

    def user_key(self, user: dict[str, Any]) -> str:
        """A Confluence user's raw name: ``accountId`` on Cloud, the username on Data Center. Not
        yet an id: the sync makes it one with :func:`core.ids.user_name`."""
        if self.cloud:
            return str(user["accountId"])
        return str(user.get("username") or user.get("userKey") or user["accountId"])

    # -- the wire -----------------------------------------------------------------------------

    def _page(self, item: dict[str, Any]) -> RemotePage:
        # Where a page sits and who it is restricted to decide who may see it: an answer without
        # them is refused, never read as "a top-level page without restrictions" (A10).
        missing = [part for part in ("ancestors", "restrictions") if part not in item]
        read = (item.get("restrictions") or {}).get("read", {}).get("restrictions", {})
        missing += [f"restrictions.read.restrictions.{kind}" for kind in ("user", "group") if "restrictions" in item and kind not in read]
        if missing:
            raise SourceError(f"Confluence sent page {item.get('id', '?')} without {', '.join(missing)}: refusing to guess who may see it")
        try:
            ancestors = item["ancestors"]
            restrictions = read
            position = (item.get("extensions") or {}).get("position")
            links = item.get("_links", {})
            return RemotePage(
                page_id=str(item["id"]),
                space_key=item["space"]["key"],
                title=item["title"],
                parent_id=str(ancestors[-1]["id"]) if ancestors else None,
                position=position if isinstance(position, int) else None,
                version=int(item["version"]["number"]),
                last_modified=_parse_time(item["version"]["when"]),
                url=links.get("base", self._url) + links.get("webui", ""),
                read_users=_unique(self.user_key(u) for u in restrictions.get("user", {}).get("results", [])),
                read_groups=_unique(g["name"] for g in restrictions.get("group", {}).get("results", [])),
                labels=tuple(label["name"] for label in item.get("metadata", {}).get("labels", {}).get("results", [])),
                storage=item["body"]["storage"]["value"] if "body" in item else None,
            )
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise SourceError(f"Confluence sent a page without {exc!s} (page {item.get('id', '?')})") from exc

    async def _paged(self, path: str, params: dict[str, Any], *, missing_ok: bool = False) -> AsyncIterator[list[dict[str, Any]]]:
        body = await self._get_json(path, {**params, "limit": self._settings.page_size, "start": 0})
        while body is not None:
            yield body.get("results", [])
            links = body.get("_links", {})
            following = links.get("next")
            if not following:
                return
            base = links.get("base") or self._url
            body = await asyncio.to_thread(self._json, base + following, {}, True)
        if not missing_ok:
            raise SourceError(f"Confluence answered 404 for {path}")

    async def _get_json(self, path: str, params: dict[str, Any]) -> dict[str, Any] | None:
        return await asyncio.to_thread(self._json, path, params, False)

    def _json(self, path: str, params: dict[str, Any], absolute: bool) -> dict[str, Any] | None:
        return self._http.json(path, params, absolute=absolute)


def _parse_time(text: str) -> datetime:
    when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _unique(values) -> tuple[str, ...]:
    return tuple(sorted(set(values)))
