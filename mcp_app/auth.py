"""Who is calling: a bearer token over HTTP, the configured local user over stdio.

Over HTTP the server is an OAuth resource server (:func:`http_auth`): with
``WAYFINDER_MCP__OAUTH__ISSUER`` set, tokens are JWTs of the company's provider, checked for
signature (JWKS or a static key, one algorithm, never ``none``), issuer, audience (this server),
expiry, ``nbf``/``iat`` within the clock skew, and required scopes; the protected-resource
metadata (RFC 9728) names the authorization server, and a 401 carries a ``WWW-Authenticate``
challenge pointing at it. Without an issuer, static development tokens from settings are used.
No token is ever passed on to a backend.

A token names a user (``sub``), or an agent acting for a user on one task (its claims carry
``act.sub`` and ``task``, the shape OAuth token exchange gives delegated tokens). Either way the
principal is built from the verified token of the HTTP request being served, never from the
session: the MCP SDK also refuses a session id presented with another credential than the one
that opened it. The user a token names is a raw name (an account id, a username, an e-mail
address): it becomes a Wayfinder id through :func:`core.ids.user_name` here, once, as every name a
source reads does (DESIGN.md A14), so no token can name a user by another user's id.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Mapping
from datetime import timedelta

import jwt
from fastmcp.server.auth import AccessToken, AuthProvider, JWTVerifier, RemoteAuthProvider, TokenVerifier
from fastmcp.server.dependencies import get_access_token
from pydantic import AnyHttpUrl

from authz.grants import parse_ttl
from core import ids
from core.errors import ConfigurationError, InvalidArgument, Unauthenticated
from core.models import Principal
from core.settings import MIN_TOKEN_CHARS, AgentIssuer, MCPSettings, OAuthSettings, TokenPrincipal

Identify = Callable[[], Principal]


def _fingerprint(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class StaticTokens(TokenVerifier):
    """Development tokens from settings (token → user, or → user + agent + task). Unknown tokens get
    HTTP 401. Tokens are held and compared as SHA-256 digests, all of one length, in constant time."""

    def __init__(self, tokens: Mapping[str, str | TokenPrincipal]) -> None:
        super().__init__()
        self._principals: list[tuple[bytes, dict[str, str | None]]] = []  # the owner as configured: raw names
        for number, (token, owner) in enumerate(tokens.items(), start=1):
            if len(token) < MIN_TOKEN_CHARS:
                raise ConfigurationError(
                    f"mcp.tokens: token #{number} is shorter than {MIN_TOKEN_CHARS} characters; "
                    "use e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
                )
            fields = owner.model_dump() if isinstance(owner, TokenPrincipal) else {"user": owner}
            try:
                principal_of(fields["user"], fields.get("agent"), fields.get("task"))
            except (InvalidArgument, ValueError) as exc:  # ValueError: pydantic's ValidationError
                raise ConfigurationError(f"mcp.tokens: token #{number}: {exc}") from exc
            self._principals.append((_fingerprint(token), fields))

    async def verify_token(self, token: str) -> AccessToken | None:
        presented = _fingerprint(token)
        found = None
        for known, principal in self._principals:  # every entry is compared: no early exit
            if hmac.compare_digest(known, presented):
                found = principal
        if found is None:
            return None
        user, agent = str(found["user"]), found.get("agent")
        claims: dict[str, object] = {"sub": user}
        if agent is not None:
            claims |= {"act": {"sub": agent}, "task": found.get("task")}
        return AccessToken(token=token, client_id=_client_id(user, agent), subject=user, scopes=[], claims=claims)


def _client_id(user: str, agent: str | None) -> str:
    """A user's own token and an agent's token never share a client id, so never an MCP session;
    the principal itself always comes from the token of the request being served."""
    return f"agent:{agent}" if agent else f"user:{user}"


class OAuthTokens(JWTVerifier):
    """JWTs of the company's OAuth provider. FastMCP's verifier checks the signature (one
    algorithm), issuer, audience, scopes and expiry; this adds what a resource server must also
    refuse: a token without an expiry or a subject, and one not yet valid (``nbf``, ``iat``
    beyond the clock skew)."""

    def __init__(self, oauth: OAuthSettings, audience: str) -> None:
        if (oauth.jwks_uri is None) == (oauth.public_key is None):
            raise ConfigurationError("WAYFINDER_MCP__OAUTH__ISSUER is set: set exactly one of WAYFINDER_MCP__OAUTH__JWKS_URI and WAYFINDER_MCP__OAUTH__PUBLIC_KEY")
        if oauth.algorithm.lower() == "none":
            raise ConfigurationError("WAYFINDER_MCP__OAUTH__ALGORITHM: unsigned tokens are never accepted")
        try:
            super().__init__(
                public_key=oauth.public_key,
                jwks_uri=oauth.jwks_uri,
                issuer=oauth.issuer,
                audience=audience,
                algorithm=oauth.algorithm,
                required_scopes=oauth.required_scopes or None,
            )
        except ValueError as exc:
            raise ConfigurationError(f"WAYFINDER_MCP__OAUTH: {exc}") from exc
        self._skew_s = oauth.clock_skew_s

    async def load_access_token(self, token: str) -> AccessToken | None:
        access = await super().load_access_token(token)
        if access is None:
            return None
        claims, latest = access.claims, time.time() + self._skew_s
        if not isinstance(claims.get("exp"), int | float) or not isinstance(claims.get("sub"), str):
            return None
        if any(isinstance(claims.get(c), int | float) and claims[c] > latest for c in ("nbf", "iat")):
            return None
        act = claims.get("act")
        agent = act.get("sub") if isinstance(act, dict) and isinstance(act.get("sub"), str) else None
        return access.model_copy(update={"client_id": _client_id(claims["sub"], agent)})


class TrustedIssuers(TokenVerifier):
    """JWTs of every issuer this server trusts, each checked by its own verifier: the company's
    provider, whose tokens name users (and agents with a grant), and agents that sign for the users
    they act for (:class:`core.settings.AgentIssuer`), whose tokens must name that agent in
    ``act.sub`` and a task — so an agent's key can never sign a token that reads as a user alone,
    nor as another agent. The token's unverified ``iss`` only picks the verifier that checks it."""

    def __init__(
        self, audience: str, provider: OAuthTokens | None, agents: Mapping[str, tuple[OAuthTokens, str, timedelta]]
    ) -> None:
        super().__init__()
        self.audience = audience  # every verifier's: tokens minted for this server alone
        self._provider, self._agents = provider, dict(agents)

    async def verify_token(self, token: str) -> AccessToken | None:
        issuer = _issuer(token)
        if issuer in self._agents:
            return await self._agent_access(issuer, token)
        if self._provider is not None and issuer == self._provider.issuer:
            return await self._provider.verify_token(token)
        return None

    async def agent_principal(self, token: str) -> tuple[Principal, timedelta] | None:
        """The principal of a token an agent issuer signed, and the longest grant its agent may
        ask for (mcp_app.agents); None for any other token, the provider's included."""
        issuer = _issuer(token)
        access = await self._agent_access(issuer, token) if issuer in self._agents else None
        if access is None or not access.subject:
            return None
        try:
            return principal_of(access.subject, self._agents[issuer][1], access.claims["task"]), self._agents[issuer][2]
        except (InvalidArgument, ValueError):
            return None

    async def _agent_access(self, issuer: str, token: str) -> AccessToken | None:
        verifier, agent, _ = self._agents[issuer]
        access = await verifier.verify_token(token)
        act = access.claims.get("act") if access is not None else None
        if access is None or not isinstance(act, dict) or act.get("sub") != agent or not isinstance(access.claims.get("task"), str):
            return None
        return access


def _issuer(token: str) -> str | None:
    """The token's unverified ``iss``: it only picks the verifier that checks the token."""
    try:
        issuer = jwt.decode(token, options={"verify_signature": False}).get("iss")
    except jwt.PyJWTError:
        return None
    return issuer if isinstance(issuer, str) else None


def http_auth(mcp: MCPSettings) -> AuthProvider:
    """How HTTP callers authenticate: the company's OAuth provider and the agents that sign for
    their users, when either is configured (with RFC 9728 metadata at
    ``/.well-known/oauth-protected-resource/mcp``), else the static development tokens."""
    oauth = mcp.oauth
    if oauth.issuer is None and not oauth.agent_issuers:
        if oauth.required_scopes or oauth.tool_scopes:  # scopes would restrict nothing: refuse, never ignore
            raise ConfigurationError("WAYFINDER_MCP__OAUTH__REQUIRED_SCOPES and TOOL_SCOPES need WAYFINDER_MCP__OAUTH__ISSUER")
        return StaticTokens(mcp.tokens)
    if mcp.tokens:
        raise ConfigurationError("WAYFINDER_MCP__TOKENS are for development only: unset them when OAuth issuers are set")
    if oauth.issuer is None and oauth.required_scopes:
        raise ConfigurationError("WAYFINDER_MCP__OAUTH__REQUIRED_SCOPES are the provider's: they need WAYFINDER_MCP__OAUTH__ISSUER")
    public_url = (oauth.public_url or f"http://{mcp.host}:{mcp.port}").rstrip("/")
    audience = oauth.audience or f"{public_url}/mcp"
    issuers = [agent.issuer for agent in oauth.agent_issuers]
    if len(set(issuers)) != len(issuers) or oauth.issuer in issuers:
        raise ConfigurationError("WAYFINDER_MCP__OAUTH: each issuer is trusted once, as the provider or as one agent")
    try:
        provider = OAuthTokens(oauth, audience) if oauth.issuer is not None else None
        agents = {
            agent.issuer: (
                OAuthTokens(_agent_oauth(oauth, agent), audience), ids.agent_id(agent.agent).removeprefix("agent:"), parse_ttl(agent.max_grant_ttl)
            )
            for agent in oauth.agent_issuers
        }
        servers = [AnyHttpUrl(server) for server in oauth.authorization_servers or [oauth.issuer or issuers[0]]]
        return RemoteAuthProvider(
            token_verifier=TrustedIssuers(audience, provider, agents),
            authorization_servers=servers,
            base_url=public_url,
            resource_name="Wayfinder",
        )
    except (ValueError, InvalidArgument) as exc:  # pydantic's ValidationError: a URL that does not parse
        raise ConfigurationError(f"WAYFINDER_MCP__OAUTH: {exc}") from exc


def _agent_oauth(oauth: OAuthSettings, agent: AgentIssuer) -> OAuthSettings:
    """The provider's settings as an agent's tokens are checked: its issuer, key and algorithm,
    no scopes (an agent's token carries none; its reach is the grant's)."""
    return oauth.model_copy(
        update={
            "issuer": agent.issuer, "public_key": agent.public_key, "jwks_uri": agent.jwks_uri, "algorithm": agent.algorithm,
            "required_scopes": [],
        }
    )


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
        return principal_of(token.subject, agent, task)
    except (InvalidArgument, ValueError) as exc:
        raise Unauthenticated("the token does not name a valid principal") from exc


def principal_of(user: str, agent: str | None = None, task: str | None = None) -> Principal:
    """The principal a credential names: its user through the one identity function, its agent
    and task validated as ids (never a wildcard or a userset such as ``x#member``)."""
    return Principal(user=ids.user_name(user), agent=agent, task=task)


def fixed_identity(user: str | None) -> Identify:
    """The stdio principal. There is no default user: stdio without one is a configuration error."""
    if not user:
        raise ConfigurationError("stdio needs WAYFINDER_MCP__STDIO_PRINCIPAL: the user the local agent acts for")
    try:
        principal = principal_of(user)
    except InvalidArgument as exc:
        raise ConfigurationError(f"WAYFINDER_MCP__STDIO_PRINCIPAL: {exc}") from exc
    return lambda: principal
