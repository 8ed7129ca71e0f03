"""Neo4j store of the trees: the only module that imports the neo4j driver."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import neo4j
from neo4j import AsyncGraphDatabase

from core.errors import ConfigurationError, NavigatorUnavailable
from core.models import Image, Issue, Page, Project, Space
from core.settings import Neo4jSettings
from core.telemetry import span
from core.text import title_key
from navigator import cypher
from navigator.base import ChildPage, Crumb, PageContent, PageSummary

WRITE_BATCH = 200
IMAGE_BATCH = 8  # images carry their bytes: small batches keep each transaction small


def answers(settings: Neo4jSettings) -> bool:
    """Health probe for the local stack: does the database answer a query with our password?

    Raises ConfigurationError when the password is refused (waiting will not help). A plain
    auto-commit query, not execute_query, which retries with backoff for 30 s on its own.
    """
    auth = (settings.user, settings.password.get_secret_value())
    try:
        with neo4j.GraphDatabase.driver(settings.uri, auth=auth, connection_timeout=2.0) as driver:
            with driver.session(database=settings.database) as session:
                session.run("RETURN 1").consume()
    except neo4j.exceptions.AuthError as exc:
        raise ConfigurationError(f"Neo4j at {settings.uri} refused the configured password") from exc
    except (neo4j.exceptions.DriverError, neo4j.exceptions.Neo4jError, OSError):
        return False
    return True


class Neo4jStore:
    def __init__(self, settings: Neo4jSettings) -> None:
        self._settings = settings
        self._driver: neo4j.AsyncDriver | None = None

    async def __aenter__(self) -> Neo4jStore:
        self._driver = AsyncGraphDatabase.driver(
            self._settings.uri,
            auth=(self._settings.user, self._settings.password.get_secret_value()),
            connection_timeout=5,
            max_transaction_retry_time=5,
            # "label/property does not exist yet" before the first image or link is written: noise.
            notifications_disabled_classifications=[neo4j.NotificationDisabledClassification.UNRECOGNIZED],
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._driver is not None:
            await self._driver.close()
            self._driver = None

    @asynccontextmanager
    async def _translated(self) -> AsyncIterator[neo4j.AsyncDriver]:
        if self._driver is None:
            raise ConfigurationError("Neo4jStore used outside 'async with'")
        try:
            async with asyncio.timeout(self._settings.query_timeout_s):
                yield self._driver
        except TimeoutError as exc:
            raise NavigatorUnavailable(f"Neo4j did not answer within {self._settings.query_timeout_s}s") from exc
        except neo4j.exceptions.Neo4jError as exc:
            raise NavigatorUnavailable(f"Neo4j refused the query: {exc.code}") from exc
        except (neo4j.exceptions.DriverError, OSError) as exc:
            raise NavigatorUnavailable(f"Neo4j is unreachable at {self._settings.uri}: {type(exc).__name__}") from exc

    async def _read(self, query: str, **params: Any) -> list[dict[str, Any]]:
        with span("neo4j.read"):
            async with self._translated() as driver:
                result = await driver.execute_query(
                    query, params, database_=self._settings.database, routing_=neo4j.RoutingControl.READ
                )
                return [record.data() for record in result.records]

    async def _write(self, query: str, **params: Any) -> None:
        async with self._translated() as driver:
            await driver.execute_query(query, params, database_=self._settings.database)

    async def _write_batches(self, query: str, name: str, rows: Sequence[dict[str, Any]], size: int = WRITE_BATCH) -> None:
        """``query`` once per ``size`` rows, the rows passed as parameter ``name``."""
        for start in range(0, len(rows), size):
            await self._write(query, **{name: rows[start : start + size]})

    async def ensure_schema(self) -> None:
        for statement in cypher.SCHEMA:
            await self._write(statement)

    async def sync_space(self, space: Space, pages: Sequence[Page]) -> int:
        """Write the pages that changed since the last sync (text, title, place in the tree,
        links), re-link pages whose links point at a page written now (a link to a page not held
        yet was dropped), prune the pages the source no longer reports. Returns the pages written."""
        await self.ensure_schema()
        await self._write(cypher.MERGE_SPACE, id=space.id, key=space.key, name=space.name, url=space.url)
        rows = [
            {
                "id": page.id,
                "space_id": space.id,
                "title": page.title,
                "title_key": title_key(page.title),
                "url": page.url,
                "markdown": page.markdown,
                "position": page.position,
                "parent_id": f"page:{page.parent_id}" if page.parent_id else None,
                "links": [f"page:{target}" for target in page.links],
                "labels": list(page.labels),
                "updated_at": page.updated_at.astimezone(UTC).isoformat() if page.updated_at else None,
            }
            for page in pages
        ]
        for row in rows:
            row["digest"] = hashlib.sha256(json.dumps(row, sort_keys=True).encode()).hexdigest()
        held = {record["id"]: record["digest"] for record in await self._read(cypher.PAGE_DIGESTS, space_id=space.id)}
        changed = [row for row in rows if held.get(row["id"]) != row["digest"]]  # parents first, as given
        written = {row["id"] for row in changed}
        relinked = [row for row in rows if row["id"] in written or written.intersection(row["links"])]
        await self._write_batches(cypher.MERGE_PAGES, "pages", changed)
        await self._write_batches(cypher.SET_LINKS, "pages", relinked)  # every page of the space exists by now
        await self._write(cypher.PRUNE_PAGES, space_id=space.id, keep=[row["id"] for row in rows])
        return len(changed)

    async def sync_project(self, project: Project, issues: Sequence[Issue]) -> int:
        """Make the stored issue tree of ``project`` equal to ``issues`` (parents before children;
        an issue whose parent is not among them sits at the project's top). Returns the issues
        written."""
        await self.ensure_schema()
        await self._write(cypher.MERGE_PROJECT, id=project.id, key=project.key, name=project.name, url=project.url)
        held_keys = {issue.key for issue in issues}
        rows = [
            {
                "id": issue.id,
                "key": issue.key,
                "space_id": project.id,
                "title": issue.summary,
                "title_key": title_key(issue.summary),
                "url": issue.url,
                "markdown": issue.markdown,
                "issue_type": issue.issue_type,
                "level": issue.hierarchy_level,
                "position": issue.position,
                "parent_id": f"issue:{issue.parent_key}" if issue.parent_key in held_keys else None,
                "labels": list(issue.labels),
                "updated_at": issue.updated_at.astimezone(UTC).isoformat() if issue.updated_at else None,
                "links": [f"issue:{key}" for key in issue.links],
                "comments": [
                    {
                        "id": c.id, "title": c.title, "url": c.url, "markdown": c.markdown,
                        "updated_at": c.updated_at.astimezone(UTC).isoformat() if c.updated_at else None,
                    }
                    for c in issue.comments
                ],
            }
            for issue in issues
        ]
        for row in rows:
            row["digest"] = hashlib.sha256(json.dumps(row, sort_keys=True).encode()).hexdigest()
        held = {record["id"]: record["digest"] for record in await self._read(cypher.ISSUE_DIGESTS, project_id=project.id)}
        changed = [row for row in rows if held.get(row["id"]) != row["digest"]]
        await self._write_batches(cypher.MERGE_ISSUES, "issues", changed)
        await self._write_batches(cypher.SET_COMMENTS, "issues", changed)
        written = {row["id"] for row in changed}
        relinked = [row for row in rows if row["id"] in written or written.intersection(row["links"])]
        await self._write_batches(cypher.SET_ISSUE_LINKS, "issues", relinked)  # every issue of the project exists by now
        await self._write(cypher.PRUNE_ISSUES, project_id=project.id, keep=[row["id"] for row in rows])
        return len(changed)

    async def sync_mentions(self, space: Space, mentions: Mapping[str, Sequence[str]]) -> int:
        """Make the issues each page of ``space`` mentions those of ``mentions`` (page id → issue
        ids; a page not in it mentions none). Returns the pages whose mentions were rewritten."""
        held = {row["id"]: sorted(row["issues"]) for row in await self._read(cypher.MENTIONS, space_id=space.id)}
        pages = set(held) | set(mentions)
        changed = [{"id": page, "issues": sorted(mentions.get(page, ()))} for page in sorted(pages) if held.get(page, []) != sorted(mentions.get(page, ()))]
        await self._write_batches(cypher.SET_MENTIONS, "pages", changed)
        return len(changed)

    async def sync_images(self, space: Space, images: Sequence[Image]) -> None:
        """Write only the images that are new or changed (bytes or alt text); drop the rest."""
        await self.ensure_schema()
        held = {row["id"]: (row["sha256"], row["alt_text"], row["page_id"]) for row in await self._read(cypher.IMAGE_HASHES, space_id=space.id)}
        rows = [
            {
                "id": image.id,
                "page": f"page:{image.page_id}",
                "page_id": image.page_id,
                "space_id": space.id,
                "filename": image.filename,
                "media_type": image.media_type,
                "alt_text": image.alt_text,
                "sha256": image.sha256,
                "data": image.data,
            }
            for image in images
            if held.get(image.id) != (image.sha256, image.alt_text, image.page_id)
        ]
        await self._write_batches(cypher.MERGE_IMAGES, "images", rows, IMAGE_BATCH)
        await self._write(cypher.PRUNE_IMAGES, space_id=space.id, keep=[image.id for image in images])

    async def image_page(self, image_id: str) -> str | None:
        rows = await self._read(cypher.IMAGE_PAGE, id=image_id)
        return f"page:{rows[0]['page_id']}" if rows else None

    async def image(self, image_id: str) -> Image | None:
        rows = await self._read(cypher.IMAGE, id=image_id)
        if not rows:
            return None
        row = rows[0]
        return Image(
            attachment_id=row["id"].removeprefix("image:"),
            page_id=row["page_id"],
            filename=row["filename"],
            media_type=row["media_type"],
            alt_text=row["alt_text"],
            sha256=row["sha256"],
            data=bytes(row["data"]),
        )

    async def links(self, page_id: str) -> list[str]:
        """Ids of the pages ``page_id`` links to, unauthorized: callers authorize them."""
        return [row["id"] for row in await self._read(cypher.LINKS, id=page_id)]

    async def containers(self) -> list[Space | Project]:
        return [(Space if r["space"] else Project)(key=r["key"], name=r["name"], url=r["url"]) for r in await self._read(cypher.CONTAINERS)]

    async def children(self, node_id: str, after: int, limit: int) -> list[ChildPage]:
        rows = await self._read(cypher.CHILDREN, id=node_id, after=after, limit=limit)
        return [ChildPage(**row) for row in rows]

    async def children_of(self, parent_ids: Sequence[str], limit: int) -> list[tuple[str, ChildPage]]:
        rows = await self._read(cypher.CHILDREN_OF, ids=list(parent_ids), limit=limit)
        return [(row.pop("parent"), ChildPage(**row)) for row in rows]

    async def titled(self, key: str, limit: int, issue_key: str | None = None) -> list[str]:
        issue_id = f"issue:{issue_key}" if issue_key else None
        return [row["id"] for row in await self._read(cypher.TITLED, key=key, issue_id=issue_id, limit=limit)]

    async def related(self, page_id: str, limit: int) -> list[tuple[str, ChildPage]]:
        rows = await self._read(cypher.RELATED, id=page_id, limit=limit)
        return [(row.pop("relation"), ChildPage(**row, position=0)) for row in rows]

    async def position(self, parent_id: str, page_id: str) -> int | None:
        rows = await self._read(cypher.POSITION, id=page_id, parent_id=parent_id)
        return rows[0]["position"] if rows else None

    async def page(self, page_id: str) -> PageContent | None:
        """A page's, an issue's or a restricted comment's text."""
        query = cypher.ISSUE if page_id.startswith("issue:") else cypher.COMMENT if page_id.startswith("comment:") else cypher.PAGE
        rows = await self._read(query, id=page_id)
        return PageContent(**rows[0]) if rows else None

    async def summaries(self, page_ids: Sequence[str]) -> dict[str, PageSummary]:
        """Pages, issues and restricted comments, with their ancestors (root first; a comment's
        end with its issue)."""
        wanted = list(dict.fromkeys(page_ids))
        issues = [i for i in wanted if i.startswith("issue:")]
        comments = [i for i in wanted if i.startswith("comment:")]
        pages = [i for i in wanted if not i.startswith(("issue:", "comment:"))]
        queries = ((cypher.PAGE_SUMMARIES, pages), (cypher.ISSUE_SUMMARIES, issues), (cypher.COMMENT_SUMMARIES, comments))
        found = await asyncio.gather(*(self._read(query, ids=keys) for query, keys in queries if keys))
        rows = [row for part in found for row in part]
        return {
            row["id"]: PageSummary(
                id=row["id"],
                title=row["title"],
                url=row["url"],
                space_id=row["space_id"],
                ancestors=tuple(Crumb(**crumb) for crumb in row["ancestors"] or ()),
                labels=tuple(row["labels"] or ()),
                updated_at=datetime.fromisoformat(row["updated_at"]) if row["updated_at"] else None,
            )
            for row in rows
        }
