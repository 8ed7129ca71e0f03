"""Who is calling: a bearer token over HTTP, the configured local user over stdio.

A token names a user, or an agent acting for a user on one task (its claims carry ``act.sub``
and ``task``, the shape OAuth token exchange gives delegated tokens). Either way the principal is
built from the verified token of the HTTP request being served, never from the session: the MCP
SDK also refuses a session id presented with another credential than the one that opened it.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping

from fastmcp.server.auth import AccessToken, TokenVerifier
from fastmcp.server.dependencies import get_access_token

from core.errors import ConfigurationError, InvalidArgument, Unauthenticated
from core.models import Principal
from core.settings import MIN_TOKEN_CHARS, TokenPrincipal

Identify = Callable[[], Principal]


def _fingerprint(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class StaticTokens(TokenVerifier):
    """Development tokens from settings (token → user, or → user + agent + task). Unknown tokens get
    HTTP 401. Tokens are held and compared as SHA-256 digests, all of one length, in constant time."""

    def __init__(self, tokens: Mapping[str, str | TokenPrincipal]) -> None:
        super().__init__()
        self._principals: list[tuple[bytes, Principal]] = []
        for number, (token, owner) in enumerate(tokens.items(), start=1):
            if len(token) < MIN_TOKEN_CHARS:
                raise ConfigurationError(
                    f"mcp.tokens: token #{number} is shorter than {MIN_TOKEN_CHARS} characters; "
                    "use e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
                )
            fields = owner.model_dump() if isinstance(owner, TokenPrincipal) else {"user": owner}
            try:
                principal = Principal(**fields)
            except (InvalidArgument, ValueError) as exc:  # ValueError: pydantic's ValidationError
                raise ConfigurationError(f"mcp.tokens: token #{number}: {exc}") from exc
            self._principals.append((_fingerprint(token), principal))

    async def verify_token(self, token: str) -> AccessToken | None:
        presented = _fingerprint(token)
        found = None
        for known, principal in self._principals:  # every entry is compared: no early exit
            if hmac.compare_digest(known, presented):
                found = principal
        if found is None:
            return None
        claims: dict[str, object] = {"sub": found.user}
        if found.agent is not None:
            claims |= {"act": {"sub": found.agent}, "task": found.task}
        # A user's own token and an agent's token never share a client id, so never an MCP session;
        # the principal itself always comes from the token of the request being served.
        client_id = f"agent:{found.agent}" if found.agent else f"user:{found.user}"
        return AccessToken(token=token, client_id=client_id, subject=found.user, scopes=[], claims=claims)


def http_identity() -> Principal:
    """The principal of the HTTP request being served, from its verified token."""
    token = get_access_token()
    if token is None or not token.subject:
        raise Unauthenticated("a verified user is required")
    act, task = token.claims.get("act"), token.claims.get("task")
    agent = None
    if act is not None or task is not None:
        # A delegation claim that does not parse is refused, never read as the user acting alone.
        if not isinstance(act, dict) or not isinstance(act.get("sub"), str) or not isinstance(task, str):
            raise Unauthenticated("the token's delegation claims (act.sub, task) are malformed")
        agent = act["sub"]
    try:
        # Validated as ids: never a wildcard or a userset such as "x#member".
        return Principal(user=token.subject, agent=agent, task=task)
    except (InvalidArgument, ValueError) as exc:
        raise Unauthenticated("the token does not name a valid principal") from exc


def fixed_identity(user: str | None) -> Identify:
    """The stdio principal. There is no default user: stdio without one is a configuration error."""
    if not user:
        raise ConfigurationError("stdio needs WAYFINDER_MCP__STDIO_PRINCIPAL: the user the local agent acts for")
    try:
        principal = Principal(user=user)
    except InvalidArgument as exc:
        raise ConfigurationError(f"WAYFINDER_MCP__STDIO_PRINCIPAL: {exc}") from exc
    return lambda: principal
