"""Confluence over REST (Cloud and Data Center), the one module that uses atlassian-python-api.

What a sync needs from a site, as plain records: spaces with their read permission, pages changed
since a time (CQL ``lastModified``, with bodies), a listing of every page without bodies (ids,
parents, versions, read restrictions: what date queries cannot see), group members and attachments.

Each deployment is read where it answers (docs/connecting.md has the table):

* **Cloud** removed the v1 space, page and attachment reads and the group reads by name: spaces,
  space permissions, single pages, ancestors and attachments come from v2, group members by group
  id; CQL search, view restrictions and the current user stay on v1, which Cloud keeps.
* **Data Center 9.1 and later** list space permissions at ``space/{key}/permissions``;
  **before 9.0** only the JSON-RPC remote API does. Everything else is v1 on both.

* **Paging** follows ``_links.next`` itself: v1's next links are relative to ``_links.base`` and
  leave out the context path (``/wiki``), v2's start from the host's root, and the library's own
  paging gets v1 wrong in one direction or the other depending on its version. Cloud's searches
  page by cursor alone.
* **Retries**: :mod:`pipeline.sources.atlassian_http` (429, 5xx, dropped connections).
* **CQL dates** are minute-precise and read in the sync account's time zone, which is asked from
  the site: a time in UTC would be hours off.
* **Identity**: users are named by ``accountId`` on Cloud and by username on Data Center.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import quote, urljoin
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


Deployment = Literal["cloud", "datacenter-9", "datacenter-8"]


class ConfluenceRestSource:
    """One Confluence site. Construction does no I/O; every call runs the blocking client in a
    thread. The first call finds out which deployment the site is, unless the settings say."""

    def __init__(self, settings: ConfluenceSettings, url: str, *, sleep: Callable[[float], None] | None = None) -> None:
        if settings.token is None:
            raise ConfigurationError("WAYFINDER_CONFLUENCE__TOKEN is required to read a Confluence site")
        self._settings = settings
        self._url = url.rstrip("/")
        self._deployment: Deployment | None = settings.deployment
        token = settings.token.get_secret_value()
        if settings.username:
            credentials: dict[str, Any] = {"username": settings.username, "password": token}
        else:
            credentials = {"token": token}
        # Retries are ours (tenacity, every transient failure); the library's own would retry 429
        # once more. Paths are ours too, so the client's own Cloud flag changes nothing we call.
        client = ConfluenceServer(self._url, timeout=settings.timeout_s, retry_with_header=False, **credentials)
        self._http = AtlassianHttp(
            client, product="Confluence", max_attempts=settings.max_attempts, sleep=sleep,
            refused="check WAYFINDER_CONFLUENCE__USERNAME and WAYFINDER_CONFLUENCE__TOKEN, and that the account may read the space",
        )
        self._zone: ZoneInfo | None = None
        self._group_ids: dict[str, str] = {}  # Cloud: group name -> id, as restrictions and the group listing show them
        self._groups_listed = False  # Cloud: the site's group listing was read into _group_ids
        self._space_keys: dict[str, str] = {}  # Cloud: space id -> key
        self._usernames: dict[str, str] = {}  # Data Center 9: user key -> username
        self._parents: dict[str, dict[str, tuple[str | None, str | None]]] = {}  # Cloud: space -> page -> v2's parent (id, type)

    @property
    def calls(self) -> int:
        """REST calls made, retries included."""
        return self._http.calls

    @property
    def cloud(self) -> bool:
        return self._deployment == "cloud"

    async def deployment(self) -> Deployment:
        """Cloud, Data Center 9.1 or later, or Data Center before 9.0: the setting, or else what
        the site says. Only Cloud answers ``settings/systemInfo``; a Data Center site's release
        is in its application links manifest."""
        if self._deployment is None:
            self._deployment = await self._detect()
            log.info("Confluence at %s is %s", self._url, self._deployment)
        return self._deployment

    # -- what a sync asks ---------------------------------------------------------------------

    async def space(self, key: str) -> RemoteSpace:
        """A space and who may read it: from v2 on Cloud (the v1 space reads are gone there), the
        space permissions endpoint on Data Center 9.1 and later, JSON-RPC before 9.0."""
        deployment = await self.deployment()
        if deployment == "cloud":
            body = await self._get_json("api/v2/spaces", {"keys": key})
            found = next((s for s in (body or {}).get("results", []) if s.get("key") == key), None)
            if found is None:
                raise SourceError(f"Confluence has no space {key!r}, or the sync account may not read it")
            self._space_keys[str(found["id"])] = key
            users, groups = await self._cloud_space_readers(str(found["id"]), key)
            base = (body or {}).get("_links", {}).get("base") or self._url
            return RemoteSpace(key, found.get("name", key), base + found.get("_links", {}).get("webui", ""), _unique(users), _unique(groups))
        body = await self._get_json(f"rest/api/space/{quote(key, safe='')}", {})
        if body is None:
            raise SourceError(f"Confluence has no space {key!r}, or the sync account may not read it")
        if deployment == "datacenter-9":
            users, groups = await self._rest_space_readers(key)
        else:
            users, groups = await self._rpc_space_readers(key)
        links = body.get("_links", {})
        return RemoteSpace(key, body.get("name", key), links.get("base", self._url) + links.get("webui", ""), _unique(users), _unique(groups))

    async def changed_pages(self, space_key: str, since: datetime | None) -> AsyncIterator[list[RemotePage]]:
        """Pages of the space modified at or after ``since`` (all when None), oldest first, with bodies."""
        await self.deployment()
        cql = f'space = "{space_key}" AND type = page'
        if since is not None:
            cql += f' AND lastModified >= "{await self.cql_time(since)}"'
        async for batch in self._paged("rest/api/content/search", {"cql": cql + " ORDER BY lastModified", "expand": BODY_FIELDS}):
            yield await self._placed(space_key, [self._page(item) for item in batch])

    async def list_pages(self, space_key: str) -> list[RemotePage]:
        """Every page of the space, without bodies: what a reconcile compares against the store."""
        await self.deployment()
        found: list[RemotePage] = []
        # A stable order, so that paging by offset neither skips nor repeats a page.
        cql = f'space = "{space_key}" AND type = page ORDER BY created, title'
        async for batch in self._paged("rest/api/content/search", {"cql": cql, "expand": PAGE_FIELDS}):
            found.extend(self._page(item) for item in batch)
        return await self._placed(space_key, found)

    async def page(self, page_id: str) -> RemotePage | None:
        if await self.deployment() == "cloud":
            return await self._cloud_page(page_id)
        body = await self._get_json(f"rest/api/content/{page_id}", {"expand": BODY_FIELDS})
        return None if body is None else self._page(body)

    async def group_members(self, name: str) -> list[str]:
        members: list[str] = []
        if await self.deployment() == "cloud":
            # Cloud reads a group's members by its id only: the reads by name answer 410.
            group_id = self._group_ids.get(name) or await self._cloud_group_id(name)
            if group_id is None:
                return []
            path = f"rest/api/group/{quote(group_id, safe='')}/membersByGroupId"
        else:
            path = f"rest/api/group/{quote(name, safe='')}/member"
        async for batch in self._paged(path, {}, missing_ok=True):
            members.extend(self.user_key(user) for user in batch)
        return members

    async def attachments(self, page_id: str) -> list[RemoteAttachment]:
        found: list[RemoteAttachment] = []
        if await self.deployment() == "cloud":
            async for batch in self._v2_paged(f"api/v2/pages/{page_id}/attachments", {"limit": self._settings.page_size}, missing_ok=True):
                for item, base in batch:
                    found.append(
                        RemoteAttachment(
                            str(item["id"]), page_id, item["title"], item.get("mediaType") or "application/octet-stream",
                            int(item.get("fileSize") or 0), base + item.get("downloadLink", ""),
                        )
                    )
            return found
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

    # -- the deployments ------------------------------------------------------------------------

    async def _detect(self) -> Deployment:
        try:
            if await self._get_json("rest/api/settings/systemInfo", {}) is not None:
                return "cloud"
        except SourceError:
            pass  # refused (a token without that scope): the manifest still tells
        raw = await asyncio.to_thread(self._http.request, "rest/applinks/1.0/manifest", {}, absolute=False, as_json=False)
        text = (raw or b"").decode(errors="replace")
        found = re.search(r'"version"\s*:\s*"([^"]+)"|<version>([^<]+)</version>', text)
        release = _release(found[1] or found[2]) if found else None
        if release is None:
            raise SourceError(
                "could not tell which Confluence this is: it answers neither settings/systemInfo (Cloud) nor its application "
                "links manifest with a version (Data Center); set WAYFINDER_CONFLUENCE__DEPLOYMENT"
            )
        if release >= (1000, 0):
            return "cloud"  # a Cloud site behind a domain of its own
        if release >= (9, 1):
            return "datacenter-9"
        if release < (9, 0):
            return "datacenter-8"
        raise SourceError(
            f"Confluence {release[0]}.{release[1]} lists space permissions neither over REST (9.1 and later) nor JSON-RPC "
            "(before 9.0): upgrade the site to 9.1 or later"
        )

    async def _cloud_space_readers(self, space_id: str, key: str) -> tuple[list[str], list[str]]:
        users: list[str] = []
        groups: list[str] = []
        others: set[str] = set()
        async for batch in self._v2_paged(f"api/v2/spaces/{space_id}/permissions", {"limit": self._settings.page_size}):
            for row, _ in batch:
                operation, principal = row.get("operation") or {}, row.get("principal") or {}
                if operation.get("key") != "read" or operation.get("targetType") != "space":
                    continue
                if principal.get("type") == "user" and principal.get("id"):
                    users.append(str(principal["id"]))
                elif principal.get("type") == "group" and principal.get("id"):
                    groups.append(await self._cloud_group_name(str(principal["id"])))
                else:
                    others.add(str(principal.get("type")))
        if others:
            # Read by no one here rather than guessed: the readers Wayfinder knows still read.
            log.warning("space %s grants read to principals of type %s, which Wayfinder does not map; they are left out", key, ", ".join(sorted(others)))
        return users, groups

    async def _rest_space_readers(self, key: str) -> tuple[list[str], list[str]]:
        rows = await self._get_json(f"rest/api/space/{quote(key, safe='')}/permissions", {})
        if not isinstance(rows, list):
            raise SourceError(f"Confluence did not list the permissions of space {key!r}: the sync account must administer the space")
        users, groups = [], []
        for row in rows:
            operation, subject = row.get("operation") or {}, row.get("subject") or {}
            if operation.get("operationKey") != "read" or operation.get("targetType") != "space":
                continue
            if subject.get("type") == "group" and subject.get("name"):
                groups.append(str(subject["name"]))
            elif subject.get("type") == "user" and (subject.get("userKey") or subject.get("username")):
                users.append(str(subject.get("username") or await self._username(str(subject["userKey"]))))
        return users, groups

    async def _rpc_space_readers(self, key: str) -> tuple[list[str], list[str]]:
        sets = await asyncio.to_thread(
            self._http.request, "rpc/json-rpc/confluenceservice-v2/getSpacePermissionSets", {}, absolute=False, as_json=True, post=[key]
        )
        if isinstance(sets, dict) and "error" in sets:
            message = (sets["error"] or {}).get("message", "")
            raise SourceError(f"Confluence did not list the permissions of space {key!r} over JSON-RPC ({message}): the sync account must administer the space")
        if not isinstance(sets, list):
            raise SourceError(f"Confluence did not list the permissions of space {key!r} over JSON-RPC: is its remote API reachable?")
        users, groups = [], []
        for permission in (p for s in sets if s.get("type") == "VIEWSPACE" for p in s.get("spacePermissions", [])):
            if permission.get("groupName"):
                groups.append(str(permission["groupName"]))
            elif permission.get("userName"):
                users.append(str(permission["userName"]))
            # neither: anonymous access, which Wayfinder does not grant
        return users, groups

    async def _username(self, user_key: str) -> str:
        if user_key not in self._usernames:
            found = await self._get_json("rest/api/user", {"key": user_key})
            if found is None:
                raise SourceError(f"Confluence names user key {user_key!r} in a space permission but has no such user")
            self._usernames[user_key] = self.user_key(found)
        return self._usernames[user_key]

    async def _cloud_page(self, page_id: str) -> RemotePage | None:
        """One page from v2 (body, labels, place: its parent by id and type) and its view
        restrictions from the v1 read Cloud keeps: what a CQL answer carries at once."""
        body = await self._get_json(f"api/v2/pages/{page_id}", {"body-format": "storage", "include-labels": "true"})
        if body is None or body.get("status") != "current":
            return None  # gone, or trashed, archived or a draft: what the CQL listing does not list either
        if "parentId" not in body:
            raise SourceError(f"Confluence sent page {page_id} without parentId: refusing to guess who may see it")
        restrictions = await self._get_json(f"rest/api/content/{page_id}/restriction/byOperation/read", {})
        if restrictions is None:
            return None  # deleted in between
        parent = [{"id": str(body["parentId"]), "type": body.get("parentType") or "page"}] if body["parentId"] else []
        links = body.get("_links") or {}
        version = body.get("version") or {}
        item = {
            "id": body.get("id"),
            "title": body.get("title"),
            "space": {"key": await self._space_key(str(body.get("spaceId", "")))},
            "ancestors": parent,
            "extensions": {"position": body.get("position")},
            "version": {"number": version.get("number"), "when": version.get("createdAt")},
            "restrictions": {"read": restrictions},
            "metadata": {"labels": {"results": (body.get("labels") or {}).get("results", [])}},
            "_links": {**links, "base": links.get("base") or self._url},
            "body": {"storage": {"value": ((body.get("body") or {}).get("storage") or {}).get("value", "")}},
        }
        return self._page(item)

    async def _placed(self, space_key: str, pages: list[RemotePage]) -> list[RemotePage]:
        """On Cloud, each page's parent checked against v2's (id and type): should v1 ever leave a
        folder out of a chain, a page inside it would otherwise hang under the page above the
        folder, without the folder's restrictions. Where they differ, v2 is asked again (a move in
        between); a folder it names is kept (the sync holds no folder: the page stays out), and a
        page it names leaves the page out of this run. v2 lists a space's pages with their
        parents; a page it has not listed (new since) is asked for alone."""
        if not self.cloud or not pages:
            return pages
        parents = self._parents.get(space_key)
        if parents is None:
            parents = self._parents[space_key] = {}
            space_id = next((i for i, key in self._space_keys.items() if key == space_key), None) or await self._space_id(space_key)
            async for batch in self._v2_paged(f"api/v2/spaces/{space_id}/pages", {"limit": self._settings.page_size, "status": "current"}):
                for row, _ in batch:
                    parents[str(row["id"])] = (str(row["parentId"]) if row.get("parentId") else None, row.get("parentType"))
        placed = []
        for page in pages:
            if parents.get(page.page_id, (page.parent_id,))[0] != page.parent_id:
                del parents[page.page_id]  # moved since the listing, or v1 and v2 disagree: ask v2 again
            if page.page_id not in parents:
                alone = await self._get_json(f"api/v2/pages/{page.page_id}", {})
                if alone is None or "parentId" not in alone:
                    continue  # gone since: the next listing says so
                parents[page.page_id] = (str(alone["parentId"]) if alone["parentId"] else None, alone.get("parentType"))
            parent_id, parent_type = parents[page.page_id]
            if parent_id != page.parent_id:
                if parent_type in (None, "page"):
                    # Two pages claim it, and either may inherit less: neither is trusted this run.
                    log.warning("page %s: v1 places it under %s, v2 under %s; left out until they agree", page.page_id, page.parent_id, parent_id)
                    continue
                log.warning("page %s: v1 places it under %s, v2 under %s %s; v2's parent is kept", page.page_id, page.parent_id, parent_type, parent_id)
                page = replace(page, parent_id=parent_id)
            placed.append(page)
        return placed

    async def _space_id(self, space_key: str) -> str:
        body = await self._get_json("api/v2/spaces", {"keys": space_key})
        found = next((s for s in (body or {}).get("results", []) if s.get("key") == space_key), None)
        if found is None:
            raise SourceError(f"Confluence has no space {space_key!r}, or the sync account may not read it")
        self._space_keys[str(found["id"])] = space_key
        return str(found["id"])

    async def _space_key(self, space_id: str) -> str:
        if space_id not in self._space_keys:
            found = await self._get_json(f"api/v2/spaces/{space_id}", {})
            if found is None:
                raise SourceError(f"Confluence sent a page of space {space_id}, which the sync account may not read")
            self._space_keys[space_id] = str(found["key"])
        return self._space_keys[space_id]

    async def _cloud_group_name(self, group_id: str) -> str:
        known = next((name for name, known_id in self._group_ids.items() if known_id == group_id), None)
        if known is not None:
            return known
        found = await self._get_json("rest/api/group/by-id", {"id": group_id})
        if found is None:
            raise SourceError(f"Confluence names group {group_id} in a space permission but has no such group")
        self._group_ids[str(found["name"])] = group_id
        return str(found["name"])

    async def _cloud_group_id(self, name: str) -> str | None:
        """A group's id, from the site's group listing (a group no page or permission showed yet),
        read once per source."""
        if not self._groups_listed:
            self._groups_listed = True
            async for batch in self._paged("rest/api/group", {}, missing_ok=True):
                for group in batch:
                    if group.get("name") and group.get("id"):
                        self._group_ids.setdefault(str(group["name"]), str(group["id"]))
        return self._group_ids.get(name)

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
            if ancestors and ancestors[-1].get("type", "page") != "page":
                # A Cloud folder (or whiteboard) holds it: Wayfinder keeps no such node, so the
                # sync leaves the page out with what lies under it rather than lose the folder's
                # restrictions, which its pages inherit.
                log.warning("page %s sits in a %s (%s), which is not synced: it is left out", item.get("id"), ancestors[-1]["type"], ancestors[-1].get("id"))
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
                read_groups=_unique(self._group(g) for g in restrictions.get("group", {}).get("results", [])),
                labels=tuple(label["name"] for label in item.get("metadata", {}).get("labels", {}).get("results", [])),
                storage=item["body"]["storage"]["value"] if "body" in item else None,
            )
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise SourceError(f"Confluence sent a page without {exc!s} (page {item.get('id', '?')})") from exc

    def _group(self, group: dict[str, Any]) -> str:
        """A restriction's group by name; its id (Cloud's) kept to read its members."""
        if group.get("id"):
            self._group_ids[str(group["name"])] = str(group["id"])
        return str(group["name"])

    async def _v2_paged(self, path: str, params: dict[str, Any], *, missing_ok: bool = False) -> AsyncIterator[list[tuple[dict[str, Any], str]]]:
        """The results of a v2 listing, each with its ``_links.base``, following the cursor in
        ``_links.next``: a path from the host's root (``/wiki/api/v2/…``), unlike v1's."""
        body = await self._get_json(path, params)
        if body is None and not missing_ok:
            raise SourceError(f"Confluence answered 404 for {path}")
        while body is not None:
            links = body.get("_links", {})
            base = links.get("base") or self._url
            yield [(item, base) for item in body.get("results", [])]
            following = links.get("next")
            if not following:
                return
            body = await asyncio.to_thread(self._json, urljoin(base, following), {}, True)
            if body is None and not missing_ok:
                raise SourceError(f"Confluence answered 404 in the middle of {path}")

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


def _release(version: str) -> tuple[int, int] | None:
    parts = re.findall(r"\d+", version)
    return (int(parts[0]), int(parts[1]) if len(parts) > 1 else 0) if parts else None


def _unique(values) -> tuple[str, ...]:
    return tuple(sorted(set(values)))
