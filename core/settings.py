"""The one settings object, built once at the composition root and passed down.

Every field is read from the environment with the prefix ``WAYFINDER_`` and ``__`` as the nested
delimiter, e.g. ``WAYFINDER_NEO4J__PASSWORD``. Nothing here reads the environment at import time:
call :meth:`Settings.load` (or construct ``Settings()``) where the program starts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_CACHE_DIR = Path.home() / ".cache" / "wayfinder"


class OpenFGASettings(BaseModel):
    """The OpenFGA server the gate asks, and how the local stack builds and runs it."""

    version: str = Field("v1.11.1", description="OpenFGA release tag built with `go install`.")
    host: str = Field("127.0.0.1", description="Loopback address OpenFGA listens on.")
    http_port: int = Field(18080, description="OpenFGA HTTP API port.")
    grpc_port: int = Field(18081, description="OpenFGA gRPC port (not used by Wayfinder, kept off the defaults).")
    preshared_key: SecretStr = Field(
        SecretStr("wayfinder-dev-key"), description="Preshared key OpenFGA requires on every call."
    )
    datastore: Literal["memory", "sqlite"] = Field(
        "sqlite", description="Datastore of the local OpenFGA: `memory` for tests, `sqlite` for the demo."
    )
    store_name: str = Field("wayfinder", description="Name of the OpenFGA store Wayfinder uses.")
    check_timeout_s: float = Field(
        3.0,
        gt=0,
        description="Deadline for all the authorization of one request (every check round trip, and a reconnect "
        "to OpenFGA if one is needed); past it the request fails closed. No single call to OpenFGA waits longer.",
    )
    resolve_node_limit: int = Field(
        100, ge=25, description="OpenFGA `--resolve-node-limit` (restrictions nested many levels deep need more than the default 25)."
    )
    decision_cache_s: float = Field(
        0.0,
        ge=0,
        le=60,
        description="Seconds the local OpenFGA may reuse check results (its check and iterator caches, dropped early once "
        "it sees tuples written). 0, the default, keeps them off: a revoked permission is denied on the next request. "
        "Above 0 this is the revocation bound: a revoked permission may still be granted for up to this long.",
    )

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.http_port}"


class Neo4jSettings(BaseModel):
    """The Neo4j database holding the navigator's trees."""

    version: str = Field("5.26.30", description="Neo4j release (5.26 LTS) fetched as jars.")
    host: str = Field("127.0.0.1", description="Loopback address Neo4j's Bolt connector listens on.")
    bolt_port: int = Field(17687, description="Bolt port.")
    user: str = Field("neo4j", description="Neo4j user.")
    password: SecretStr = Field(SecretStr("wayfinder-dev-password"), description="Neo4j password (8+ chars).")
    database: str = Field("neo4j", description="Neo4j database name.")
    heap: str = Field("512m", description="Java heap of the local Neo4j (`-Xmx`).")
    query_timeout_s: float = Field(10.0, gt=0, description="Deadline for one navigator query; past it the request fails.")

    @property
    def uri(self) -> str:
        return f"bolt://{self.host}:{self.bolt_port}"


class LightRAGSettings(BaseModel):
    """The semantic index."""

    workspace: str = Field("hive", description="LightRAG workspace (sub-directory of the index directory).")
    chunk_token_size: int = Field(800, ge=100, description="Target chunk size in tokens.")
    chunk_overlap_token_size: int = Field(100, ge=0, description="Overlap between chunks in tokens.")
    insert_batch_size: int = Field(
        48,
        ge=1,
        description="Documents handed to LightRAG per insert call: its vectors are computed and its files written once per batch. "
        "The first three batches are an eighth, a quarter and a half of it, so the work on the next batch starts sooner.",
    )
    extraction_workers: int = Field(
        2, ge=0, description="Processes that run the offline entity extraction while indexing (0: in the indexing process)."
    )
    embedding_workers: int = Field(
        2, ge=0, description="Processes that run the offline embedder's passes over passages while indexing (0: threads in the indexing process)."
    )
    storage: Literal["files", "production"] = Field(
        "files",
        description="Where the index lives: `files` (JSON and GraphML files in the index directory, loaded whole; the "
        "default, for one machine) or `production` (graph in Neo4j beside the navigator's trees, vectors, chunks and "
        "document status in PostgreSQL with pgvector: see `WAYFINDER_POSTGRES__*`).",
    )


class PostgresSettings(BaseModel):
    """PostgreSQL with pgvector: the semantic index's vectors, key-value and document-status stores
    in the `production` storage profile. The local stack runs one on loopback when that profile is on."""

    host: str = Field("127.0.0.1", description="PostgreSQL host.")
    port: int = Field(15432, description="PostgreSQL port.")
    user: str = Field("wayfinder", description="PostgreSQL user (needs to create tables, and the `vector` extension once).")
    password: SecretStr = Field(SecretStr("wayfinder-dev-password"), description="PostgreSQL password.")
    database: str = Field("wayfinder", description="Database of the index (created by the local stack).")
    max_connections: int = Field(8, ge=2, description="Connections the index keeps open at most.")


MIN_TOKEN_CHARS = 32


class TokenPrincipal(BaseModel):
    """Who a static development token acts as: a user, or an agent acting for a user on one task."""

    model_config = ConfigDict(extra="forbid")

    user: str
    agent: str | None = None
    task: str | None = None


class AgentIssuer(BaseModel):
    """An agent that signs tokens for the users it acts for (the Slack bot). Its key is trusted
    for that agent alone: every token it signs must name the agent in ``act.sub`` and a task, so
    it works only through a live grant from the user (DESIGN.md A2), never as the user."""

    model_config = ConfigDict(extra="forbid")

    issuer: str = Field(description="`iss` of the agent's tokens, e.g. `https://slackbot.example.com/`.")
    agent: str = Field(description="The agent id its tokens must carry in `act.sub`, e.g. `slack-bot`.")
    public_key: str | None = Field(None, description="PEM public key the agent signs with (or `jwks_uri`).")
    jwks_uri: str | None = Field(None, description="URL of the agent's JSON Web Key Set.")
    algorithm: str = Field("RS256", description="The one signing algorithm accepted.")
    max_grant_ttl: str = Field(
        "8h", description="Longest grant the agent may ask the server for (`POST /agent/grant`) to act for a user on one task (`30m`, `8h`, `7d`)."
    )


class OAuthSettings(BaseModel):
    """Bearer tokens from the company's OAuth provider: the MCP server as an OAuth resource server."""

    issuer: str | None = Field(
        None,
        description="Issuer (`iss`) of the company's OAuth provider, e.g. `https://login.example.com/`. Set: HTTP "
        "callers present JWTs it signed, checked for issuer, audience, expiry and signature (static tokens must be "
        "unset). Unset: OAuth is off.",
    )
    jwks_uri: str | None = Field(None, description="URL of the provider's JSON Web Key Set (or set `public_key`).")
    public_key: str | None = Field(None, description="PEM public key (or shared secret for HS*) instead of a JWKS URL.")
    algorithm: str = Field("RS256", description="The one signing algorithm accepted (`none` never is).")
    audience: str | None = Field(
        None,
        description="Audience (`aud`) a token must carry: this server, so a token minted for another service does "
        "not work here. Default: the resource URL, `<public_url>/mcp`.",
    )
    public_url: str | None = Field(
        None,
        description="Base URL clients reach the server at, e.g. `https://wayfinder.example.com`; the protected-resource "
        "metadata (RFC 9728) is served under it. Default: `http://<host>:<port>`.",
    )
    authorization_servers: list[str] = Field(
        default_factory=list, description="Authorization servers named in the metadata. Default: the issuer."
    )
    required_scopes: list[str] = Field(default_factory=list, description="Scopes every token must carry, e.g. `[\"wayfinder\"]`.")
    tool_scopes: dict[str, list[str]] = Field(
        default_factory=dict,
        description='Scopes a token needs to see and call a tool, per tool, e.g. `{"fetch": ["wayfinder:read"]}`; a tool not '
        "named needs only the required scopes.",
    )
    clock_skew_s: int = Field(
        60, ge=0, le=600, description="Seconds a token's `nbf` and `iat` may lie ahead of this server's clock. Expiry is never extended."
    )
    agent_issuers: list[AgentIssuer] = Field(
        default_factory=list,
        description='Agents that sign tokens for the users they act for, beside the provider: JSON list of `{"issuer", '
        '"agent", "public_key" | "jwks_uri", "algorithm", "max_grant_ttl"}`. A token of such an issuer is accepted only with '
        "`act.sub` its agent and a `task`, so it reads through a live grant alone; required scopes are the provider's. With "
        "it the agent asks the server for its grant (`POST /agent/grant`) and its audience's checks (`POST /agent/audience`).",
    )


class LimitSettings(BaseModel):
    """What one caller may ask of the MCP server."""

    rate_per_s: float = Field(10.0, gt=0, description="Tool calls a second each principal may make, sustained.")
    burst: int = Field(30, ge=1, description="Tool calls a principal may make at once before the sustained rate applies.")
    max_concurrent: int = Field(
        8, ge=1, description="Tool calls of one principal running at the same time; more are refused with `rate_limited`."
    )
    max_running: int = Field(
        8, ge=1, description="Tool calls the server runs at the same time, whoever asks; more wait their turn, first come "
        "first served (within their deadline), so the backends are never asked more than they can answer in time.",
    )
    deadline_s: float = Field(30.0, gt=0, description="Longest a tool call may run, its wait for a turn included; past it the call is stopped and answers `unavailable`.")
    max_request_bytes: int = Field(262_144, ge=1024, description="Largest HTTP request body; a larger one gets HTTP 413.")


class TelemetrySettings(BaseModel):
    """Traces and metrics of the MCP server; both off unless set. Neither carries page text, ids or
    who asked: spans hold tool names, counts and timings only."""

    otlp_endpoint: str | None = Field(
        None,
        description="OTLP/HTTP endpoint the server sends its traces to, e.g. `http://127.0.0.1:4318/v1/traces`: a span "
        "per tool call with child spans for the authorization gate, OpenFGA, the index and Neo4j. Unset: no traces.",
    )
    metrics_port: int | None = Field(
        None,
        description="Port of a Prometheus `/metrics` endpoint on `metrics_host`: latency per tool, checks and denials, "
        "errors by kind, tokens returned. Unset: no metrics endpoint.",
    )
    metrics_host: str = Field("127.0.0.1", description="Address the metrics endpoint binds to.")
    service_name: str = Field("wayfinder", description="`service.name` of the traces.")


class MCPSettings(BaseModel):
    """The MCP server."""

    host: str = Field("127.0.0.1", description="Address the HTTP transport binds to.")
    port: int = Field(18765, description="Port of the HTTP transport.")
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host names, besides the loopback names and the bind address, that requests to the HTTP transport "
        'may name in their Host header, e.g. `["wayfinder.example.com"]` behind a proxy. Any other gets HTTP 421, so '
        "a web page cannot reach the server by rebinding its own name to this address (DNS rebinding).",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="Browser origins, besides the server's own and loopback ones, allowed to call the HTTP transport, "
        'e.g. `["https://agents.example.com"]`. A request with any other Origin header gets HTTP 403.',
    )
    tokens: dict[str, str | TokenPrincipal] = Field(
        default_factory=dict,
        description="Static bearer tokens for development: JSON object token → user id, or token → "
        '`{"user", "agent", "task"}` for an agent acting for a user. Tokens must be at least 32 characters. '
        "Empty (and OAuth off) means nobody can authenticate over HTTP; refused when OAuth is on.",
    )
    stdio_principal: str | None = Field(
        None, description="User id the stdio transport acts as. Required for stdio; there is no default user."
    )
    oauth: OAuthSettings = Field(default_factory=OAuthSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    not_found_floor_s: float = Field(
        0.05, ge=0, le=5,
        description="Least time a `not_found` answer takes from the start of its call. A hidden id and a missing one cost "
        "the same reads and checks, but OpenFGA may take a little longer to deny an object that exists: the floor keeps "
        "that from telling them apart.",
    )
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    search_candidates: int = Field(
        60,
        ge=20,
        le=2000,
        description="Candidates search takes from each index channel before authorization: all that clear the "
        "relevance floor, up to this many, among the pages the sync's pre-filter keys admit (all pages when an "
        "index has none). Each is an OpenFGA check; 60 ranks the dev questions as 100 does (`wayfinder eval`).",
    )


def _refuse_renamed(data: Any, product: str, values: str) -> Any:
    """``cloud`` (true/false) became ``deployment``: a site set up with the old name would
    otherwise be read as whatever it answers, with the setting silently ignored."""
    if isinstance(data, dict) and "cloud" in data:
        raise ValueError(f"WAYFINDER_{product}__CLOUD is now WAYFINDER_{product}__DEPLOYMENT ({values}; unset: asked from the site)")
    return data


class ConfluenceSettings(BaseModel):
    """The Confluence site to sync. Unset ``url`` means the local emulator, seeded with the Hive space."""

    url: str | None = Field(
        None,
        description="Site URL with its context path: `https://example.atlassian.net/wiki` (Cloud) or "
        "`https://confluence.example.com` / `…/confluence` (Data Center). Unset: the local emulator.",
    )
    deployment: Literal["cloud", "datacenter-9", "datacenter-8"] | None = Field(
        None, description="`cloud`, `datacenter-9` (Data Center 9.1 or later) or `datacenter-8` (before 9.0: space permissions "
        "over JSON-RPC). Unset: asked from the site (only Cloud answers `settings/systemInfo`; Data Center's release is in its "
        "application links manifest)."
    )
    username: str | None = Field(
        None, description="Account of the sync: the e-mail address on Cloud, the username on Data Center. Unset with a "
        "token: the token is sent as a bearer personal access token (Data Center)."
    )
    token: SecretStr | None = Field(None, description="API token (Cloud) or password / personal access token (Data Center).")
    spaces: list[str] = Field(default_factory=lambda: ["HIVE"], description="Keys of the spaces to sync.")
    overlap_minutes: int = Field(
        15, ge=1, description="Each sync asks for pages modified since the last one, less this many minutes: CQL dates "
        "are minute-precise and clocks drift."
    )
    page_size: int = Field(50, ge=1, le=100, description="Pages per REST call.")
    max_deleted_share: float = Field(
        0.5, gt=0, le=1, description="Largest share of a space's pages one sync may purge (when over 20); above it the pages "
        "that vanished are hidden from everyone at once and their content kept until a run with a higher share purges it, so a "
        "listing cut short cannot empty the stores."
    )
    timeout_s: float = Field(30.0, gt=0, description="Timeout of one REST call.")
    max_attempts: int = Field(6, ge=1, description="Attempts per REST call under 429/5xx and dropped connections (Retry-After is honoured).")
    emulator_host: str = Field("127.0.0.1", description="Loopback address of the local emulator.")
    emulator_port: int = Field(18090, description="Port of the local emulator (used when `url` is unset).")
    emulator_admin_token: SecretStr = Field(
        SecretStr("wayfinder-emulator-admin"), description="Bearer token of the emulator's admin API (tests, benchmarks)."
    )

    @property
    def emulated(self) -> bool:
        return self.url is None

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        return _refuse_renamed(data, "CONFLUENCE", "cloud, datacenter-9 or datacenter-8")


class JiraSettings(BaseModel):
    """The Jira site to sync. Unset ``url``: the local emulator's Jira when Confluence is the
    emulator too, else no Jira."""

    url: str | None = Field(
        None, description="Site URL: `https://example.atlassian.net` (Cloud) or `https://jira.example.com` / `…/jira` (Data "
        "Center). Unset: the local emulator's Jira when Confluence is emulated, otherwise Jira is not synced."
    )
    deployment: Literal["cloud", "datacenter"] | None = Field(
        None, description="`cloud` or `datacenter`. Unset: asked from the site (`serverInfo`'s `deploymentType`)."
    )
    username: str | None = Field(None, description="Account of the sync (e-mail on Cloud, username on Data Center); unset: the token is a bearer PAT.")
    token: SecretStr | None = Field(None, description="API token (Cloud) or password / personal access token (Data Center).")
    projects: list[str] = Field(default_factory=lambda: ["HIVE"], description="Keys of the projects to sync.")
    page_size: int = Field(50, ge=1, le=100, description="Issues per REST call.")
    overlap_minutes: int = Field(15, ge=1, description="Each sync asks for issues updated since the last one, less this many minutes.")
    max_deleted_share: float = Field(
        0.5, gt=0, le=1, description="Largest share of a project's issues one sync may purge (when over 20); above it the issues "
        "that vanished are hidden at once and their content kept, as for pages."
    )
    timeout_s: float = Field(30.0, gt=0, description="Timeout of one REST call.")
    max_attempts: int = Field(6, ge=1, description="Attempts per REST call under 429/5xx and dropped connections.")

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        return _refuse_renamed(data, "JIRA", "cloud or datacenter")


#: USD per million input and output tokens, paid tier, as published for each model (check the
#: current price list; a run's cost is an estimate at these prices)
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gemini-2.5-flash": (0.30, 2.50),
    "gemini-2.5-flash-lite": (0.10, 0.40),
    "gemini-2.5-pro": (1.25, 10.00),
    "gemini-embedding-001": (0.15, 0.0),
}


class GeminiSettings(BaseModel):
    """Gemini through google-genai. With a key, images get their alt text from Gemini; the index
    uses Gemini only when ``WAYFINDER_PROVIDERS=gemini``. Without a key, alt text is built offline
    (caption, file name, surrounding text) and marked as such."""

    api_key: SecretStr | None = Field(None, description="Gemini API key. Unset: no Gemini calls, offline alt text.")
    model: str = Field("gemini-2.5-flash", description="Model that writes image alt text and the Slack bot's answers.")
    extraction_model: str = Field(
        "gemini-2.5-flash", description="Model that extracts entities and relations while indexing, and query keywords (`WAYFINDER_PROVIDERS=gemini`)."
    )
    embedding_model: str = Field("gemini-embedding-001", description="Embedding model of the index (`WAYFINDER_PROVIDERS=gemini`).")
    embedding_dim: int = Field(
        768, ge=128, le=3072, description="Size of the Gemini embeddings. Changing it (or the model) needs a rebuilt index."
    )
    thinking_budget: int | None = Field(
        0, ge=0, description="Thinking tokens allowed per extraction call (0: none, the cheapest; unset: the model's default)."
    )
    extraction_max_output_tokens: int = Field(8192, ge=256, description="Longest answer one extraction call may give.")
    max_concurrency: int = Field(8, ge=1, le=64, description="Gemini calls in flight at once while indexing.")
    prices: dict[str, tuple[float, float]] = Field(
        default_factory=lambda: dict(DEFAULT_PRICES),
        description="USD per million input and output tokens per model, for the cost a sync reports: JSON object "
        'model → [input, output]. Defaults: the published paid-tier prices of the 2.5 models and gemini-embedding-001.',
    )
    base_url: str | None = Field(None, description="API base URL; unset uses the SDK's default (tests point it at a local fake).")
    timeout_s: float = Field(60.0, gt=0, description="Timeout of one Gemini call.")
    max_attempts: int = Field(5, ge=1, description="Attempts per Gemini call under 429 and 5xx answers, timeouts and dropped connections.")


class SlackSettings(BaseModel):
    """The Slack bot (`wayfinder slackbot`): it answers as the Slack user who asks, through the MCP
    server, with a delegation grant for the conversation and tokens it signs itself."""

    bot_token: SecretStr | None = Field(
        None, description="Bot token (`xoxb-…`); scopes `app_mentions:read`, `chat:write`, `im:history`, `users:read`, "
        "`users:read.email`, `channels:read`, `groups:read`, `mpim:read`, `im:read`."
    )
    signing_secret: SecretStr | None = Field(None, description="Signing secret: requests to the HTTP events endpoint must carry its signature.")
    app_token: SecretStr | None = Field(None, description="App-level token (`xapp-…`, scope `connections:write`) for Socket Mode.")
    api_url: str | None = Field(None, description="Slack Web API base URL ending in `/`; unset uses the SDK's default (tests point it at a local fake).")
    host: str = Field("127.0.0.1", description="Address the HTTP events endpoint binds to.")
    port: int = Field(18770, description="Port of the HTTP events endpoint (`POST /slack/events`).")
    mcp_url: str | None = Field(None, description="The Wayfinder MCP endpoint the bot calls; unset: `http://<mcp.host>:<mcp.port>/mcp`.")
    agent: str = Field("slack-bot", description="The bot's agent id in delegation grants and in its tokens' `act.sub`.")
    grant_ttl: str = Field("8h", description="Lifetime of the grant of one user's conversation, renewed by each question (`30m`, `8h`, `7d`).")
    token_issuer: str = Field(
        "https://slackbot.wayfinder.invalid/",
        description="`iss` of the tokens the bot signs (a URL naming the bot); the `issuer` of its entry in the MCP server's `WAYFINDER_MCP__OAUTH__AGENT_ISSUERS`.",
    )
    token_private_key: SecretStr | None = Field(
        None, description="PEM RSA private key the bot signs its tokens with; the MCP server checks them with the public key "
        "(`WAYFINDER_MCP__OAUTH__PUBLIC_KEY`)."
    )
    token_audience: str | None = Field(None, description="`aud` of the bot's tokens; unset: the MCP URL (the server's default audience).")
    token_lifetime_s: int = Field(300, ge=30, le=3600, description="Lifetime of one token the bot signs (one per question).")
    results: int = Field(5, ge=1, le=10, description="Hits an answer cites at most.")
    max_audience: int = Field(
        500, ge=1, description="Most readers of a conversation the bot checks (a public channel's are the whole workspace); "
        "an answer with more readers goes to the asker alone."
    )
    directory_ttl_s: float = Field(
        600.0, ge=0, description="Seconds a Slack user's directory mapping (e-mail → user) and guest or stranger marks are remembered."
    )


class Settings(BaseSettings):
    """Everything Wayfinder can be told. Documented field by field in docs/settings.md."""

    model_config = SettingsConfigDict(env_prefix="WAYFINDER_", env_nested_delimiter="__", extra="forbid")

    data_dir: Path = Field(Path(".wayfinder"), description="Run directory: indexes, service data, logs, pid files.")
    cache_dir: Path = Field(
        DEFAULT_CACHE_DIR, description="Build cache outside the repository (OpenFGA binary, Neo4j jars, the embedder's unpacked token table)."
    )
    corpus_dir: Path = Field(
        Path("../shared/corpora/apache-hive-wiki"), description="The Apache Hive Confluence export the local emulator is seeded from."
    )
    raw_store_url: SecretStr | None = Field(
        None,
        description="Database of the raw store (what the sync read from Confluence), as a SQLAlchemy URL: "
        "`postgresql+psycopg://user:password@host:5432/wayfinder`. Unset: the SQLite file `raw.sqlite` in the data directory.",
    )
    audit_key: SecretStr | None = Field(
        None,
        description="Key of the HMACs that stand for principals and denied ids in audit receipts. When unset, a "
        "random key is generated once into `audit.key` in the data directory.",
    )
    providers: Literal["local", "gemini"] = Field(
        "local",
        description="Models that build and query the semantic index: `local` (offline models shipped in packages) or "
        "`gemini` (extraction and embeddings by Gemini; needs `WAYFINDER_GEMINI__API_KEY`). An index answers only to "
        "the embedder it was built with: switching needs a rebuilt index.",
    )
    openfga: OpenFGASettings = Field(default_factory=OpenFGASettings)
    neo4j: Neo4jSettings = Field(default_factory=Neo4jSettings)
    postgres: PostgresSettings = Field(default_factory=PostgresSettings)
    lightrag: LightRAGSettings = Field(default_factory=LightRAGSettings)
    mcp: MCPSettings = Field(default_factory=MCPSettings)
    confluence: ConfluenceSettings = Field(default_factory=ConfluenceSettings)
    jira: JiraSettings = Field(default_factory=JiraSettings)
    gemini: GeminiSettings = Field(default_factory=GeminiSettings)
    slack: SlackSettings = Field(default_factory=SlackSettings)

    @field_validator("data_dir", "cache_dir", "corpus_dir")
    @classmethod
    def _absolute(cls, path: Path) -> Path:
        # Services run in their own directories, so relative paths are fixed against the CWD now.
        return path.expanduser().resolve()

    @property
    def services_dir(self) -> Path:
        return self.data_dir / "services"

    @property
    def index_dir(self) -> Path:
        return self.data_dir / "lightrag"

    @property
    def models_dir(self) -> Path:
        """Model files unpacked from their packages, shared by every process and run."""
        return self.cache_dir / "models"

    @property
    def raw_store_path(self) -> Path:
        return self.data_dir / "raw.sqlite"

    def as_environment(self) -> dict[str, str]:
        """These settings as ``WAYFINDER_*`` variables, secrets included: for a child process that
        must run on exactly this configuration (``Settings()`` there reads them back)."""
        env: dict[str, str] = {}

        def walk(model: BaseModel, prefix: str) -> None:
            for name in type(model).model_fields:
                value = getattr(model, name)
                key = f"{prefix}{name.upper()}"
                if isinstance(value, BaseModel):
                    walk(value, key + "__")
                elif isinstance(value, SecretStr):
                    env[key] = value.get_secret_value()
                elif isinstance(value, (dict, list, tuple)):
                    env[key] = json.dumps(_plain(value))
                elif value is not None:
                    env[key] = str(value)

        walk(self, "WAYFINDER_")
        return env


def _plain(value: object) -> object:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value
