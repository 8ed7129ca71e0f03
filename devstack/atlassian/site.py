"""The state of an emulated Confluence site: users, groups, spaces, pages, attachments.

Everything the REST emulator serves and everything its admin API changes lives here, in memory,
behind one lock-free object that a single event loop (or a single test) drives. Visibility follows
Confluence: a user sees a page when a space permission lets them read the space and every read
restriction on the page and on each of its ancestors names them or one of their groups.

Time is explicit. Each change is stamped by the site's clock, and edits, moves and new
attachments change a page's ``lastModified`` as Confluence does, while restriction and group
membership changes do not.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime


class SiteError(Exception):
    """A change the site refuses; ``status`` is the HTTP status the admin API answers with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class User:
    account_id: str
    username: str
    display_name: str
    email: str
    token: str
    time_zone: str = "UTC"  # CQL dates are read in the querying user's zone
    # May read what Atlassian shows administrators only (permission schemes, security level
    # members). Content it sees as any user does: no administrator passes a page restriction, a
    # space permission or an issue security level that does not name them.
    site_admin: bool = False


@dataclass
class Space:
    id: int
    key: str
    name: str
    readers_users: set[str] = field(default_factory=set)  # account ids
    readers_groups: set[str] = field(default_factory=set)


@dataclass
class Version:
    number: int
    when: datetime
    by: str  # account id
    message: str = ""


@dataclass
class Attachment:
    id: str  # "att<number>", as Confluence spells attachment ids
    page_id: str
    filename: str
    media_type: str
    data: bytes
    created: datetime
    by: str
    comment: str = ""


@dataclass
class Page:
    id: str
    space_key: str
    title: str
    parent_id: str | None
    position: int
    body: str  # storage format XHTML
    versions: list[Version]
    labels: list[str] = field(default_factory=list)
    read_users: set[str] = field(default_factory=set)  # account ids; empty and no groups = unrestricted
    read_groups: set[str] = field(default_factory=set)
    # "folder": a Cloud folder, a node of the tree without a body whose view restrictions the
    # pages inside it inherit, as a page's do. CQL finds it as ``type = folder``.
    kind: str = "page"

    @property
    def version(self) -> Version:
        return self.versions[-1]

    @property
    def created(self) -> Version:
        return self.versions[0]

    @property
    def restricted(self) -> bool:
        return bool(self.read_users or self.read_groups)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class Site:
    """One Confluence site. Edits, new pages and new attachments are new versions (``lastModified``
    moves); moves, deletions, restriction and membership changes are not."""

    def __init__(self, clock: Callable[[], datetime] = _utc_now) -> None:
        self.clock = clock
        self.users: dict[str, User] = {}  # by account id
        self.groups: dict[str, set[str]] = {}  # group name -> member account ids
        self.spaces: dict[str, Space] = {}  # by key
        self.pages: dict[str, Page] = {}
        self.attachments: dict[str, Attachment] = {}
        self._next_id = itertools.count(10_000_000_000)
        from devstack.atlassian.jira import Jira  # the Jira half uses this module's users and groups

        self.jira = Jira(self)

    # -- reading ---------------------------------------------------------------------------

    def user_by_login(self, login: str) -> User | None:
        """The user whose username, email or account id is ``login``."""
        for user in self.users.values():
            if login in (user.username, user.email, user.account_id):
                return user
        return None

    def user_by_token(self, token: str) -> User | None:
        return next((user for user in self.users.values() if user.token == token), None)

    def groups_of(self, account_id: str) -> set[str]:
        return {name for name, members in self.groups.items() if account_id in members}

    def ancestors(self, page: Page) -> list[Page]:
        """Root first, parent last."""
        chain: list[Page] = []
        parent_id = page.parent_id
        while parent_id is not None:
            parent = self.pages[parent_id]
            chain.append(parent)
            parent_id = parent.parent_id
        return chain[::-1]

    def children(self, page_id: str) -> list[Page]:
        return sorted((p for p in self.pages.values() if p.parent_id == page_id), key=lambda p: p.position)

    def descendants(self, page_id: str) -> Iterator[Page]:
        for child in self.children(page_id):
            yield child
            yield from self.descendants(child.id)

    def attachments_of(self, page_id: str) -> list[Attachment]:
        return sorted((a for a in self.attachments.values() if a.page_id == page_id), key=lambda a: a.created)

    def space_readable(self, user: User, space: Space) -> bool:
        return user.account_id in space.readers_users or bool(self.groups_of(user.account_id) & space.readers_groups)

    def readable(self, user: User, page: Page) -> bool:
        if not self.space_readable(user, self.spaces[page.space_key]):
            return False
        groups = self.groups_of(user.account_id)
        return all(
            user.account_id in node.read_users or bool(groups & node.read_groups)
            for node in (*self.ancestors(page), page)
            if node.restricted
        )

    def visible_pages(self, user: User) -> list[Page]:
        return [page for page in self.pages.values() if self.readable(user, page)]

    # -- changing ----------------------------------------------------------------------------

    def add_user(self, user: User) -> User:
        self.users[user.account_id] = user
        return user

    def add_space(self, key: str, name: str, *, readers_users: set[str] = frozenset(), readers_groups: set[str] = frozenset()) -> Space:
        if key in self.spaces:
            raise SiteError(f"space {key} already exists", 409)
        space = Space(len(self.spaces) + 1, key, name, set(readers_users), set(readers_groups))
        self.spaces[key] = space
        return space

    def create_page(
        self,
        space_key: str,
        title: str,
        body: str,
        *,
        parent_id: str | None = None,
        page_id: str | None = None,
        by: str,
        at: datetime | None = None,
        labels: list[str] = (),
        kind: str = "page",
    ) -> Page:
        if space_key not in self.spaces:
            raise SiteError(f"no space {space_key}", 404)
        self.require_user(by)
        page_id = page_id or str(next(self._next_id))
        if page_id in self.pages:
            raise SiteError(f"page {page_id} already exists", 409)
        self._require_unique_title(space_key, title, page_id)
        if parent_id is not None:
            parent = self._require_page(parent_id)
            if parent.space_key != space_key:
                raise SiteError(f"parent {parent_id} is in space {parent.space_key}, not {space_key}")
        siblings = self.children(parent_id) if parent_id else [p for p in self.pages.values() if p.space_key == space_key and p.parent_id is None]
        position = max((s.position for s in siblings), default=-1) + 1
        page = Page(page_id, space_key, title, parent_id, position, body, [Version(1, at or self.clock(), by, "")], list(labels), kind=kind)
        self.pages[page_id] = page
        return page

    def edit_page(self, page_id: str, *, by: str, body: str | None = None, title: str | None = None, message: str = "", at: datetime | None = None) -> Page:
        page = self._require_page(page_id)
        self.require_user(by)
        if title is not None and title != page.title:
            self._require_unique_title(page.space_key, title, page_id)
            page.title = title
        if body is not None:
            page.body = body
        page.versions.append(Version(page.version.number + 1, at or self.clock(), by, message))
        return page

    def move_page(self, page_id: str, new_parent_id: str | None, *, by: str, space_key: str | None = None) -> Page:
        """Move a page (and its subtree) under another parent, or to the top of a space. As in
        Confluence, a move is no new version: ``lastModified`` stays, and date queries miss it."""
        page = self._require_page(page_id)
        self.require_user(by)
        target_space = space_key or (self._require_page(new_parent_id).space_key if new_parent_id else page.space_key)
        if new_parent_id is not None:
            parent = self._require_page(new_parent_id)
            if parent.id == page_id or parent.id in {p.id for p in self.descendants(page_id)}:
                raise SiteError(f"cannot move page {page_id} under itself")
            if parent.space_key != target_space:
                raise SiteError(f"parent {new_parent_id} is not in space {target_space}")
        if target_space not in self.spaces:
            raise SiteError(f"no space {target_space}", 404)
        if target_space != page.space_key:
            for node in (page, *self.descendants(page_id)):
                self._require_unique_title(target_space, node.title, node.id)
        for node in (page, *self.descendants(page_id)):
            node.space_key = target_space
        siblings = self.children(new_parent_id) if new_parent_id else [p for p in self.pages.values() if p.space_key == target_space and p.parent_id is None]
        page.parent_id = new_parent_id
        page.position = max((s.position for s in siblings if s.id != page_id), default=-1) + 1
        return page

    def delete_page(self, page_id: str) -> list[str]:
        """Delete a page; its children move up to its parent, as Confluence does. Returns the ids
        of the children that moved (their ``lastModified`` does not change)."""
        page = self._require_page(page_id)
        moved = self.children(page_id)
        for child in moved:
            child.parent_id = page.parent_id
        for attachment in self.attachments_of(page_id):
            del self.attachments[attachment.id]
        del self.pages[page_id]
        return [child.id for child in moved]

    def set_read_restrictions(self, page_id: str, *, users: set[str], groups: set[str]) -> Page:
        """Replace the page's read restrictions. Not a new version: ``lastModified`` stays."""
        page = self._require_page(page_id)
        for account_id in users:
            self.require_user(account_id)
        for group in groups:
            self.require_group(group)
        page.read_users, page.read_groups = set(users), set(groups)
        return page

    def add_group(self, name: str, members: set[str] = frozenset()) -> None:
        if name in self.groups:
            raise SiteError(f"group {name} already exists", 409)
        for account_id in members:
            self.require_user(account_id)
        self.groups[name] = set(members)

    def add_member(self, group: str, account_id: str) -> None:
        self.require_group(group)
        self.require_user(account_id)
        self.groups[group].add(account_id)

    def remove_member(self, group: str, account_id: str) -> None:
        self.require_group(group)
        self.groups[group].discard(account_id)

    def add_attachment(self, page_id: str, filename: str, media_type: str, data: bytes, *, by: str, attachment_id: str | None = None, at: datetime | None = None, comment: str = "") -> Attachment:
        """Attach a file. Like Confluence, this makes the page's ``lastModified`` move (the page
        gets a new version); an attachment with the same file name replaces the old one."""
        page = self._require_page(page_id)
        self.require_user(by)
        when = at or self.clock()
        old = next((a for a in self.attachments_of(page_id) if a.filename == filename), None)
        if old is not None:
            del self.attachments[old.id]
        attachment_id = attachment_id or (old.id if old else f"att{next(self._next_id)}")
        attachment = Attachment(attachment_id, page_id, filename, media_type, data, when, by, comment)
        self.attachments[attachment_id] = attachment
        page.versions.append(Version(page.version.number + 1, when, by, f"attached {filename}"))
        return attachment

    def _require_page(self, page_id: str | None) -> Page:
        page = self.pages.get(page_id or "")
        if page is None:
            raise SiteError(f"no page {page_id}", 404)
        return page

    def require_user(self, account_id: str) -> None:
        if account_id not in self.users:
            raise SiteError(f"no user {account_id}", 404)

    def require_group(self, name: str) -> None:
        if name not in self.groups:
            raise SiteError(f"no group {name}", 404)

    def _require_unique_title(self, space_key: str, title: str, page_id: str) -> None:
        if any(p.space_key == space_key and p.title == title and p.id != page_id for p in self.pages.values()):
            raise SiteError(f"a page titled {title!r} already exists in space {space_key}", 400)
