"""How Slack reaches the bot: HTTP events (every request's signature checked with the signing
secret, by slack-bolt) or Socket Mode (an outbound WebSocket, for deployments that take no inbound
traffic). Either way an ``app_mention`` in a conversation, or a message in the bot's DM, becomes
one :meth:`SlackBot.answer`; events Slack delivers again (retries, reconnects) are answered once.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from core.errors import ConfigurationError
from core.settings import Settings
from pipeline.sources.jira_rest import JiraRestSource
from slackbot.bot import Audience, Directory, ServerDelegation, SlackBot, TokenSigner

EVENTS_PATH = "/slack/events"
#: event ids remembered to answer each event once
REMEMBERED_EVENTS = 4096


def web_client(settings: Settings) -> AsyncWebClient:
    slack = settings.slack
    if slack.bot_token is None:
        raise ConfigurationError("WAYFINDER_SLACK__BOT_TOKEN is required: the bot token (xoxb-…) of the Slack app")
    options: dict[str, Any] = {"base_url": slack.api_url} if slack.api_url else {}
    client = AsyncWebClient(token=slack.bot_token.get_secret_value(), **options)
    client.retry_handlers.append(AsyncRateLimitErrorRetryHandler(max_retry_count=2))  # 429: wait as Slack says, twice
    return client


def mcp_url(settings: Settings) -> str:
    return settings.slack.mcp_url or f"http://{settings.mcp.host}:{settings.mcp.port}/mcp"


@asynccontextmanager
async def opened_bot(settings: Settings, slack: AsyncWebClient) -> AsyncIterator[SlackBot]:
    """The bot with its backends: the MCP server (searches, grants and the audience's checks),
    the Atlassian directory, and Gemini when a key is set. It opens no OpenFGA connection."""
    if not settings.jira.url:
        raise ConfigurationError("the Slack bot finds users by e-mail through Jira's user search: set WAYFINDER_JIRA__URL")
    directory_source = JiraRestSource(settings.jira, settings.jira.url)
    compose = None
    if settings.gemini.api_key is not None:
        from core.providers.gemini import GeminiAnswers

        compose = GeminiAnswers(settings.gemini).compose
    url = mcp_url(settings)
    signer = TokenSigner(settings.slack, settings.slack.token_audience or url)
    directory = Directory(slack, directory_source.user_by_email, settings.slack.directory_ttl_s)
    delegation = ServerDelegation(url, signer)
    audience = Audience(slack, directory, delegation, settings.slack.max_audience)
    yield SlackBot(settings.slack, slack, delegation, directory, audience, signer, url, compose)


class _Once:
    """Has this event id been seen already?"""

    def __init__(self, size: int) -> None:
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._size = size

    def again(self, event_id: str | None) -> bool:
        if not event_id:
            return False
        if event_id in self._seen:
            return True
        self._seen[event_id] = None
        if len(self._seen) > self._size:
            self._seen.popitem(last=False)
        return False


def bolt_app(settings: Settings, slack: AsyncWebClient, bot: SlackBot) -> AsyncApp:
    """The listeners. Requests over HTTP must carry a valid signature (slack-bolt answers 401
    otherwise); a listener runs after Slack has its acknowledgement, so no answer waits on a search."""
    secret = settings.slack.signing_secret
    app = AsyncApp(client=slack, signing_secret=secret.get_secret_value() if secret else None, process_before_response=False)
    once = _Once(REMEMBERED_EVENTS)

    async def ask(event: dict[str, Any], body: dict[str, Any], context: AsyncBoltContext, thread_ts: str | None) -> None:
        if once.again(body.get("event_id")):
            return
        await bot.answer(
            team=body.get("team_id") or context.team_id or "team", channel=event["channel"], user=event["user"],
            text=event.get("text", ""), thread_ts=thread_ts, bot_user=context.bot_user_id,
        )

    @app.event("app_mention")
    async def mention(event: dict[str, Any], body: dict[str, Any], context: AsyncBoltContext) -> None:
        if event.get("user"):  # answered in the mention's thread
            await ask(event, body, context, event.get("thread_ts") or event.get("ts"))

    @app.event("message")
    async def direct_message(event: dict[str, Any], body: dict[str, Any], context: AsyncBoltContext) -> None:
        # Only what a person writes to the bot in its DM; in conversations the bot answers mentions.
        if event.get("channel_type") == "im" and not event.get("subtype") and not event.get("bot_id") and event.get("user"):
            await ask(event, body, context, event.get("thread_ts"))

    return app


def http_app(app: AsyncApp) -> Starlette:
    """``POST /slack/events``: the Events API's request URL."""
    handler = AsyncSlackRequestHandler(app)

    async def events(request: Request) -> Response:
        return await handler.handle(request)

    return Starlette(routes=[Route(EVENTS_PATH, events, methods=["POST"])])


def check_mode(settings: Settings, socket_mode: bool) -> None:
    slack = settings.slack
    if socket_mode and slack.app_token is None:
        raise ConfigurationError("Socket Mode needs WAYFINDER_SLACK__APP_TOKEN: an app-level token (xapp-…) with connections:write")
    if not socket_mode and slack.signing_secret is None:
        raise ConfigurationError("HTTP events need WAYFINDER_SLACK__SIGNING_SECRET: the app's signing secret, to verify Slack's requests")


async def run(settings: Settings, *, socket_mode: bool) -> None:
    """``wayfinder slackbot``: serve until stopped."""
    import asyncio

    import uvicorn
    from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

    check_mode(settings, socket_mode)
    slack = web_client(settings)
    async with opened_bot(settings, slack) as bot:
        app = bolt_app(settings, slack, bot)
        if socket_mode:
            assert settings.slack.app_token is not None
            handler = AsyncSocketModeHandler(app, settings.slack.app_token.get_secret_value())
            await handler.connect_async()
            try:
                await asyncio.Event().wait()  # until the process is stopped
            finally:
                await handler.close_async()
        else:
            config = uvicorn.Config(http_app(app), host=settings.slack.host, port=settings.slack.port, log_level="info")
            await uvicorn.Server(config).serve()
