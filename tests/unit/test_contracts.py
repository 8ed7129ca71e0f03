"""Contracts on the public surface: tools are described and read-only, settings are documented,
fakes satisfy their Protocols, and Cypher and OpenFGA SDK use stay in their one module."""

from __future__ import annotations

import os
import re
from contextlib import asynccontextmanager
from pathlib import Path

from fastmcp import Client
from pydantic import BaseModel

from authz.fake import FakeAuthorizer
from core.settings import Settings
from mcp_app.server import create_server
from core.models import Principal

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ["core", "authz", "pipeline", "retrievers", "navigator", "mcp_app", "evals", "devstack", "cli"]


def _python_files():
    for package in PACKAGES:
        yield from (REPO / package).rglob("*.py")


def _setting_names(model: type[BaseModel], prefix: str = "WAYFINDER_") -> list[str]:
    names = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            names += _setting_names(annotation, f"{prefix}{name.upper()}__")
        else:
            names.append(f"{prefix}{name.upper()}")
    return names


def test_every_setting_is_documented_in_docs_settings():
    readme = (REPO / "docs" / "settings.md").read_text()
    missing = [name for name in _setting_names(Settings) if f"`{name}`" not in readme]
    assert not missing, f"settings missing from the table in docs/settings.md: {missing}"


def test_each_third_party_backend_is_imported_by_one_module():
    owners = {"openfga_sdk": {"authz/client.py"}, "neo4j": {"navigator/store.py"}, "lightrag": {"retrievers/lightrag_adapter.py"},
              "atlassian": {"pipeline/sources/confluence_rest.py", "pipeline/sources/jira_rest.py"},
              "jira2markdown": {"pipeline/transform/jira.py"}, "google": {"core/providers/gemini.py"}}
    for module, allowed in owners.items():
        importers = {
            str(path.relative_to(REPO))
            for path in _python_files()
            if re.search(rf"^\s*(from|import) {module}\b", path.read_text(), re.M)
        }
        assert importers <= allowed, f"{module} imported outside {allowed}: {importers - allowed}"


def test_cypher_lives_in_one_module():
    offenders = [
        str(path.relative_to(REPO))
        for path in _python_files()
        if path.name != "cypher.py" and re.search(r"\b(MATCH|MERGE|DETACH DELETE)\s*\(", path.read_text())
    ]
    assert offenders == []


@asynccontextmanager
async def _no_services():
    yield None


async def test_every_tool_is_described_and_read_only():
    server = create_server(_no_services, lambda: Principal(user="alice"), observe=lambda *_: None)
    async with Client(server) as client:
        tools = await client.list_tools()
    assert {t.name for t in tools} == {
        "search", "fetch", "fetch_image", "list_spaces", "list_children", "get_ancestors", "get_tree", "resolve_path", "related", "explore"
    }
    for tool in tools:
        assert tool.description and len(tool.description) > 20
        assert tool.annotations.read_only_hint is True
    # tools/list's size in tokens is counted with a real tokenizer in tests/e2e/test_mcp_clients.py


def test_fake_authorizer_satisfies_the_protocol():
    from authz.base import Authorizer

    authorizer: Authorizer = FakeAuthorizer()
    assert authorizer.model_id


def test_only_authz_builds_authorization_questions():
    """Visibility is decided in authz/ alone: nothing else builds checks or tuples, or reaches into
    the gate's answers."""
    offenders = []
    for path in _python_files():
        relative = str(path.relative_to(REPO))
        if relative.startswith("authz/"):
            continue
        text = path.read_text()
        if re.search(r"\b(can_view|holds_live_grant|page_tuples|grant_tuple)\(|\._answers\b|\bCheck\(", text):
            offenders.append(relative)
    assert offenders == []


LAYERS = {"core": 0, "authz": 1, "navigator": 2, "retrievers": 3, "pipeline": 4, "mcp_app": 4, "evals": 4, "devstack": 5, "cli": 6}


def test_layers_import_downwards_only():
    """core ← authz ← navigator ← retrievers ← pipeline / mcp_app / evals ← command line and devstack,
    including imports inside functions. The command line (cli/) is the composition root, on top."""
    offenders = []
    for path in _python_files():
        relative = path.relative_to(REPO)
        own = LAYERS[relative.parts[0]]
        for match in re.finditer(r"^\s*(?:from|import) (\w+)", path.read_text(), re.M):
            imported = match[1]
            if imported in LAYERS and imported != relative.parts[0] and LAYERS[imported] >= own:
                offenders.append(f"{relative} imports {imported}")
    assert offenders == []


def test_settings_survive_the_trip_through_a_child_process_environment(monkeypatch):
    configured = Settings(
        mcp={"port": 1234, "tokens": {"t" * 32: "alice", "a" * 32: {"user": "alice", "agent": "bot", "task": "digest"}}},
        confluence={"spaces": ["HIVE", "OPS"], "token": "secret-token"},
        raw_store_url="postgresql+psycopg://u:p@127.0.0.1/raw",
    )
    for key in [k for k in os.environ if k.startswith("WAYFINDER_")]:
        monkeypatch.delenv(key)
    for key, value in configured.as_environment().items():
        monkeypatch.setenv(key, value)
    assert Settings() == configured


def test_docker_compose_serves_the_stack_on_the_default_ports():
    import yaml

    from devstack import stack

    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    defaults = Settings()
    published = {name: {p.split(":")[1] for p in service["ports"]} for name, service in compose.items()}
    assert published == {
        "neo4j": {str(defaults.neo4j.bolt_port)},
        "openfga": {str(defaults.openfga.http_port)},
        "postgres": {str(defaults.postgres.port)},
    }
    assert compose["postgres"]["profiles"] == ["production"] and "pgvector" in compose["postgres"]["image"]
    # and the stack without Docker runs PostgreSQL exactly when the production profile needs it
    assert "postgres" not in {s.name for s in stack.services(defaults)}
    production = Settings(lightrag={"storage": "production"})
    assert "postgres" in {s.name for s in stack.services(production)}
