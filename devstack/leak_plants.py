"""What the leak suite plants in the emulated site before it syncs, and the ground truth it reads
back from the site afterwards, for the categories of :mod:`evals.leaks.fidelity`.

* **Identities**: ``john smith`` (a Data Center username with a space) with a page of his own, and
  a user named like john's Wayfinder id (``x-…``), who must never pass as him.
* **A page of links**: an open page linking, in every spelling Confluence and Jira use, to pages
  and issues some principals may not see.
* **An image on a restricted page**, so fetch_image has a hidden id to time.
* **Jira's own answers**: each user's JQL search over REST, as the emulator answers that user.
* **The Slack bot's audience**: a fake Slack workspace with every kind of conversation, and the
  bot's decision over the stack's real OpenFGA.
"""

from __future__ import annotations

import base64
import html
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager

import httpx

from authz import grants
from authz.base import Authorizer, TupleStore
from core import ids
from core.models import Principal
from devstack.atlassian.hive import SYNC_LOGIN, account_id
from devstack.atlassian.hive_jira import SECURITY_LEVEL
from devstack.atlassian.site import Site, User
from devstack.fake_slack import BOT_USER, FakeSlack, guest, person
from devstack.serving import serving_asgi
from evals.leaks.fidelity import Channel, JiraTruth, LinkPlant, SlackAudience
from mcp_app.agents import all_see
from slackbot.bot import Asker, Audience, Directory

JOHN = "john smith"
IMPOSTOR = ids.user_name(JOHN)  # a username spelled as john's id
LINK_PHRASE = "Zembrelink"  # a word only the page of links holds
WIKI = "https://wiki.example.com/confluence"
JIRA = "https://jira.example.com"
SLACK_TOKEN = "xoxb-leak-suite"
_TINY = str.maketrans("+/", "_-")  # Confluence's tiny-link alphabet


def identity_token(login: str) -> str:
    return "emulator-token-" + login.replace(" ", "-")


def plant_identities(site: Site, space_key: str) -> str:
    """John (a reader of the space, with a page restricted to him) and the impostor; returns
    john's page."""
    for login in (JOHN, IMPOSTOR):
        site.add_user(User(account_id(login), login, login.title(), f"{login.replace(' ', '.')}@example.com", identity_token(login)))
    site.add_member("hive-users", account_id(JOHN))
    leaves = sorted(p.id for p in site.pages.values() if p.space_key == space_key and not site.children(p.id) and is_open(site, p.id))
    johns = leaves[len(leaves) // 2]
    site.set_read_restrictions(johns, users={account_id(JOHN), account_id(SYNC_LOGIN)}, groups=set())
    return johns


def plant_links(site: Site, page_id: str, pages: Sequence[str], issues: Sequence[str]) -> LinkPlant:
    """Links on ``page_id`` to each page and issue, in every spelling (typed ids are the sync's
    own and not a storage format, so Confluence's URLs and Jira's stand for them)."""
    anchors = [f"<p>{LINK_PHRASE}: where the design lives.</p><ul>"]
    for target in pages:
        page = site.pages[target.removeprefix("page:")]
        title = html.escape(page.title.replace(" ", "+"))
        for href in (
            f"{WIKI}/pages/viewpage.action?pageId={page.id}",
            f"{WIKI}/spaces/{page.space_key}/pages/{page.id}/{title}",
            f"{WIKI}/x/{tiny_code(int(page.id))}",
            f"{WIKI}/rest/api/content/{page.id}",
            f"{WIKI}/display/{page.space_key}/{title}",
        ):
            anchors.append(f'<li><a href="{href}">{html.escape(page.title)}</a></li>')
    for key in (i.removeprefix("issue:") for i in issues):
        for href in (f"{JIRA}/browse/{key}", f"{JIRA}/rest/api/2/issue/{key}"):
            anchors.append(f'<li><a href="{href}">{key}</a></li>')
    host = site.pages[page_id]
    site.edit_page(page_id, by=host.version.by, body=host.body + "".join(anchors) + "</ul>")
    return LinkPlant(f"page:{page_id}", frozenset([*pages, *issues]), LINK_PHRASE)


def tiny_code(page_id: int) -> str:
    """A page's tiny-link code as Confluence writes it: the id's bytes, least significant first,
    base64 in its own alphabet, trailing ``A``s and padding dropped."""
    raw = page_id.to_bytes(8, "little")
    return base64.b64encode(raw).decode().translate(_TINY).rstrip("=").rstrip("A")


def plant_hidden_image(site: Site, page_id: str) -> str:
    """An image on a restricted page; its id."""
    attachment = site.add_attachment(page_id, "hidden-diagram.png", "image/png", b"\x89PNG\r\n\x1a\n" + bytes(64), by=site.pages[page_id].version.by)
    return f"image:{attachment.id}"


def is_open(site: Site, page_id: str) -> bool:
    """No restriction on the page or any of its ancestors."""
    page = site.pages[page_id]
    return not any(p.restricted for p in (page, *site.ancestors(page)))


async def jira_truth(site_url: str, logins: Collection[str], tokens: dict[str, str], site: Site) -> JiraTruth:
    """Each login's issues as the emulator's own JQL search answers them (Data Center's
    ``/rest/api/2/search``, paged), every restricted comment's text, and the restricted comments
    each login reads with an issue (``/rest/api/2/issue/KEY?fields=comment`` as that login)."""
    visible: dict[str, frozenset[str]] = {}
    readers: dict[str, frozenset[str]] = {}
    commented = sorted(issue.key for issue in site.jira.issues.values() if any(c.visibility for c in issue.comments))
    async with httpx.AsyncClient(timeout=60) as http:
        for login in logins:
            keys: list[str] = []
            while True:
                params = {"jql": "project = HIVE ORDER BY key ASC", "fields": "summary", "startAt": len(keys), "maxResults": 100}
                response = await http.get(f"{site_url}/jira/rest/api/2/search", params=params, auth=(login, tokens[login]))
                response.raise_for_status()
                page = response.json()
                keys += [issue["key"] for issue in page["issues"]]
                if not page["issues"] or len(keys) >= page["total"]:
                    break
            visible[login] = frozenset(f"issue:{key}" for key in keys)
            read: set[str] = set()
            for key in sorted(set(commented) & set(keys)):
                response = await http.get(f"{site_url}/jira/rest/api/2/issue/{key}", params={"fields": "comment"}, auth=(login, tokens[login]))
                response.raise_for_status()
                read |= {f"comment:{c['id']}" for c in response.json()["fields"]["comment"]["comments"] if c.get("visibility")}
            readers[login] = frozenset(read)
    comments = {
        f"issue:{issue.key}": tuple(c.body for c in issue.comments if c.visibility)
        for issue in site.jira.issues.values()
        if any(c.visibility for c in issue.comments)
    }
    by_id = {f"comment:{c.id}": (f"issue:{issue.key}", c.body) for issue in site.jira.issues.values() for c in issue.comments if c.visibility}
    return JiraTruth(frozenset(f"issue:{key}" for key in site.jira.issues), visible, comments, by_id, readers)


def secured_issue(site: Site) -> str:
    return next(f"issue:{i.key}" for i in sorted(site.jira.issues.values(), key=lambda i: i.number) if i.security_level == SECURITY_LEVEL)


def open_issue(site: Site) -> str:
    return next(f"issue:{i.key}" for i in sorted(site.jira.issues.values(), key=lambda i: i.number) if site.jira.level_of(i) is None)


# Slack users of the workspace: the three readers, a guest and the bot.
_MEMBERS = {"UALICE": "alice", "UBOB": "bob", "UCAROL": "carol"}
_GUEST = "UGUEST"


@asynccontextmanager
async def slack_audience(authorizer: Authorizer, deadline_s: float) -> AsyncIterator[SlackAudience]:
    """A fake Slack workspace served on loopback with a public, a private, a shared and a
    guest-attended channel, and the bot's audience decision against ``authorizer``."""
    from slack_sdk.web.async_client import AsyncWebClient

    fake = FakeSlack(SLACK_TOKEN)
    fake.users = {uid: person(uid, f"{login}@example.com") for uid, login in _MEMBERS.items()} | {_GUEST: guest(_GUEST, "guest@example.com")}
    conversations = [
        ("CPUBLIC", "public", ["UALICE"], frozenset(_MEMBERS.values())),  # read by the whole workspace
        ("CPRIVATE", "private", ["UALICE", "UBOB"], frozenset({"alice", "bob"})),
        ("CALICE", "private", ["UALICE"], frozenset({"alice"})),
        ("CSHARED", "shared", ["UALICE"], None),
        ("CGUESTS", "private", ["UALICE", _GUEST], None),
    ]
    for channel, kind, members, _ in conversations:
        fake.channels[channel], fake.kinds[channel] = [*members, BOT_USER], kind
    by_email = {f"{login}@example.com": login for login in _MEMBERS.values()}

    async def lookup(email: str) -> str | None:
        return by_email.get(email.casefold())

    async with serving_asgi(fake.app(), "127.0.0.1", 0) as url:
        fake.base_url = url
        slack = AsyncWebClient(token=SLACK_TOKEN, base_url=f"{url}/api/")
        audience = Audience(slack, Directory(slack, lookup, 0), InProcessDelegation(authorizer, None, deadline_s), max_members=50)
        alice = Asker("UALICE", Principal(user="alice"), "alice")  # a member of every channel

        async def posts(channel: str, cited: Sequence[str]) -> bool:
            return await audience.all_may_see(channel, list(cited), BOT_USER, alice)

        yield SlackAudience(posts, [Channel(c, kind, readers) for c, kind, _, readers in conversations])


class InProcessDelegation:
    """The answers the MCP server gives the bot (:mod:`mcp_app.agents`), computed in this process
    with the same functions: for tests and the leak suite, which judge the bot's decisions, not
    the HTTP hop to the server. The asker's own check is asked for the user alone: the server asks
    it as the agent, through the grant it has just written, and here no grant is written."""

    def __init__(self, authorizer: Authorizer, store: TupleStore | None, deadline_s: float) -> None:
        self._authorizer, self._store, self._deadline_s = authorizer, store, deadline_s

    async def grant(self, principal: Principal, name: str, ttl: str) -> None:
        assert self._store is not None and principal.agent is not None and principal.task is not None
        await grants.grant(self._store, principal.user, principal.agent, principal.task, grants.parse_ttl(ttl))

    async def all_see(self, principal: Principal, name: str, readers: Sequence[str], objects: Sequence[str]) -> bool:
        return await all_see(self._authorizer, Principal(user=principal.user), readers, objects, self._deadline_s)
