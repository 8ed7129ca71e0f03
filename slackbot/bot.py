"""What the bot does with a question, apart from how Slack delivers it (:mod:`slackbot.app`).

1. **Who asks.** The Slack user's e-mail address (``users.info``) is looked up in the Atlassian
   directory (Jira's user search); a user found there is the principal, anyone else gets no answer.
2. **As them, through a grant.** The bot holds a delegation grant from that user for this
   conversation (``task: slack-<team>-<channel>-<user>``, renewed by each question, expiring after
   ``grant_ttl``) and calls the MCP server with a token it signs for five minutes: ``sub`` the user,
   ``act.sub`` the bot, ``task`` the conversation. The server's gate checks the user's rights and
   the grant together (DESIGN.md A2); the bot sees only what the asker may see.
3. **An answer from the authorized hits only.** With a Gemini key, composed by Gemini from the
   hits' titles and snippets, citing them; offline, the top hits with their snippets.
4. **Posted where every reader may see it, or to the asker alone (A12).** The answer goes to the
   conversation only if every member — the bot aside — is a directory user allowed to view every
   cited page or issue (live OpenFGA checks, one BatchCheck per member). Otherwise, or when that
   cannot be decided (too many members, a member not in the directory, a guest, another bot,
   OpenFGA down), it is an ephemeral message that only the asker sees.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from fastmcp import Client
from fastmcp.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from authz import grants
from authz.base import Authorizer, TupleStore
from authz.gate import Gate
from core import ids
from core.errors import ConfigurationError, InvalidArgument, WayfinderError
from core.models import Principal
from core.settings import SlackSettings

log = logging.getLogger("wayfinder.slackbot")

_MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^>]*)?>")
#: characters of a hit's snippet an answer shows
SNIPPET_CHARS = 280
#: members whose rights are checked at once
CONCURRENT_MEMBERS = 8

NO_USER = (
    "I can't match your Slack account to a user of the wiki (by its e-mail address), so I can't search for you. "
    "Ask an administrator to check that your Slack and Atlassian e-mail addresses are the same."
)
NOTHING = "I found nothing you can see that matches \u201c{question}\u201d."
PRIVATE = "_Only you can see this answer: not everyone in this conversation may read the pages it cites._"
UNAVAILABLE = "Wayfinder can't answer right now (a service it needs did not respond). Please try again in a minute."
HELP = "Ask me a question about the wiki or the issue tracker, e.g. `@Wayfinder how do I configure the metastore?`"


@dataclass(frozen=True)
class Hit:
    id: str
    title: str
    url: str
    snippet: str


class TokenSigner:
    """Short-lived delegated tokens the MCP server verifies with the bot's public key."""

    def __init__(self, settings: SlackSettings, audience: str) -> None:
        if settings.token_private_key is None:
            raise ConfigurationError("WAYFINDER_SLACK__TOKEN_PRIVATE_KEY is required: the PEM RSA key the bot signs its MCP tokens with")
        try:
            key = load_pem_private_key(settings.token_private_key.get_secret_value().encode(), password=None)
        except (ValueError, TypeError) as exc:
            raise ConfigurationError(f"WAYFINDER_SLACK__TOKEN_PRIVATE_KEY is not an unencrypted PEM private key: {exc}") from exc
        if not isinstance(key, RSAPrivateKey):
            raise ConfigurationError("WAYFINDER_SLACK__TOKEN_PRIVATE_KEY must be an RSA key (the tokens are RS256)")
        self._key, self._settings, self._audience = key, settings, audience

    def token(self, principal: Principal) -> str:
        now = int(time.time())
        claims = {
            "iss": self._settings.token_issuer, "aud": self._audience, "sub": principal.user, "act": {"sub": principal.agent},
            "task": principal.task, "iat": now, "exp": now + self._settings.token_lifetime_s, "jti": uuid.uuid4().hex,
        }
        return jwt.encode(claims, self._key, algorithm="RS256")


class Directory:
    """Slack user → directory user, remembered for ``ttl_s`` (found or not)."""

    def __init__(self, slack: AsyncWebClient, lookup: Callable[[str], Awaitable[str | None]], ttl_s: float) -> None:
        self._slack, self._lookup, self._ttl_s = slack, lookup, ttl_s
        self._known: dict[str, tuple[float, str | None]] = {}

    async def user_of(self, slack_user: str) -> str | None:
        """The directory user of a Slack user; None for bots, deleted accounts, accounts without
        an e-mail address and addresses the directory does not know. Slack or directory failures
        raise."""
        held = self._known.get(slack_user)
        if held is not None and time.monotonic() - held[0] < self._ttl_s:
            return held[1]
        found = await self._resolve(slack_user)
        self._known[slack_user] = (time.monotonic(), found)
        return found

    async def _resolve(self, slack_user: str) -> str | None:
        user: dict[str, Any] = (await self._slack.users_info(user=slack_user))["user"]
        if user.get("deleted") or user.get("is_bot") or user.get("is_app_user") or slack_user == "USLACKBOT":
            return None
        email = (user.get("profile") or {}).get("email")
        if not isinstance(email, str) or "@" not in email:
            return None
        found = await self._lookup(email)
        if found is None or not ids.is_name(found):
            return None
        return found


class Audience:
    """May every reader of a conversation see every cited object (DESIGN.md A12)?"""

    def __init__(self, slack: AsyncWebClient, directory: Directory, authorizer: Authorizer, max_members: int, deadline_s: float) -> None:
        self._slack, self._directory, self._authorizer = slack, directory, authorizer
        self._max_members, self._deadline_s = max_members, deadline_s

    async def all_may_see(self, channel: str, cited: Sequence[str], bot_user: str | None) -> bool:
        """True only when it is decided that they may; any doubt or failure is False."""
        try:
            members = [m for m in await self._members(channel) if m != bot_user]
            if not members:
                return False
            limit = asyncio.Semaphore(CONCURRENT_MEMBERS)

            async def user_of(member: str) -> str | None:
                async with limit:
                    return await self._directory.user_of(member)

            async def sees_all(user: str) -> bool:
                async with limit:
                    gate = Gate(self._authorizer, Principal(user=user), self._deadline_s)
                    return await gate.visible(cited) == set(cited)

            users = await asyncio.gather(*(user_of(m) for m in members))
            if any(user is None for user in users):
                return False
            return all(await asyncio.gather(*(sees_all(user) for user in set(users) if user)))
        except Exception as exc:  # noqa: BLE001 - whatever failed, it is not decided that they may: fail closed
            log.warning("could not decide who may read channel %s (%s): answering the asker alone", channel, type(exc).__name__)
            return False

    async def _members(self, channel: str) -> list[str]:
        members: list[str] = []
        cursor: str | None = None
        while True:
            page = await self._slack.conversations_members(channel=channel, limit=200, **({"cursor": cursor} if cursor else {}))
            members += page.get("members", [])
            if len(members) > self._max_members:
                raise _TooMany()
            cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                return members


class _TooMany(WayfinderError):
    """More members than the bot checks."""


Compose = Callable[[str, Sequence[tuple[str, str]]], Awaitable[str]]


class SlackBot:
    def __init__(
        self,
        settings: SlackSettings,
        slack: AsyncWebClient,
        grants_store: TupleStore,
        directory: Directory,
        audience: Audience,
        signer: TokenSigner,
        mcp_url: str,
        compose: Compose | None = None,
    ) -> None:
        try:  # a bad agent id or lifetime is a configuration error at start, not at the first question
            ids.agent_id(settings.agent)
            self._ttl = grants.parse_ttl(settings.grant_ttl)
        except InvalidArgument as exc:
            raise ConfigurationError(f"WAYFINDER_SLACK__AGENT / WAYFINDER_SLACK__GRANT_TTL: {exc}") from exc
        self._settings, self._slack, self._grants = settings, slack, grants_store
        self._directory, self._audience, self._signer = directory, audience, signer
        self._mcp_url, self._compose = mcp_url, compose

    async def answer(self, *, team: str, channel: str, user: str, text: str, thread_ts: str | None, bot_user: str | None) -> None:
        """Answer ``text`` asked by Slack ``user`` in ``channel``: in the conversation, or to the asker
        alone. A failure of Slack, the directory, OpenFGA or the MCP server is said to the asker."""
        try:
            await self._answer(team, channel, user, text, thread_ts, bot_user)
        except Exception as exc:  # the boundary of one question: whatever failed, the asker hears of it
            if isinstance(exc, SlackApiError | WayfinderError | OSError | TimeoutError | httpx.HTTPError | MCPError):
                log.warning("no answer in %s: %s: %s", channel, type(exc).__name__, exc)
            else:
                log.exception("no answer in %s", channel)
            try:
                await self._private(channel, user, thread_ts, UNAVAILABLE)
            except Exception as again:  # noqa: BLE001 - Slack itself is failing: the log is all that is left
                log.warning("could not tell the asker either: %s: %s", type(again).__name__, again)

    async def _answer(self, team: str, channel: str, user: str, text: str, thread_ts: str | None, bot_user: str | None) -> None:
        question = " ".join(_MENTION.sub(" ", text).split())
        if not question:
            await self._private(channel, user, thread_ts, HELP)
            return
        asker = await self._directory.user_of(user)
        if asker is None:
            await self._private(channel, user, thread_ts, NO_USER)
            return
        task = _task(team, channel, user)
        await grants.grant(self._grants, asker, self._settings.agent, task, self._ttl)
        principal = Principal(user=asker, agent=self._settings.agent, task=task)
        try:
            hits = await self._search(principal, question)
        except ToolError as exc:
            await self._private(channel, user, thread_ts, f"Wayfinder could not answer: {_escape(str(exc))}")
            return
        if not hits:
            await self._private(channel, user, thread_ts, NOTHING.format(question=_escape(question)))
            return
        message = await self._message(question, hits)
        if await self._audience.all_may_see(channel, [hit.id for hit in hits], bot_user):
            await self._slack.chat_postMessage(channel=channel, text=message, thread_ts=thread_ts, unfurl_links=False, unfurl_media=False)
        else:
            await self._private(channel, user, thread_ts, f"{message}\n\n{PRIVATE}")

    async def _search(self, principal: Principal, question: str) -> list[Hit]:
        async with Client(self._mcp_url, auth=self._signer.token(principal)) as client:
            result = await client.call_tool("search", {"query": question, "top_k": self._settings.results})
        found = result.structured_content or {}
        return [Hit(h["id"], h["title"], h["url"], h.get("snippet", "")) for h in found.get("hits", [])]

    async def _message(self, question: str, hits: list[Hit]) -> str:
        sources = "\n".join(f"{n}. <{_link(h.url)}|{_escape(h.title)}>" for n, h in enumerate(hits, start=1))
        if self._compose is not None:
            try:
                composed = await self._compose(question, [(h.title, h.snippet) for h in hits])
                return f"{_escape(composed)}\n\n*Sources*\n{sources}"
            except WayfinderError as exc:  # no model answer: the hits themselves still answer
                log.warning("composing an answer failed (%s): answering with the hits", exc)
        lines = [f"Here is what I found for \u201c{_escape(question)}\u201d:"]
        for n, hit in enumerate(hits, start=1):
            snippet = " ".join(hit.snippet.split())
            snippet = snippet if len(snippet) <= SNIPPET_CHARS else snippet[: SNIPPET_CHARS - 1].rstrip() + "\u2026"
            lines.append(f"{n}. <{_link(hit.url)}|{_escape(hit.title)}>" + (f"\n> {_escape(snippet)}" if snippet else ""))
        return "\n".join(lines)

    async def _private(self, channel: str, user: str, thread_ts: str | None, text: str) -> None:
        await self._slack.chat_postEphemeral(channel=channel, user=user, text=text, thread_ts=thread_ts)


def _task(team: str, channel: str, user: str) -> str:
    """One user's conversation: a task id no other user shares (a grant's task belongs to one user)."""
    task = f"slack-{team}-{channel}-{user}"
    try:
        ids.task_id(task)
    except InvalidArgument as exc:
        raise InvalidArgument(f"Slack sent ids that make no task id: {exc}") from exc
    return task


def _escape(text: str) -> str:
    """Slack's three control characters, so no text can mention @channel or forge a link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _link(url: str) -> str:
    return _escape(url).replace("|", "%7C")
