"""Who reads what the bot posts (DESIGN.md A12): the real slack_sdk client against the fake Slack
served over loopback HTTP, OpenFGA's answers from a fake authorizer, and — for whole answers — a
small MCP server over HTTP that returns the hits a test sets."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastmcp import FastMCP
from pydantic import SecretStr
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from authz.fake import FakeAuthorizer, FakeTupleStore
from authz.tuples import can_view
from core.models import Principal
from core.settings import SlackSettings
from core.references import UNRESOLVED, references
from devstack.fake_slack import BOT_USER, PARTNER_TEAM, TEAM, FakeSlack, Post, guest, person, stranger
from devstack.leak_plants import InProcessDelegation
from devstack.serving import serving, serving_asgi
from slackbot.bot import PRIVATE, Asker, Audience, Compose, Directory, SlackBot, TokenSigner
from tests.tokens import KEY

pytestmark = pytest.mark.timeout(30)

HOST = "127.0.0.1"
BOT_TOKEN = "xoxb-audience-tests"
ALICE, BOB, CAROL, GUEST, STRANGER, FOREIGN, GONE, APP = "UALICE", "UBOB", "UCAROL", "UGUEST", "USTRANGE", "UFOREIGN", "UGONE", "UAPP"
OPEN, MEMBERS_ONLY, ALICES = "page:1", "page:2", "page:3"  # read by all three, by alice and bob, by alice alone
SPACE = "space:HIVE"  # the space of every page, open to all
ALICE_ASKS = Asker(ALICE, Principal(user="alice"), "alice")  # alice asks, as the bot acts for her
# who may read what; the guest and the people of other teams may read every page, so only their
# being a guest or a stranger can keep an answer private
READS = {
    "alice": {SPACE, OPEN, MEMBERS_ONLY, ALICES, "issue:HIVE-1", "issue:HIVE-2"},
    "bob": {SPACE, OPEN, MEMBERS_ONLY, "issue:HIVE-1"},
    "carol": {SPACE, OPEN, "issue:HIVE-1"},
    "gus": {SPACE, OPEN, MEMBERS_ONLY, ALICES},
    "sam": {SPACE, OPEN, MEMBERS_ONLY, ALICES},
    "fay": {SPACE, OPEN, MEMBERS_ONLY, ALICES},
}


@dataclass
class Slack:
    fake: FakeSlack
    client: AsyncWebClient
    authorizer: FakeAuthorizer
    hits: list[dict[str, Any]] = field(default_factory=list)  # what the MCP server's search returns

    def audience(self, max_members: int = 50) -> Audience:
        return Audience(self.client, Directory(self.client, _lookup, 0), InProcessDelegation(self.authorizer, None, 1.0), max_members)

    def asked_about(self) -> set[str]:
        """The users OpenFGA was asked about."""
        return {check.user for batch in self.authorizer.calls for check in batch}


async def _lookup(email: str) -> str | None:
    return email.split("@")[0] if email.endswith("@example.com") else None


@pytest.fixture
async def slack() -> AsyncIterator[Slack]:
    fake = FakeSlack(BOT_TOKEN)
    fake.users = {
        ALICE: person(ALICE, "alice@example.com"),
        BOB: person(BOB, "bob@example.com"),
        CAROL: person(CAROL, "carol@example.com"),
        GUEST: guest(GUEST, "gus@example.com"),
        STRANGER: stranger(STRANGER, "sam@example.com"),
        FOREIGN: person(FOREIGN, "fay@example.com", team_id=PARTNER_TEAM),  # another team, not flagged a stranger
        GONE: person(GONE, "dave@example.com", deleted=True),
        APP: person(APP, None, is_bot=True),
    }
    fake.channels = {
        "CPUBLIC": [ALICE, BOB, BOT_USER],
        "CPRIVATE": [ALICE, BOB, BOT_USER],
        "GMPIM": [ALICE, BOB, BOT_USER],
        "DALICE": [ALICE, BOT_USER],
        "CSHARED": [ALICE, BOB, BOT_USER],
        "CGUEST": [ALICE, GUEST, BOT_USER],
        "CSTRANGER": [ALICE, STRANGER, BOT_USER],
        "CFOREIGN": [ALICE, FOREIGN, BOT_USER],
    }
    fake.kinds = {"CPUBLIC": "public", "CPRIVATE": "private", "GMPIM": "mpim", "DALICE": "im", "CSHARED": "shared"}
    authorizer = FakeAuthorizer(can_view(f"user:{user}", obj) for user, objects in READS.items() for obj in objects)
    async with serving_asgi(fake.app(), HOST, 0) as url:
        fake.base_url = url
        yield Slack(fake, AsyncWebClient(token=BOT_TOKEN, base_url=f"{url}/api/"), authorizer)


# -- the fake, shaped as Slack documents its answers ---------------------------------------------


async def test_the_fake_gives_each_kind_of_conversation_the_fields_slack_gives_it(slack: Slack) -> None:
    async def info(channel: str) -> dict[str, Any]:
        return (await slack.client.conversations_info(channel=channel, include_num_members=True))["channel"]

    public, private, mpim, shared, dm = [await info(c) for c in ("CPUBLIC", "CPRIVATE", "GMPIM", "CSHARED", "DALICE")]
    assert (public["is_channel"], public["is_private"], public["is_shared"], public["num_members"]) == (True, False, False, 3)
    assert (private["is_channel"], private["is_private"]) == (True, True)
    assert (mpim["is_channel"], mpim["is_mpim"], mpim["is_private"]) == (False, True, True)
    assert (shared["is_private"], shared["is_shared"], shared["is_ext_shared"], shared["shared_team_ids"]) == (False, True, True, [TEAM, PARTNER_TEAM])
    assert dm["is_im"] and dm["user"] == ALICE and "is_private" not in dm and "num_members" not in dm
    with pytest.raises(SlackApiError, match="channel_not_found"):
        await info("CNOWHERE")


async def test_the_fake_lists_the_workspaces_accounts_page_by_page(slack: Slack) -> None:
    listed, cursor, pages = [], None, 0
    while True:
        page = await slack.client.users_list(limit=200, **({"cursor": cursor} if cursor else {}))
        listed += [user["id"] for user in page["members"]]
        pages += 1
        if not (cursor := page["response_metadata"]["next_cursor"]):
            break
    assert pages > 1 and {BOT_USER, "USLACKBOT", GONE, APP, GUEST, ALICE} <= set(listed)
    assert STRANGER not in listed and FOREIGN not in listed  # met in shared channels, not members here
    assert (await slack.client.users_info(user=STRANGER))["user"]["is_stranger"]
    with pytest.raises(SlackApiError, match="invalid_cursor"):
        await slack.client.users_list(cursor="not-a-cursor")


# -- the readers of a conversation --------------------------------------------------------------


async def test_a_public_channel_is_read_by_the_whole_workspace_not_only_its_members(slack: Slack) -> None:
    # alice and bob, its members, may read the page; carol may open the channel and may not
    assert not await slack.audience().all_may_see("CPUBLIC", [MEMBERS_ONLY], BOT_USER, ALICE_ASKS)
    assert "user:carol" in slack.asked_about()


async def test_a_public_channel_gets_the_answer_when_every_workspace_member_may_see_it(slack: Slack) -> None:
    assert await slack.audience().all_may_see("CPUBLIC", [OPEN], BOT_USER, ALICE_ASKS)
    # every full member was checked, whether in the channel or not; no deleted account, bot,
    # Slackbot or guest outside the channel counts as a reader
    assert slack.asked_about() == {"user:alice", "user:bob", "user:carol"}
    assert "users.list" in slack.fake.calls


async def test_a_workspace_larger_than_max_audience_keeps_a_public_answer_private(slack: Slack) -> None:
    slack.fake.users["UDAN"] = person("UDAN", "dan@example.com")
    slack.authorizer.allowed.add(can_view("user:dan", OPEN))
    assert await slack.audience(max_members=4).all_may_see("CPUBLIC", [OPEN], BOT_USER, ALICE_ASKS)
    # the channel's three members (the bot with them) fit; its four readers do not
    assert not await slack.audience(max_members=3).all_may_see("CPUBLIC", [OPEN], BOT_USER, ALICE_ASKS)


@pytest.mark.parametrize("channel", ["CPRIVATE", "GMPIM", "DALICE"])
async def test_a_private_conversation_is_read_by_its_members_alone(slack: Slack, channel: str) -> None:
    # carol may not read the page, and cannot open a private channel, a group DM or alice's DM
    assert await slack.audience().all_may_see(channel, [MEMBERS_ONLY], BOT_USER, ALICE_ASKS)
    assert "users.list" not in slack.fake.calls and "user:carol" not in slack.asked_about()


async def test_a_channel_shared_with_another_organisation_keeps_the_answer_private(slack: Slack) -> None:
    # its members may read the page, but the other organisation reads the channel too
    assert not await slack.audience().all_may_see("CSHARED", [OPEN], BOT_USER, ALICE_ASKS)


@pytest.mark.parametrize(
    ("channel", "who"),
    [("CGUEST", "a guest"), ("CSTRANGER", "a stranger"), ("CFOREIGN", "an account of another team")],
)
async def test_a_guest_or_a_member_of_another_organisation_keeps_the_answer_private(slack: Slack, channel: str, who: str) -> None:
    # the member's e-mail address maps to a directory user who may read the page
    assert not await slack.audience().all_may_see(channel, [OPEN], BOT_USER, ALICE_ASKS), who


async def test_a_single_channel_guest_in_a_public_channel_keeps_the_answer_private(slack: Slack) -> None:
    slack.fake.users[GUEST] = guest(GUEST, "gus@example.com", single_channel=True)
    slack.fake.channels["CPUBLIC"].append(GUEST)
    assert not await slack.audience().all_may_see("CPUBLIC", [OPEN], BOT_USER, ALICE_ASKS)


@pytest.mark.parametrize("method", ["conversations.info", "users.list", "auth.test", "conversations.members"])
async def test_when_slack_fails_the_answer_stays_private(slack: Slack, method: str) -> None:
    slack.fake.failing.add(method)
    assert not await slack.audience().all_may_see("CPUBLIC", [OPEN], BOT_USER, ALICE_ASKS)
    assert method in slack.fake.calls


# -- what an answer shows --------------------------------------------------------------------------


def test_a_text_names_pages_issues_projects_and_spaces_in_every_spelling() -> None:
    text = (
        "[a](page:1) https://w.example.com/wiki/spaces/HIVE/pages/2/T viewpage.action?pageId=3 issue:HIVE-4 "
        "https://j.example.com/browse/hive-5 /rest/api/2/issue/HIVE-6 selectedIssue=HIVE-7 /browse/DOCS /display/OPS "
        "https://w.example.com/wiki/spaces/HIVE"
    )
    assert references(text) == {
        "page:1", "page:2", "page:3", "issue:HIVE-4", "issue:HIVE-5", "issue:HIVE-6", "issue:HIVE-7", "project:DOCS",
        "space:HIVE", "space:OPS",
    }
    # keys in prose, and words that only end like a typed id, name nothing
    assert references("UTF-8 and SHA-256, namespace:default, subproject:core, src/x/util") == set()
    for unnamed in ("/display/HIVE/Design+Docs", "viewpage.action?spaceKey=H&amp;title=T", "/rest/api/2/issue/10001"):
        assert UNRESOLVED in references(f"see https://w.example.com{unnamed} there"), unnamed


@pytest.fixture
async def mcp_url(slack: Slack) -> AsyncIterator[str]:
    mcp = FastMCP("hits")

    @mcp.tool
    def search(query: str, top_k: int = 5) -> dict[str, Any]:
        return {"hits": slack.hits[:top_k]}

    async with serving(mcp, HOST, 0) as url:
        yield url


def bot_for(slack: Slack, mcp_url: str, compose: Compose | None = None) -> SlackBot:
    settings = SlackSettings(token_private_key=SecretStr(KEY.as_pem(private=True).decode()))
    directory = Directory(slack.client, _lookup, 0)
    delegation = InProcessDelegation(slack.authorizer, FakeTupleStore(), 1.0)
    audience = Audience(slack.client, directory, delegation, 50)
    return SlackBot(settings, slack.client, delegation, directory, audience, TokenSigner(settings, mcp_url), mcp_url, compose)


def hit(page: str, snippet: str) -> dict[str, Any]:
    number = page.removeprefix("page:")
    return {"id": page, "title": f"Page {number}", "url": f"https://wiki.example.com/wiki/spaces/HIVE/pages/{number}/Page", "snippet": snippet}


async def ask(slack: Slack, mcp_url: str, compose: Compose | None = None, channel: str = "CPRIVATE") -> Post:
    """Alice asks, by default in the private channel she shares with bob; the one post the bot makes."""
    bot = bot_for(slack, mcp_url, compose)
    slack.fake.posts.clear()
    await bot.answer(team=TEAM, channel=channel, user=ALICE, text=f"<@{BOT_USER}> where is the design?", thread_ts=None, bot_user=BOT_USER)
    [post] = slack.fake.posts
    return post


async def test_an_answer_whose_links_every_member_may_follow_is_posted(slack: Slack, mcp_url: str) -> None:
    slack.hits = [hit(OPEN, "The overview; the details are in [the guide](page:2) and HIVE-1 (https://jira.example.com/browse/HIVE-1).")]
    post = await ask(slack, mcp_url)
    assert post.kind == "message" and "page:2" in post.text and PRIVATE not in post.text


@pytest.mark.parametrize(
    "snippet",
    [
        "See [the design](page:3) before changing it.",
        "See https://wiki.example.com/confluence/pages/viewpage.action?pageId=3 before changing it.",
        "See https://wiki.example.com/wiki/spaces/HIVE/pages/3/Design before changing it.",
        "Tracked in https://jira.example.com/browse/HIVE-2 for now.",
        "Tracked in issue:HIVE-2 for now.",
    ],
)
async def test_a_snippet_linking_to_a_page_or_issue_a_member_may_not_see_keeps_the_answer_private(
    slack: Slack, mcp_url: str, snippet: str
) -> None:
    # the hit itself is open to all; bob may not follow the link in its snippet
    slack.hits = [hit(OPEN, snippet)]
    post = await ask(slack, mcp_url)
    assert post.kind == "ephemeral" and post.user == ALICE and PRIVATE in post.text
    assert "user:bob" in slack.asked_about()


@pytest.mark.parametrize(
    "snippet",
    [
        "Described in https://cwiki.example.com/confluence/display/HIVE/Design+Docs in full.",
        "Described in https://jira.example.com/rest/api/2/issue/10001 in full.",
        "Described in https://wiki.example.com/pages/viewpage.action?spaceKey=HIVE&title=Design in full.",
    ],
)
async def test_a_link_the_bot_cannot_name_by_id_keeps_the_answer_private(slack: Slack, mcp_url: str, snippet: str) -> None:
    slack.hits = [hit(OPEN, snippet)]
    post = await ask(slack, mcp_url)
    assert post.kind == "ephemeral" and PRIVATE in post.text


async def test_a_composed_answer_linking_to_a_page_a_member_may_not_see_keeps_it_private(slack: Slack, mcp_url: str) -> None:
    async def compose(question: str, sources: Sequence[tuple[str, str]]) -> str:
        return "It is configured as https://wiki.example.com/wiki/spaces/HIVE/pages/3/Design says."

    slack.hits = [hit(OPEN, "The overview.")]
    post = await ask(slack, mcp_url, compose)
    assert post.kind == "ephemeral" and "pages/3/Design" in post.text and PRIVATE in post.text


async def test_in_the_askers_own_dm_the_answer_is_posted_whatever_it_links_to(slack: Slack, mcp_url: str) -> None:
    # no one but alice reads her DM with the bot, ever: an ephemeral answer would show her the same
    slack.hits = [hit(OPEN, "See [the design](page:3) and https://cwiki.example.com/confluence/display/HIVE/Design+Docs.")]
    post = await ask(slack, mcp_url, channel="DALICE")
    assert post.kind == "message" and post.channel == "DALICE" and PRIVATE not in post.text
