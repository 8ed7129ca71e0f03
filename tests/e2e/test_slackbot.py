"""The Slack bot end to end: slack-bolt behind its real HTTP events endpoint (signatures checked)
and over Socket Mode, the real slack_sdk client against a local fake of Slack's Web API, user
mapping through the emulated Jira's user search, delegated tokens the bot signs checked by the
real MCP server over HTTP, grants and audience checks against the real OpenFGA, and — for the
composed answer — the real google-genai SDK against a local fake Gemini. Who may see what is
judged by the leak oracle, read straight from the site's permissions."""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from functools import partial
import httpx
import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError
from pydantic import SecretStr
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp

from authz.client import OpenFGAClient
from authz.grants import list_grants
from core.models import Principal
from core.settings import AgentIssuer, GeminiSettings, JiraSettings, MCPSettings, OAuthSettings, Settings, SlackSettings
from devstack.atlassian.hive import SYNC_LOGIN, TOKENS
from devstack.atlassian.runner import serving_app
from devstack.fake_gemini import FakeGemini
from devstack.fake_slack import BOT_USER, TEAM, FakeSlack, Post, callback, person, signed
from devstack.serving import serving, serving_asgi
from evals.leaks.oracle import Oracle
from mcp_app.auth import http_auth, http_identity
from mcp_app.server import create_server, open_services
from slackbot.app import EVENTS_PATH, bolt_app, http_app, opened_bot, web_client
from mcp_app.agents import GRANT_PATH
from slackbot.bot import NO_USER, PRIVATE, Asker, Audience, Directory, ServerDelegation, TokenSigner
from tests.conftest import HiveSlice
from tests.tokens import KEY

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

HOST, MCP_PORT = "127.0.0.1", 29767
ISSUER = "https://slackbot.test.invalid/"
NOWHERE = 9  # a loopback port nothing listens on
SECRET = "slack-signing-secret-for-tests"
BOT_TOKEN = "xoxb-test-bot-token"
ALICE, BOB, CAROL, GUEST, APP = "UALICE", "UBOB", "UCAROL", "UGUEST", "UOTHERAPP"
DESIGN_DOCS = "27362075"
DESIGN_QUESTION = "correlation optimizer"
OPEN_QUESTION = "HiveServer2 LDAP authentication"
_PAGE_LINK = re.compile(r"<[^|>]*/pages/(\d+)/[^|>]*\|")


@dataclass
class Harness:
    fake: FakeSlack
    events_url: str
    settings: Settings
    app: AsyncApp
    oracle: Oracle
    restricted: set[str]
    services: Settings  # the stack's: the bot's own settings name no OpenFGA it could reach

    async def ask(self, user: str, channel: str, text: str, *, dm: bool = False, posts: int = 1) -> list[Post]:
        """``user`` mentions the bot in ``channel`` (or writes in its DM), through the signed
        HTTP endpoint; the posts the bot makes in answer."""
        self.fake.posts.clear()
        event = {"type": "message", "channel_type": "im"} if dm else {"type": "app_mention"}
        event |= {"user": user, "channel": channel, "text": text if dm else f"<@{BOT_USER}> {text}", "ts": "1700000000.000100"}
        raw, headers = signed(SECRET, callback(event))
        async with httpx.AsyncClient() as client:
            response = await client.post(self.events_url, content=raw, headers=headers)
        assert response.status_code == 200, response.text
        return await self.fake.wait_for_posts(posts)


def cited(post: Post) -> set[str]:
    return {f"page:{page}" for page in _PAGE_LINK.findall(post.text)}


@pytest.fixture(scope="module")
async def harness(indexed, services: Settings, hive_slice: HiveSlice):
    fake = FakeSlack(BOT_TOKEN)
    fake.users = {
        ALICE: person(ALICE, "alice@example.com"),
        BOB: person(BOB, "Bob@Example.com"),  # e-mail addresses match whatever their case
        CAROL: person(CAROL, "carol@example.com"),
        GUEST: person(GUEST, "guest@partner.example"),  # not a user of the wiki
        APP: person(APP, None, is_bot=True),
    }
    fake.channels = {
        "CCOMMITTERS": [ALICE, BOT_USER],
        "CMIXED": [ALICE, BOB, BOT_USER],
        "CWITHCAROL": [ALICE, BOB, CAROL, BOT_USER],
        "CGUEST": [ALICE, BOB, GUEST, BOT_USER],
        "CWITHAPP": [ALICE, APP, BOT_USER],
        "DALICE": [ALICE, BOT_USER],
    }
    bot = AgentIssuer(issuer=ISSUER, agent="slack-bot", public_key=KEY.as_pem(private=False).decode())
    oauth = OAuthSettings(agent_issuers=[bot])  # the bot's key, trusted for its agent alone
    server = create_server(
        partial(open_services, services), http_identity, auth=http_auth(MCPSettings(host=HOST, port=MCP_PORT, oauth=oauth)),
        observe=lambda *_: None,
    )
    site = (services.confluence.url or "").removesuffix("/confluence")
    view = hive_slice.view()
    oracle = Oracle.of(view.spaces, view.pages, view.permissions)
    restricted = {f"page:{DESIGN_DOCS}"} | {f"page:{p.id}" for p in hive_slice.site.descendants(DESIGN_DOCS)}
    async with serving(server, HOST, MCP_PORT) as mcp_url, serving_asgi(fake.app(), HOST, 0) as slack_url:
        fake.base_url = slack_url
        settings = services.model_copy(
            update={
                # The bot holds no OpenFGA credential and opens no connection: its OpenFGA is nowhere.
                "openfga": services.openfga.model_copy(update={"http_port": NOWHERE, "preshared_key": SecretStr("not-the-key")}),
                "jira": JiraSettings(url=f"{site}/jira", username=SYNC_LOGIN, token=SecretStr(TOKENS[SYNC_LOGIN])),
                "slack": SlackSettings(
                    bot_token=BOT_TOKEN, signing_secret=SECRET, app_token=fake.app_token, api_url=f"{slack_url}/api/",
                    mcp_url=mcp_url, token_issuer=ISSUER, token_private_key=KEY.as_pem(private=True).decode(),
                ),
            }
        )
        slack = web_client(settings)
        async with opened_bot(settings, slack) as bot:
            app = bolt_app(settings, slack, bot)
            async with serving_asgi(http_app(app), HOST, 0) as bot_url:
                yield Harness(fake, bot_url + EVENTS_PATH, settings, app, oracle, restricted, services)


async def test_an_answer_only_readers_of_its_pages_hear_is_posted_in_the_thread(harness: Harness) -> None:
    [post] = await harness.ask(ALICE, "CCOMMITTERS", DESIGN_QUESTION)
    assert post.kind == "message" and post.channel == "CCOMMITTERS" and post.thread_ts == "1700000000.000100"
    pages = cited(post)
    assert pages and pages <= harness.oracle.visible("alice")
    assert pages & harness.restricted  # the control: alice's answer cites design documents


async def test_where_a_member_may_not_see_a_cited_page_only_the_asker_sees_the_answer(harness: Harness) -> None:
    [post] = await harness.ask(ALICE, "CMIXED", DESIGN_QUESTION)
    assert post.kind == "ephemeral" and post.user == ALICE and PRIVATE in post.text
    assert cited(post) & harness.restricted and not cited(post) <= harness.oracle.visible("bob")


async def test_the_bot_searches_as_the_asker_and_posts_what_every_member_may_see(harness: Harness) -> None:
    [hidden] = await harness.ask(BOB, "CMIXED", DESIGN_QUESTION)
    assert not cited(hidden) & harness.restricted and "Correlation Optimizer" not in hidden.text
    kinds = []
    for asker, user in ((ALICE, "alice"), (BOB, "bob")):
        for question in (OPEN_QUESTION, "Hive schema tool upgrade metastore", "Hive MetaTool"):
            [post] = await harness.ask(asker, "CMIXED", question)
            pages = cited(post)
            assert pages and pages <= harness.oracle.visible(user), (user, question)
            everyone = pages <= harness.oracle.visible("alice") & harness.oracle.visible("bob")
            assert post.kind == ("message" if everyone else "ephemeral"), (user, question)
            kinds.append(post.kind)
    assert "message" in kinds and "ephemeral" in kinds  # both ways occur, each as the oracle has it
    async with OpenFGAClient(harness.services.openfga) as store:
        grants = {(g.user, g.agent, g.task) for g in await list_grants(store)}
    assert ("bob", "slack-bot", f"slack-{TEAM}-CMIXED-{BOB}") in grants


async def test_a_member_who_sees_nothing_or_is_not_in_the_directory_keeps_the_answer_private(harness: Harness) -> None:
    for channel in ("CWITHCAROL", "CGUEST", "CWITHAPP"):  # carol sees no page; a guest and another app are no users
        [post] = await harness.ask(ALICE, channel, OPEN_QUESTION)
        assert post.kind == "ephemeral" and post.user == ALICE and PRIVATE in post.text, channel


async def test_a_slack_user_the_directory_does_not_know_gets_no_search(harness: Harness) -> None:
    [post] = await harness.ask(GUEST, "CGUEST", OPEN_QUESTION)
    assert post == Post("ephemeral", "CGUEST", NO_USER, GUEST, "1700000000.000100")


async def test_a_direct_message_is_answered_in_the_dm(harness: Harness) -> None:
    [post] = await harness.ask(ALICE, "DALICE", DESIGN_QUESTION, dm=True)
    assert post.kind == "message" and post.channel == "DALICE" and post.thread_ts is None
    assert cited(post) & harness.restricted


@pytest.mark.parametrize(
    ("why", "secret", "age_s"),
    [("another secret", "not-the-secret", 0), ("a replayed request", SECRET, 600), ("no signature", None, 0)],
)
async def test_a_request_without_slacks_signature_is_refused(harness: Harness, why: str, secret: str | None, age_s: int) -> None:
    harness.fake.posts.clear()
    event = {"type": "app_mention", "user": ALICE, "channel": "CCOMMITTERS", "text": f"<@{BOT_USER}> {DESIGN_QUESTION}", "ts": "1.0"}
    raw, headers = signed(secret or SECRET, callback(event), at=int(time.time()) - age_s)
    if secret is None:
        headers = {"Content-Type": "application/json"}
    async with httpx.AsyncClient() as client:
        response = await client.post(harness.events_url, content=raw, headers=headers)
    assert response.status_code == 401, why
    await asyncio.sleep(1.0)
    assert harness.fake.posts == [], why


async def test_an_event_slack_delivers_again_is_answered_once(harness: Harness) -> None:
    harness.fake.posts.clear()
    event = {"type": "app_mention", "user": BOB, "channel": "CMIXED", "text": f"<@{BOT_USER}> {OPEN_QUESTION}", "ts": "2.0"}
    body = callback(event)
    async with httpx.AsyncClient() as client:
        for retry in range(2):
            raw, headers = signed(SECRET, body)
            response = await client.post(harness.events_url, content=raw, headers=headers | ({"X-Slack-Retry-Num": "1"} if retry else {}))
            assert response.status_code == 200
    await harness.fake.wait_for_posts(1)
    await asyncio.sleep(2.0)
    assert len(harness.fake.posts) == 1


async def test_socket_mode_answers_and_acknowledges(harness: Harness) -> None:
    harness.fake.posts.clear()
    handler = AsyncSocketModeHandler(harness.app, harness.fake.app_token)
    await handler.connect_async()
    try:
        event = {"type": "app_mention", "user": ALICE, "channel": "CCOMMITTERS", "text": f"<@{BOT_USER}> {DESIGN_QUESTION}", "ts": "3.0"}
        envelope = harness.fake.deliver(event)
        [post] = await harness.fake.wait_for_posts(1)
    finally:
        await handler.close_async()
    assert envelope in harness.fake.acks
    assert post.kind == "message" and post.channel == "CCOMMITTERS" and cited(post) & harness.restricted


async def test_a_token_for_a_conversation_without_a_grant_reads_nothing(harness: Harness) -> None:
    slack = harness.settings.slack
    signer = TokenSigner(slack, slack.mcp_url or "")
    principal = Principal(user="alice", agent=slack.agent, task="slack-never-asked-here")
    async with Client(slack.mcp_url or "", auth=signer.token(principal, "alice")) as client:
        with pytest.raises(ToolError, match="unauthenticated"):
            await client.call_tool("search", {"query": DESIGN_QUESTION})


async def test_when_permissions_cannot_be_checked_the_answer_stays_private(harness: Harness) -> None:
    slack = web_client(harness.settings)
    directory = Directory(slack, _directory_lookup, 0)
    signer = TokenSigner(harness.settings.slack, harness.settings.slack.mcp_url or "")
    asker = Asker(ALICE, Principal(user="alice", agent="slack-bot", task=f"slack-{TEAM}-CCOMMITTERS-{ALICE}"), "alice")
    down = Audience(slack, directory, ServerDelegation(f"http://{HOST}:{NOWHERE}/mcp", signer), 500)  # no server answers
    assert not await down.all_may_see("CCOMMITTERS", ["page:27362075"], BOT_USER, asker)
    small = Audience(slack, directory, ServerDelegation(harness.settings.slack.mcp_url or "", signer), 1)  # more members than it checks
    assert not await small.all_may_see("CMIXED", ["page:27362075"], BOT_USER, asker)


async def test_the_server_writes_an_agents_grant_for_the_tokens_user_and_task_alone_and_no_longer_than_allowed(harness: Harness) -> None:
    slack = harness.settings.slack
    url = httpx.URL(slack.mcp_url or "")
    signer = TokenSigner(slack, slack.mcp_url or "")
    carol = Principal(user="carol", agent=slack.agent, task="slack-grant-test")
    async with httpx.AsyncClient() as client:
        refused = {
            "no token": await client.post(url.join(GRANT_PATH), json={"ttl": "1h"}),
            "a token no agent signed": await client.post(url.join(GRANT_PATH), json={"ttl": "1h"}, headers={"authorization": "Bearer not-a-jwt"}),
            "longer than max_grant_ttl": await client.post(url.join(GRANT_PATH), json={"ttl": "9h"}, headers=_bearer(signer, carol)),
            "no lifetime": await client.post(url.join(GRANT_PATH), json={}, headers=_bearer(signer, carol)),
        }
        assert {why: r.status_code for why, r in refused.items()} == {
            "no token": 401, "a token no agent signed": 401, "longer than max_grant_ttl": 400, "no lifetime": 400,
        }
        async with OpenFGAClient(harness.services.openfga) as store:
            assert not [g for g in await list_grants(store) if g.task == carol.task]  # nothing refused was written
            made = await client.post(url.join(GRANT_PATH), json={"ttl": "1h"}, headers=_bearer(signer, carol))
            assert made.status_code == 200, made.text
            assert [(g.user, g.agent) for g in await list_grants(store) if g.task == carol.task] == [("carol", "slack-bot")]


async def test_the_server_answers_an_audience_only_about_what_the_asker_may_see(harness: Harness) -> None:
    slack = harness.settings.slack
    delegation = ServerDelegation(slack.mcp_url or "", TokenSigner(slack, slack.mcp_url or ""))
    for user in ("alice", "bob"):
        await delegation.grant(Principal(user=user, agent=slack.agent, task=f"slack-audience-{user}"), user, "1h")
    alice = Principal(user="alice", agent=slack.agent, task="slack-audience-alice")
    bob = Principal(user="bob", agent=slack.agent, task="slack-audience-bob")
    design = f"page:{DESIGN_DOCS}"
    assert await delegation.all_see(alice, "alice", ["alice"], [design])  # the control
    assert not await delegation.all_see(alice, "alice", ["alice", "bob"], [design])
    assert not await delegation.all_see(bob, "bob", ["alice"], [design])  # alice may, but bob asks: no answer about it


async def test_with_gemini_the_answer_is_composed_from_the_askers_hits_only(harness: Harness) -> None:
    gemini = FakeGemini()
    with serving_app(gemini.app()) as url:
        settings = harness.settings.model_copy(
            update={"gemini": GeminiSettings(api_key="test-key", base_url=url, max_attempts=1, timeout_s=10)}
        )
        slack = web_client(settings)
        async with opened_bot(settings, slack) as bot:
            harness.fake.posts.clear()
            question = f"{DESIGN_QUESTION} or {OPEN_QUESTION}"  # alice's hits would hold design documents
            await bot.answer(team=TEAM, channel="CMIXED", user=BOB, text=question, thread_ts=None, bot_user=BOT_USER)
    [post] = harness.fake.posts
    [call] = [c for c in gemini.calls if c.kind == "generate"]
    assert post.text.startswith("An answer.") and "*Sources*" in post.text
    assert question in call.prompt
    hidden_titles = {p.title for p in harness.oracle.pages if f"page:{p.page_id}" in harness.restricted}
    assert not [title for title in hidden_titles if title in call.prompt]
    shown = cited(post)
    assert shown and all(p.title in call.prompt for p in harness.oracle.pages if f"page:{p.page_id}" in shown)


def _bearer(signer: TokenSigner, principal: Principal) -> dict[str, str]:
    return {"authorization": f"Bearer {signer.token(principal, principal.user)}"}


async def _directory_lookup(email: str) -> str | None:
    return email.split("@")[0]
