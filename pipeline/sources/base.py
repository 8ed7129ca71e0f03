"""The interface every Confluence source implements (the export files now, REST later)."""

from __future__ import annotations

from typing import Protocol

from core.models import Page, Permissions, Space


class ConfluenceSource(Protocol):
    async def spaces(self) -> list[Space]: ...

    async def pages(self, space_key: str) -> list[Page]:
        """Every page of the space, parents before children, siblings in tree order."""
        ...

    async def permissions(self) -> Permissions:
        """Space permissions, page view restrictions and group memberships."""
        ...
