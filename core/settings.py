"""The one settings object, built once at the composition root and passed down.

Every field is read from the environment with the prefix ``WAYFINDER_`` and ``__`` as the nested
delimiter, e.g. ``WAYFINDER_NEO4J__PASSWORD``. Nothing here reads the environment at import time:
call :meth:`Settings.load` (or construct ``Settings()``) where the program starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
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
    insert_batch_size: int = Field(16, ge=1, description="Documents handed to LightRAG per insert call.")


MIN_TOKEN_CHARS = 32


class TokenPrincipal(BaseModel):
    """Who a static development token acts as: a user, or an agent acting for a user on one task."""

    model_config = ConfigDict(extra="forbid")

    user: str
    agent: str | None = None
    task: str | None = None


class MCPSettings(BaseModel):
    """The MCP server."""

    host: str = Field("127.0.0.1", description="Address the HTTP transport binds to.")
    port: int = Field(18765, description="Port of the HTTP transport.")
    tokens: dict[str, str | TokenPrincipal] = Field(
        default_factory=dict,
        description="Static bearer tokens for development: JSON object token → user id, or token → "
        '`{"user", "agent", "task"}` for an agent acting for a user. Tokens must be at least 32 characters. '
        "Empty means nobody can authenticate over HTTP.",
    )
    stdio_principal: str | None = Field(
        None, description="User id the stdio transport acts as. Required for stdio; there is no default user."
    )
    search_candidates: int = Field(
        100,
        ge=20,
        le=2000,
        description="Candidates search takes from each index channel before authorization: all that clear the "
        "relevance floor, up to this many. Hidden pages can crowd out visible ones only when more than this "
        "many candidates clear it.",
    )


class Settings(BaseSettings):
    """Everything Wayfinder can be told. Documented field by field in the README."""

    model_config = SettingsConfigDict(env_prefix="WAYFINDER_", env_nested_delimiter="__", extra="forbid")

    data_dir: Path = Field(Path(".wayfinder"), description="Run directory: indexes, service data, logs, pid files.")
    cache_dir: Path = Field(
        DEFAULT_CACHE_DIR, description="Build cache outside the repository (OpenFGA binary, Neo4j jars)."
    )
    corpus_dir: Path = Field(
        Path("../shared/corpora/apache-hive-wiki"), description="The Apache Hive Confluence export to index."
    )
    audit_key: SecretStr | None = Field(
        None,
        description="Key of the HMACs that stand for principals and denied ids in audit receipts. When unset, a "
        "random key is generated once into `audit.key` in the data directory.",
    )
    openfga: OpenFGASettings = Field(default_factory=OpenFGASettings)
    neo4j: Neo4jSettings = Field(default_factory=Neo4jSettings)
    lightrag: LightRAGSettings = Field(default_factory=LightRAGSettings)
    mcp: MCPSettings = Field(default_factory=MCPSettings)

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
