"""What the bot does with a question, apart from how Slack delivers it (:mod:`slackbot.app`).

1. **Who asks.** The Slack user's e-mail address (``users.info``) is looked up in the Atlassian
   directory (Jira's user search); a user found there is the principal, anyone else gets no answer.
2. **As them, through a grant.** The bot holds a delegation grant from that user for this
   conversation (``task: slack-<team>-<channel>-<user>``, renewed by each question, expiring after
   ``grant_ttl``) and calls the MCP server with a token it signs for five minutes: ``sub`` the user,
   ``act.sub`` the bot, ``task`` the conversation. The server's gate checks the user's rights and
   the grant together (DESIGN.md A2); the bot sees only what the asker may see. The bot holds no
   OpenFGA credential: the server writes the grant (``POST /agent/grant``, for this agent, user
   and task alone, no longer than the agent's ``max_grant_ttl``) and answers the audience's checks
   (``POST /agent/audience``), both with the same signed token (:mod:`mcp_app.agents`).
3. **An answer from the authorized hits only.** With a Gemini key, composed by Gemini from the
   hits' titles and snippets, citing them; offline, the top hits with their snippets.
4. **Posted where every reader may see it, or to the asker alone (A12).** What an answer shows
   is every object its text names: the hits it cites and every page, issue, project or space a
   snippet or the composed text links to (:func:`core.references.references`). The readers of a
   private channel, a DM or a group DM are its members; of a public channel, the whole workspace
   (``users.list``), since anyone may open it and read its history later. The answer goes to the
   conversation only if every reader — the bot aside — is a full member of the bot's own team,
   mapped to a directory user allowed to view every object the answer shows (the server's live
   OpenFGA checks, one BatchCheck per user). Otherwise, or when that cannot be decided (a channel shared with
   another organisation, more readers than ``max_audience``, a guest, a stranger, a reader not in
   the directory, another bot, a link the bot cannot name by id, Slack or the server failing), it is
   an ephemeral message that only the asker sees. The asker's own DM with the bot has no other
   reader, ever: an answer there is posted without a check.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

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
from core import ids
from core.errors import ConfigurationError, InvalidArgument, WayfinderError
from core.models import Principal
from core.settings import SlackSettings
from core.references import UNRESOLVED, references
from mcp_app.agents import AUDIENCE_PATH, GRANT_PATH

log = logging.getLogger("wayfinder.slackbot")
T = TypeVar("T")
R = TypeVar("R")

_MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^>]*)?>")
# The opening of a link in Slack's mrkdwn; escaped text holds no ``<``, so only the bot's own
# source links have one.
_LINK_OPENING = re.compile(r"<[^|>]*\|")
#: characters of a hit's snippet an answer shows
SNIPPET_CHARS = 280
#: Slack users read at once (users.info and the directory)
CONCURRENT_MEMBERS = 8
#: seconds the bot waits for the MCP server's grant and audience answers
SERVER_TIMEOUT_S = 10.0
#: entries the bot asks for per users.list and conversations.members page
SLACK_PAGE = 200
#: conversation flags that let people beyond this workspace in: Slack Connect, other workspaces
#: of an Enterprise organisation, an invitation to share that is not accepted yet
_SHARED_FLAGS = ("is_shared", "is_ext_shared", "is_org_shared", "is_pending_ext_shared", "is_global_shared")
#: conversation fields listing the teams it is shared with, or is being shared with
_SHARED_TEAMS = ("connected_team_ids", "pending_connected_team_ids", "pending_shared")

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

    def token(self, principal: Principal, subject: str) -> str:
        """A token for ``principal``, naming its user by ``subject``: the raw directory name, which
        the server maps to the principal's id with :func:`core.ids.user_name`, as every entry does."""
        if ids.user_name(subject) != principal.user:
            raise ValueError("the token's subject is not the principal's user")
        now = int(time.time())
        claims = {
            "iss": self._settings.token_issuer, "aud": self._audience, "sub": subject, "act": {"sub": principal.agent},
            "task": principal.task, "iat": now, "exp": now + self._settings.token_lifetime_s, "jti": uuid.uuid4().hex,
        }
        return jwt.encode(claims, self._key, algorithm="RS256")


@dataclass(frozen=True)
class Asker:
    """Who asked: the Slack user, the principal the bot acts as for them, and their raw directory name."""

    slack_user: str
    principal: Principal
    name: str


class Delegation(Protocol):
    """What the bot asks of OpenFGA. It holds no OpenFGA credential: in production the MCP server
    answers (:class:`ServerDelegation`, :mod:`mcp_app.agents`)."""

    async def grant(self, principal: Principal, name: str, ttl: str) -> None:
        """Let the bot act for ``principal``'s user (raw directory ``name``) on its task for ``ttl``."""

    async def all_see(self, principal: Principal, name: str, readers: Sequence[str], objects: Sequence[str]) -> bool:
        """May every reader (raw directory names) view every object, asked as ``principal``?"""


class ServerDelegation:
    """The MCP server's agent endpoints, each call with a token the bot signs for the asker."""

    def __init__(self, mcp_url: str, signer: TokenSigner, timeout_s: float = SERVER_TIMEOUT_S) -> None:
        self._url, self._signer, self._timeout_s = httpx.URL(mcp_url), signer, timeout_s

    async def grant(self, principal: Principal, name: str, ttl: str) -> None:
        await self._post(GRANT_PATH, principal, name, {"ttl": ttl})

    async def all_see(self, principal: Principal, name: str, readers: Sequence[str], objects: Sequence[str]) -> bool:
        answer = await self._post(AUDIENCE_PATH, principal, name, {"readers": list(readers), "objects": list(objects)})
        return answer.get("all_may_see") is True

    async def _post(self, path: str, principal: Principal, name: str, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"authorization": f"Bearer {self._signer.token(principal, name)}"}
        async with httpx.AsyncClient(timeout=self._timeout_s) as client:
            response = await client.post(self._url.join(path), json=body, headers=headers)
        try:
            answer = response.json()
        except ValueError:
            answer = {}
        if response.status_code != 200 or not isinstance(answer, dict):
            error = answer.get("error") if isinstance(answer, dict) else None
            raise WayfinderError(f"the MCP server refused {path} (HTTP {response.status_code}): {error or 'no reason given'}")
        return answer


@dataclass(frozen=True)
class Account:
    """A Slack user as a reader: its directory user (None for bots, deleted accounts, accounts
    without an e-mail address and addresses the directory does not know), whether Slack marks it
    a guest (``is_restricted``, ``is_ultra_restricted``) or a stranger (``is_stranger``), and the
    team it belongs to."""

    user: str | None
    guest: bool
    stranger: bool
    team: str | None

    def reads_as(self, team: str) -> str | None:
        """The directory user whose rights bound what this account may be shown in ``team``'s
        conversations; None when nothing bounds it: an unmapped account, a guest, a stranger, or
        an account of another team."""
        if self.guest or self.stranger or self.team != team:
            return None
        return self.user


class Directory:
    """Slack user → directory user, remembered for ``ttl_s`` (found or not)."""

    def __init__(self, slack: AsyncWebClient, lookup: Callable[[str], Awaitable[str | None]], ttl_s: float) -> None:
        self._slack, self._lookup, self._ttl_s = slack, lookup, ttl_s
        self._known: dict[str, tuple[float, Account]] = {}
        self._emails: dict[str, tuple[float, str | None]] = {}

    async def user_of(self, slack_user: str) -> str | None:
        """The directory's name for a Slack user, raw (an id only through ``ids.user_name``); None
        for bots, deleted accounts, accounts without an e-mail address and addresses the directory
        does not know. Slack or directory failures raise."""
        return (await self.account(slack_user)).user

    async def account(self, slack_user: str) -> Account:
        """A Slack user's account, from ``users.info``."""
        held = self._known.get(slack_user)
        if held is not None and time.monotonic() - held[0] < self._ttl_s:
            return held[1]
        found = await self.account_of((await self._slack.users_info(user=slack_user))["user"])
        self._known[slack_user] = (time.monotonic(), found)
        return found

    async def account_of(self, user: dict[str, Any]) -> Account:
        """The account of a user object Slack returned (``users.info``, ``users.list``)."""
        team = user.get("team_id")
        return Account(
            user=await self._directory_user(user),
            guest=bool(user.get("is_restricted") or user.get("is_ultra_restricted")),
            stranger=bool(user.get("is_stranger")),
            team=team if isinstance(team, str) else None,
        )

    async def _directory_user(self, user: dict[str, Any]) -> str | None:
        if user.get("deleted") or user.get("is_bot") or user.get("is_app_user") or user.get("id") == "USLACKBOT":
            return None
        email = (user.get("profile") or {}).get("email")
        if not isinstance(email, str) or "@" not in email:
            return None
        held = self._emails.get(email)
        if held is not None and time.monotonic() - held[0] < self._ttl_s:
            return held[1]
        found = await self._lookup(email)
        self._emails[email] = (time.monotonic(), found)
        return found


class Audience:
    """May every reader of a conversation see every cited object (DESIGN.md A12)?"""

    def __init__(self, slack: AsyncWebClient, directory: Directory, delegation: Delegation, max_members: int) -> None:
        self._slack, self._directory, self._delegation = slack, directory, delegation
        self._max_members = max_members
        self._own: tuple[str, str | None] | None = None  # the bot's team and user, read once from auth.test

    async def all_may_see(self, channel: str, cited: Sequence[str] | None, bot_user: str | None, asker: Asker) -> bool:
        """True only when it is decided that they may; any doubt or failure is False, and so is
        ``cited`` None (what the answer shows is not known). The asker's own DM with the bot needs
        no check: no one else reads it, ever, and an ephemeral answer would show the asker the same.
        The readers' rights are the server's answer (one question per answer), asked as the asker."""
        try:
            conversation: dict[str, Any] = (await self._slack.conversations_info(channel=channel))["channel"]
            if conversation.get("is_im") is True and conversation.get("user") == asker.slack_user:
                return True
            if cited is None:
                raise _Undecided("the answer links to a page or issue the bot cannot name by id")
            if not cited:
                return True  # nothing shown
            users = await self._readers(channel, conversation, bot_user)
            return await self._delegation.all_see(asker.principal, asker.name, sorted(users), list(cited))
        except Exception as exc:  # noqa: BLE001 - whatever failed, it is not decided that they may: fail closed
            why = str(exc) if isinstance(exc, _Undecided) else type(exc).__name__
            log.warning("could not decide who may read channel %s (%s): answering the asker alone", channel, why)
            return False

    async def _readers(self, channel: str, conversation: dict[str, Any], bot_user: str | None) -> set[str]:
        """The directory users of everyone who may read ``channel``; raises _Undecided when some
        reader's rights bound nothing or the readers cannot be known."""
        team, own_user = await self._bot_identity()
        bots = {bot_user, own_user}
        scope = _scope(conversation, team)
        members = [m for m in await self._members(channel) if m not in bots]
        if not members:
            raise _Undecided("no member but the bot")
        accounts = await _bounded(self._directory.account, members)
        if scope == "workspace":
            listed = await self._workspace(skip={*members, *bots}, counted=len(members))
            accounts += await _bounded(self._directory.account_of, listed)
        users = [account.reads_as(team) for account in accounts]
        if None in users:
            raise _Undecided("a reader is a guest, a stranger, another bot or not in the directory")
        return {user for user in users if user is not None}

    async def _bot_identity(self) -> tuple[str, str | None]:
        """The bot's team (an account of any other is a stranger here) and its own user."""
        if self._own is None:
            found = await self._slack.auth_test()
            team, user = found.get("team_id"), found.get("user_id")
            if not isinstance(team, str) or not team:
                raise _Undecided("auth.test named no team")
            self._own = (team, user if isinstance(user, str) else None)
        return self._own

    async def _members(self, channel: str) -> list[str]:
        members: list[str] = []
        async for page in self._pages(self._slack.conversations_members, channel=channel):
            members += page.get("members", [])
            if len(members) > self._max_members:
                raise _Undecided("more members than max_audience")
        return members

    async def _workspace(self, skip: set[str | None], counted: int) -> list[dict[str, Any]]:
        """Everyone in the workspace who may open a public channel, but the ``skip``ped: no
        deleted account, bot or Slackbot (they read nothing), and no guest, who opens only the
        conversations it is invited to (a guest among the members was judged with them). A
        stranger listed stays, and makes the answer private."""
        listed: list[dict[str, Any]] = []
        async for page in self._pages(self._slack.users_list):
            listed += [user for user in page.get("members", []) if user.get("id") not in skip and _opens_public_channels(user)]
            if counted + len(listed) > self._max_members:
                raise _Undecided("more people in the workspace than max_audience")
        return listed

    @staticmethod
    async def _pages(method: Callable[..., Awaitable[Any]], **args: Any) -> AsyncIterator[Any]:
        cursor: str | None = None
        while True:
            page = await method(limit=SLACK_PAGE, **args, **({"cursor": cursor} if cursor else {}))
            yield page
            cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                return


class _Undecided(WayfinderError):
    """Who may read a conversation is not decided: the answer goes to the asker alone."""


def _scope(conversation: dict[str, Any], team: str) -> str:
    """Who reads a conversation: its ``members`` (a private channel, a DM, a group DM) or the whole
    ``workspace`` (a public channel: anyone may open it and read its history). A conversation
    people of other teams may read, or one of a kind not known, raises _Undecided."""
    teams = {other for field in _SHARED_TEAMS for other in conversation.get(field) or ()}
    if any(conversation.get(flag) for flag in _SHARED_FLAGS) or teams - {team}:
        raise _Undecided("the conversation is shared beyond this workspace")
    if conversation.get("is_im") or conversation.get("is_mpim") or conversation.get("is_group") or conversation.get("is_private") is True:
        return "members"
    if conversation.get("is_channel") is True and conversation.get("is_private") is False:
        return "workspace"
    raise _Undecided("the kind of conversation is not known")


def _opens_public_channels(user: dict[str, Any]) -> bool:
    if user.get("deleted") or user.get("is_bot") or user.get("is_app_user") or user.get("id") == "USLACKBOT":
        return False
    return not (user.get("is_restricted") or user.get("is_ultra_restricted"))


async def _bounded(work: Callable[[T], Awaitable[R]], items: Iterable[T]) -> list[R]:
    """``work`` on every item, at most CONCURRENT_MEMBERS at once, the results in order."""
    limit = asyncio.Semaphore(CONCURRENT_MEMBERS)

    async def one(item: T) -> R:
        async with limit:
            return await work(item)

    return list(await asyncio.gather(*(one(item) for item in items)))


Compose = Callable[[str, Sequence[tuple[str, str]]], Awaitable[str]]


class SlackBot:
    def __init__(
        self,
        settings: SlackSettings,
        slack: AsyncWebClient,
        delegation: Delegation,
        directory: Directory,
        audience: Audience,
        signer: TokenSigner,
        mcp_url: str,
        compose: Compose | None = None,
    ) -> None:
        try:  # a bad agent id or lifetime is a configuration error at start, not at the first question
            ids.agent_id(settings.agent)
            grants.parse_ttl(settings.grant_ttl)
        except InvalidArgument as exc:
            raise ConfigurationError(f"WAYFINDER_SLACK__AGENT / WAYFINDER_SLACK__GRANT_TTL: {exc}") from exc
        self._settings, self._slack, self._delegation = settings, slack, delegation
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
        asker = await self._directory.user_of(user)  # a raw directory name: an id only through ids.user_name
        if asker is None:
            await self._private(channel, user, thread_ts, NO_USER)
            return
        task = _task(team, channel, user)
        principal = Principal(user=ids.user_name(asker), agent=self._settings.agent, task=task)
        await self._delegation.grant(principal, asker, self._settings.grant_ttl)
        try:
            hits = await self._search(principal, asker, question)
        except ToolError as exc:
            await self._private(channel, user, thread_ts, f"Wayfinder could not answer: {_escape(str(exc))}")
            return
        if not hits:
            await self._private(channel, user, thread_ts, NOTHING.format(question=_escape(question)))
            return
        message = await self._message(question, hits)
        if await self._audience.all_may_see(channel, _shown(message, hits), bot_user, Asker(user, principal, asker)):
            await self._slack.chat_postMessage(channel=channel, text=message, thread_ts=thread_ts, unfurl_links=False, unfurl_media=False)
        else:
            await self._private(channel, user, thread_ts, f"{message}\n\n{PRIVATE}")

    async def _search(self, principal: Principal, subject: str, question: str) -> list[Hit]:
        async with Client(self._mcp_url, auth=self._signer.token(principal, subject)) as client:
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


def _shown(message: str, hits: Sequence[Hit]) -> list[str] | None:
    """Typed ids of every object ``message`` shows: the hits, whose source links the bot wrote,
    and every object the rest of its text names (a link in a snippet or in the composed text).
    None when the text points into Confluence or Jira without an id: what it shows is not known."""
    own = {f"<{_link(hit.url)}|" for hit in hits}
    rest = _LINK_OPENING.sub(lambda m: " " if m[0] in own else m[0], message)
    named = references(rest)
    if UNRESOLVED in named:
        return None
    return sorted({hit.id for hit in hits} | named)


def _escape(text: str) -> str:
    """Slack's three control characters, so no text can mention @channel or forge a link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _link(url: str) -> str:
    return _escape(url).replace("|", "%7C")
