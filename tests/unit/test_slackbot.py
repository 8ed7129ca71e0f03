"""The Slack bot's parts that need no Slack: the tokens it signs, what it escapes, its settings."""

from __future__ import annotations

import jwt
import pytest
from pydantic import SecretStr

from core import ids
from core.errors import ConfigurationError, InvalidArgument
from core.models import Principal
from core.settings import Settings, SlackSettings
from slackbot.app import _Once, check_mode
from slackbot.bot import _MENTION, TokenSigner, _escape, _task
from tests.tokens import KEY

AUDIENCE = "https://wayfinder.example.com/mcp"


def test_a_token_names_the_user_the_bot_and_the_conversation_and_expires_soon() -> None:
    settings = SlackSettings(token_private_key=SecretStr(KEY.as_pem(private=True).decode()), token_issuer="bot-issuer")
    token = TokenSigner(settings, AUDIENCE).token(Principal(user="alice", agent="slack-bot", task="slack-T1-C1-U1"), "alice")
    claims = jwt.decode(token, KEY.as_pem(private=False), algorithms=["RS256"], audience=AUDIENCE, issuer="bot-issuer")
    assert (claims["sub"], claims["act"], claims["task"]) == ("alice", {"sub": "slack-bot"}, "slack-T1-C1-U1")
    assert claims["exp"] - claims["iat"] == settings.token_lifetime_s
    with pytest.raises(jwt.InvalidAudienceError):
        jwt.decode(token, KEY.as_pem(private=False), algorithms=["RS256"], audience="https://other.example.com/mcp")


@pytest.mark.parametrize(
    ("key", "message"),
    [(None, "TOKEN_PRIVATE_KEY is required"), ("not a key", "not an unencrypted PEM private key")],
)
def test_the_signing_key_is_required_and_must_be_a_private_key(key: str | None, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        TokenSigner(SlackSettings(token_private_key=SecretStr(key) if key else None), AUDIENCE)


def test_each_mode_names_the_secret_it_lacks() -> None:
    with pytest.raises(ConfigurationError, match="SIGNING_SECRET"):
        check_mode(Settings(), socket_mode=False)
    with pytest.raises(ConfigurationError, match="APP_TOKEN"):
        check_mode(Settings(), socket_mode=True)


def test_text_cannot_mention_everyone_or_forge_a_link() -> None:
    assert _escape("<!channel> see <https://evil.example|docs> & more") == "&lt;!channel&gt; see &lt;https://evil.example|docs&gt; &amp; more"


def test_mentions_are_taken_out_of_the_question() -> None:
    assert " ".join(_MENTION.sub(" ", "<@UBOT> how does <@U123|bob> configure LDAP?").split()) == "how does configure LDAP?"


def test_a_conversation_task_is_one_users_and_ids_that_make_none_are_refused() -> None:
    assert _task("T1", "C1", "U1") != _task("T1", "C1", "U2")
    with pytest.raises(InvalidArgument, match="no task id"):
        _task("T1", "C1#member", "U1")


def test_an_event_is_seen_once_and_the_memory_is_bounded() -> None:
    once = _Once(2)
    assert [once.again(e) for e in ("a", "a", "b", "c", "a", None, None)] == [False, True, False, False, False, False, False]


def test_a_token_names_its_user_by_the_raw_name_the_server_maps_to_the_principal() -> None:
    """DESIGN.md A14: the server maps every token's ``sub`` through ids.user_name, so the bot signs
    the directory's raw name, never the id (which the server would map again)."""
    settings = SlackSettings(token_private_key=SecretStr(KEY.as_pem(private=True).decode()), token_issuer="bot-issuer")
    john = Principal(user=ids.user_name("john smith"), agent="slack-bot", task="slack-T1-C1-U1")
    token = TokenSigner(settings, AUDIENCE).token(john, "john smith")
    claims = jwt.decode(token, KEY.as_pem(private=False), algorithms=["RS256"], audience=AUDIENCE, issuer="bot-issuer")
    assert claims["sub"] == "john smith" and ids.user_name(claims["sub"]) == john.user
    with pytest.raises(ValueError, match="subject"):
        TokenSigner(settings, AUDIENCE).token(john, john.user)
