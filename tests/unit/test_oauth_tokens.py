"""The MCP server as an OAuth resource server: which JWTs it accepts, and which settings it refuses.
Real keys, real signatures (joserfc); the HTTP side (JWKS over HTTP, metadata, 401 challenge) is in
tests/e2e/test_mcp_oauth.py."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
from fastmcp.server.auth import RemoteAuthProvider

from core.errors import ConfigurationError
from core.models import Principal
from core.settings import AgentIssuer, MCPSettings, OAuthSettings
from mcp_app.auth import OAuthTokens, StaticTokens, http_auth
from mcp_app.server import create_server
from tests import tokens
from tests.tokens import ISSUER, KEY, OTHER_KEY

AUDIENCE = "https://wayfinder.example.com/mcp"
mint = partial(tokens.mint, AUDIENCE)
forged = partial(tokens.forged, AUDIENCE)


def verifier(**overrides: Any) -> OAuthTokens:
    oauth = OAuthSettings(issuer=ISSUER, public_key=KEY.as_pem(private=False).decode(), **overrides)
    return OAuthTokens(oauth, AUDIENCE)


async def test_a_token_of_the_provider_for_this_server_names_its_user() -> None:
    access = await verifier().verify_token(mint())
    assert access is not None and access.subject == "alice" and access.client_id == "user:alice"
    delegated = await verifier().verify_token(mint(act={"sub": "research-agent"}, task="t-1"))
    assert delegated is not None and delegated.client_id == "agent:research-agent"
    assert delegated.claims["act"] == {"sub": "research-agent"} and delegated.claims["task"] == "t-1"


@pytest.mark.parametrize(
    ("why", "token"),
    [
        ("expired", lambda: mint(exp=int(time.time()) - 5)),
        ("no expiry", lambda: mint(exp=None)),
        ("no subject", lambda: mint(sub=None)),
        ("not valid yet", lambda: mint(nbf=int(time.time()) + 600)),
        ("issued in the future", lambda: mint(iat=int(time.time()) + 600)),
        ("another audience", lambda: mint(aud="https://other-service.example.com")),
        ("another issuer", lambda: mint(iss="https://evil.example.com/")),
        ("another key", lambda: mint(key=OTHER_KEY)),
        ("unsigned, alg=none", lambda: forged("none")),
        ("HS256 keyed with the public key", lambda: forged("HS256")),
        ("not a JWT", lambda: "x" * 40),
    ],
)
async def test_tokens_a_resource_server_must_refuse(why: str, token: Any) -> None:
    assert await verifier().verify_token(token()) is None, why


async def test_clock_skew_covers_a_token_issued_a_little_ahead_of_this_clock() -> None:
    soon = int(time.time()) + 30
    assert await verifier(clock_skew_s=60).verify_token(mint(iat=soon, nbf=soon)) is not None
    assert await verifier(clock_skew_s=0).verify_token(mint(iat=soon, nbf=soon)) is None


async def test_required_scopes() -> None:
    strict = verifier(required_scopes=["wayfinder"])
    assert await strict.verify_token(mint(scope="openid wayfinder")) is not None
    assert await strict.verify_token(mint(scope="openid")) is None


def test_oauth_settings_that_are_refused() -> None:
    key = KEY.as_pem(private=False).decode()
    with pytest.raises(ConfigurationError, match="development only"):
        http_auth(MCPSettings(tokens={"t" * 40: "alice"}, oauth=OAuthSettings(issuer=ISSUER, public_key=key)))
    with pytest.raises(ConfigurationError, match="exactly one of"):
        http_auth(MCPSettings(oauth=OAuthSettings(issuer=ISSUER)))
    with pytest.raises(ConfigurationError, match="exactly one of"):
        http_auth(MCPSettings(oauth=OAuthSettings(issuer=ISSUER, public_key=key, jwks_uri="http://127.0.0.1:1/jwks")))
    with pytest.raises(ConfigurationError, match="never accepted"):
        http_auth(MCPSettings(oauth=OAuthSettings(issuer=ISSUER, public_key=key, algorithm="none")))
    for restricting in ({"required_scopes": ["wayfinder"]}, {"tool_scopes": {"fetch": ["wayfinder:read"]}}):
        with pytest.raises(ConfigurationError, match="need WAYFINDER_MCP__OAUTH__ISSUER"):
            http_auth(MCPSettings(tokens={"t" * 40: "alice"}, oauth=OAuthSettings(**restricting)))


def test_tool_scopes_must_name_tools() -> None:
    @asynccontextmanager
    async def no_services() -> AsyncIterator[None]:
        yield None

    with pytest.raises(ConfigurationError, match="names no tool: fetch_everything"):
        create_server(no_services, lambda: Principal(user="alice"), observe=lambda *_: None, tool_scopes={"fetch_everything": ["x"]})


def test_without_an_issuer_the_static_development_tokens_are_used() -> None:
    assert isinstance(http_auth(MCPSettings(tokens={"t" * 40: "alice"})), StaticTokens)
    provider = http_auth(MCPSettings(port=18765, oauth=OAuthSettings(issuer=ISSUER, public_key=KEY.as_pem(private=False).decode())))
    assert isinstance(provider, RemoteAuthProvider)
    assert [str(server) for server in provider.authorization_servers] == [ISSUER]
    assert provider.token_verifier.audience == "http://127.0.0.1:18765/mcp"  # bound to this server by default


BOT = "https://slackbot.example.com/"


def with_agent_issuer(**oauth: Any) -> Any:
    """A server trusting the company's provider (KEY) and the Slack bot's own key (OTHER_KEY)."""
    agent = AgentIssuer(issuer=BOT, agent="slack-bot", public_key=OTHER_KEY.as_pem(private=False).decode())
    return http_auth(MCPSettings(oauth=OAuthSettings(audience=AUDIENCE, agent_issuers=[agent], **oauth))).token_verifier


async def test_an_agents_key_signs_only_tokens_that_act_for_a_user_as_that_agent() -> None:
    """Issue 47: the bot's key must not mint a token that reads as a user alone (no ``act``), nor
    as another agent; with a task and its own agent id, its tokens still need a live grant."""
    verifier = with_agent_issuer(issuer=ISSUER, public_key=KEY.as_pem(private=False).decode())
    bot = partial(mint, key=OTHER_KEY, iss=BOT)
    accepted = await verifier.verify_token(bot(act={"sub": "slack-bot"}, task="slack-T-C-U"))
    assert accepted is not None and accepted.client_id == "agent:slack-bot"
    for why, token in [
        ("no act: the user alone", bot()),
        ("another agent", bot(act={"sub": "digest-bot"}, task="t")),
        ("no task", bot(act={"sub": "slack-bot"})),
        ("the provider's key under the bot's name", mint(iss=BOT, act={"sub": "slack-bot"}, task="t")),
        ("the bot's key under the provider's name", mint(key=OTHER_KEY, act={"sub": "slack-bot"}, task="t")),
    ]:
        assert await verifier.verify_token(token) is None, why
    assert (await verifier.verify_token(mint())).subject == "alice"  # the provider's own tokens, beside the bot's


async def test_an_agent_issuer_alone_accepts_nothing_but_its_agents_tokens() -> None:
    verifier = with_agent_issuer()
    assert await verifier.verify_token(mint()) is None  # no provider configured: its tokens are strangers
    assert await verifier.verify_token(mint(key=OTHER_KEY, iss=BOT, act={"sub": "slack-bot"}, task="t")) is not None
    with pytest.raises(ConfigurationError, match="trusted once"):
        with_agent_issuer(issuer=BOT, public_key=KEY.as_pem(private=False).decode())
