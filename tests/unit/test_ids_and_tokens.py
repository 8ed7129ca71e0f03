"""Edge inputs: ids match whole and bounded, tokens are long and compared as digests."""

import pytest
from pydantic import ValidationError

from core import ids
from core.errors import ConfigurationError, InvalidArgument
from core.models import Principal
from core.settings import MCPSettings, TokenPrincipal
from mcp_app.auth import StaticTokens

LONG = "x" * 32


@pytest.mark.parametrize(
    "bad",
    ["page:1\n", "page:1 ", " page:1", "page:", "page:1a", "page:" + "1" * 21, "space:", "space:1AB", "space:A\n",
     "issue:hive-1", "issue:HIVE-", "issue:HIVE-1\n", "project:hive", "task:x", "page", "", "p" * 10_000, None, 42],
)
def test_malformed_ids_are_invalid_arguments(bad):
    with pytest.raises(InvalidArgument) as refused:
        ids.parse(bad)
    assert len(str(refused.value)) < 200  # a huge input is not echoed back whole


@pytest.mark.parametrize("good", ["page:27362069", "space:HIVE", "space:a_b-c~d", "project:HIVE", "issue:HIVE-1234"])
def test_well_formed_ids_parse(good):
    assert ":".join(ids.parse(good)) == good


@pytest.mark.parametrize("name", ["alice\n", "*", "a:b", "a#member", "", "a b", "-a"])
def test_principal_parts_are_ids(name):
    with pytest.raises(InvalidArgument):
        Principal(user=name)
    with pytest.raises(InvalidArgument):
        Principal(user="alice", agent=name, task="t")


async def test_tokens_map_to_users_and_agents_and_unknown_tokens_to_nobody():
    verifier = StaticTokens({LONG: "alice", "y" * 40: TokenPrincipal(user="alice", agent="bot", task="weekly")})
    user = await verifier.verify_token(LONG)
    agent = await verifier.verify_token("y" * 40)
    assert (user.subject, user.client_id, user.claims) == ("alice", "user:alice", {"sub": "alice"})
    assert (agent.subject, agent.client_id) == ("alice", "agent:bot")
    assert agent.claims == {"sub": "alice", "act": {"sub": "bot"}, "task": "weekly"}
    assert await verifier.verify_token(LONG[:-1]) is None and await verifier.verify_token("") is None


@pytest.mark.parametrize(
    ("tokens", "needle"),
    [
        ({"short": "alice"}, "shorter than 32"),
        ({LONG: " "}, "invalid user name"),
        ({LONG: TokenPrincipal(user="alice", agent="bot")}, "both agent and task"),
    ],
)
def test_bad_tokens_are_refused_at_start_up(tokens, needle):
    with pytest.raises(ConfigurationError, match=needle):
        StaticTokens(tokens)


def test_token_settings_take_users_or_delegations_from_json():
    settings = MCPSettings.model_validate({"tokens": {LONG: "alice", "z" * 32: {"user": "bob", "agent": "a", "task": "t"}}})
    assert settings.tokens[LONG] == "alice" and settings.tokens["z" * 32].agent == "a"
    with pytest.raises(ValidationError):
        MCPSettings.model_validate({"tokens": {LONG: {"user": "bob", "role": "admin"}}})


@pytest.mark.parametrize(
    "claims",
    [
        {"sub": "alice", "act": "digest-bot", "task": "t"},
        {"sub": "alice", "act": ["digest-bot"], "task": "t"},
        {"sub": "alice", "act": {"sub": 5}, "task": "t"},
        {"sub": "alice", "act": {"sub": "digest-bot"}},
        {"sub": "alice", "task": "t"},
    ],
)
def test_malformed_delegation_claims_are_refused_not_read_as_the_user(monkeypatch, claims):
    from fastmcp.server.auth import AccessToken

    from core.errors import Unauthenticated
    from mcp_app import auth

    token = AccessToken(token="x" * 40, client_id="c", subject="alice", scopes=[], claims=claims)
    monkeypatch.setattr(auth, "get_access_token", lambda: token)
    with pytest.raises(Unauthenticated):
        auth.http_identity()


def test_every_entry_maps_a_name_to_one_id_and_no_name_passes_as_another_users_id(monkeypatch):
    """DESIGN.md A14: a Data Center user may pick any username, including one spelled like the
    id Wayfinder gives another user (a name OpenFGA cannot hold becomes a digest)."""
    from fastmcp.server.auth import AccessToken

    from mcp_app import auth

    john = ids.user_name("john smith")
    assert john.startswith("x-") and ids.user_name("john smith") == john  # one id, the same every time
    assert ids.user_name("alice") == "alice"  # plain names are their own ids

    def principal(sub: str) -> Principal:
        token = AccessToken(token="x" * 40, client_id="c", subject=sub, scopes=[], claims={"sub": sub})
        monkeypatch.setattr(auth, "get_access_token", lambda: token)
        return auth.http_identity()

    assert principal(john).user != john  # a token naming the impostor, whose username is john's id, is not john
    assert principal("john smith").user == john  # a token naming john is john
    assert auth.fixed_identity(john)().user != john
    assert auth.fixed_identity("alice#member")().subject != "user:alice#member"  # never a userset, whatever the name


async def test_a_configured_token_names_a_user_as_every_entry_does():
    verifier = StaticTokens({LONG: "john smith", "y" * 40: ids.user_name("john smith")})
    john, impostor = await verifier.verify_token(LONG), await verifier.verify_token("y" * 40)
    assert john.subject == "john smith"  # the raw name travels; http_identity maps it once
    assert ids.user_name(john.subject) != ids.user_name(impostor.subject)
