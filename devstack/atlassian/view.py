"""What the emulated site says about who may see what, in Wayfinder's terms, read straight from
the site's own state and never through the sync: the leak suite's oracle is built from this, so a
bug anywhere on the REST → raw store → tuples path shows up as a difference."""

from __future__ import annotations

import html
import re
from collections.abc import Collection
from dataclasses import dataclass

from core.models import Page, Permissions, Space
from devstack.atlassian.site import Site


_RI_PAGE = re.compile(r"<ri:page ([^>]*)/?>")


@dataclass(frozen=True)
class SiteView:
    spaces: tuple[Space, ...]
    pages: tuple[Page, ...]  # the tree; as text, only the page's links to pages of the site (page:<id>)
    permissions: Permissions


def site_view(site: Site, space_keys: Collection[str]) -> SiteView:
    """Users by username (the emulator is a Data Center site), groups by name."""

    def user(account_id: str) -> str:
        return f"user:{site.users[account_id].username}"

    by_title = {(p.space_key, p.title): p.id for p in site.pages.values()}

    def links(page_id: str) -> str:
        """``page:<id>`` for each ``ri:page`` of the body that names a page of the site."""
        page = site.pages[page_id]
        found = []
        for attributes in _RI_PAGE.findall(page.body):
            title = re.search(r'ri:content-title="([^"]*)"', attributes)
            space = re.search(r'ri:space-key="([^"]*)"', attributes)
            target = by_title.get((html.unescape(space[1]) if space else page.space_key, html.unescape(title[1]) if title else ""))
            if target is not None:
                found.append(f"page:{target}")
        return " ".join(dict.fromkeys(found))

    spaces = tuple(Space(key=s.key, name=s.name, url=f"/spaces/{s.key}") for s in site.spaces.values() if s.key in space_keys)
    pages = tuple(
        Page(page_id=p.id, space_key=p.space_key, title=p.title, parent_id=p.parent_id, position=p.position, url=f"/pages/{p.id}", markdown=links(p.id))
        for key in space_keys
        for root in sorted((p for p in site.pages.values() if p.space_key == key and p.parent_id is None), key=lambda p: p.position)
        for p in (root, *site.descendants(root.id))
    )
    permissions = Permissions(
        space_viewers={
            s.key: tuple(sorted(user(u) for u in s.readers_users)) + tuple(sorted(f"group:{g}#member" for g in s.readers_groups))
            for s in site.spaces.values()
            if s.key in space_keys
        },
        page_restrictions={
            p.page_id: tuple(sorted(user(u) for u in site.pages[p.page_id].read_users))
            + tuple(sorted(f"group:{g}#member" for g in site.pages[p.page_id].read_groups))
            for p in pages
        },
        group_members={name: tuple(sorted(user(m) for m in members)) for name, members in site.groups.items()},
    )
    return SiteView(spaces, pages, permissions)
