"""Who is calling: a bearer token over HTTP, the configured local user over stdio."""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping

from fastmcp.server.auth import AccessToken, TokenVerifier
from fastmcp.server.dependencies import get_access_token

from core import ids
from core.errors import ConfigurationError, InvalidArgument, Unauthenticated
from core.models import Principal

Identify = Callable[[], Principal]


class StaticTokens(TokenVerifier):
    """Development tokens from settings (token → user id). Unknown tokens get HTTP 401."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        super().__init__()
        for user in tokens.values():
            try:
                ids.user_id(user)
            except InvalidArgument as exc:
                raise ConfigurationError(f"mcp.tokens: {exc}") from exc
        self._tokens = dict(tokens)

    async def verify_token(self, token: str) -> AccessToken | None:
        user = None
        for known, owner in self._tokens.items():  # compare every token in constant time
            if hmac.compare_digest(known.encode(), token.encode()):
                user = owner
        if user is None:
            return None
        return AccessToken(token=token, client_id=user, subject=user, scopes=[], claims={"sub": user})


def http_identity() -> Principal:
    token = get_access_token()
    if token is None or not token.subject:
        raise Unauthenticated("no verified bearer token")
    try:
        ids.user_id(token.subject)  # never a wildcard or a userset such as "x#member"
    except InvalidArgument as exc:
        raise Unauthenticated("the token's subject is not a user id") from exc
    return Principal(user=token.subject)


def fixed_identity(user: str | None) -> Identify:
    """The stdio principal. There is no default user: stdio without one is a configuration error."""
    if not user:
        raise ConfigurationError("stdio needs WAYFINDER_MCP__STDIO_PRINCIPAL: the user the local agent acts for")
    ids.user_id(user)
    principal = Principal(user=user)
    return lambda: principal
