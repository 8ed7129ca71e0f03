"""The no-Docker local stack: real OpenFGA and Neo4j processes on non-default ports in a tmp data dir.

Uses the default cache dir, so a binary and jars built once are reused (a cold cache builds them,
which takes minutes).
"""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from neo4j import GraphDatabase
from neo4j.exceptions import AuthError

from core.errors import PortInUse
from core.settings import ConfluenceSettings, Neo4jSettings, OpenFGASettings, Settings
from devstack import stack
from tests.conftest import CORPUS

pytestmark = pytest.mark.integration


def _settings(data_dir: Path, http_port: int, grpc_port: int, bolt_port: int, emulator_port: int = 28190) -> Settings:
    return Settings(
        data_dir=data_dir,
        corpus_dir=CORPUS,
        openfga=OpenFGASettings(http_port=http_port, grpc_port=grpc_port, datastore="memory"),
        neo4j=Neo4jSettings(bolt_port=bolt_port),
        confluence=ConfluenceSettings(emulator_port=emulator_port),
    )


def _port_is_free(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
        return True


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    settings = _settings(tmp_path_factory.mktemp("devstack"), 28080, 28081, 27687)
    yield settings
    stack.down(settings)  # safety net if a test failed before test_down


@pytest.fixture(scope="module")
def first_up(settings: Settings) -> list[stack.ServiceStatus]:
    return stack.up(settings, notify=lambda message: None)


def test_up_starts_every_service_healthy(first_up: list[stack.ServiceStatus]) -> None:
    assert [s.name for s in first_up] == ["openfga", "neo4j", "confluence"]
    for service in first_up:
        assert service.running and service.pid is not None, service
        assert service.start_seconds is not None and service.start_seconds > 0, service
    assert first_up[0].address == "http://127.0.0.1:28080"
    assert first_up[1].address == "bolt://127.0.0.1:27687"
    assert first_up[2].address == "http://127.0.0.1:28190/confluence"


def test_a_configured_site_needs_no_emulator(tmp_path: Path) -> None:
    real = _settings(tmp_path, 28080, 28081, 27687).model_copy(
        update={"confluence": ConfluenceSettings(url="https://confluence.example.com")}
    )
    assert [service.name for service in stack.services(real)] == ["openfga", "neo4j"]


def test_up_again_reuses_the_running_processes(settings: Settings, first_up: list[stack.ServiceStatus]) -> None:
    again = stack.up(settings, notify=lambda message: None)
    assert [s.pid for s in again] == [s.pid for s in first_up]
    assert all(s.detail == "already running" and s.start_seconds is None for s in again)


def test_status_reports_running_and_healthy(settings: Settings, first_up: list[stack.ServiceStatus]) -> None:
    report = stack.status(settings)
    assert [(s.name, s.running, s.pid, s.detail) for s in report] == [
        (s.name, True, s.pid, "healthy") for s in first_up
    ]


def test_openfga_enforces_the_preshared_key(settings: Settings, first_up: list[stack.ServiceStatus]) -> None:
    url = f"{settings.openfga.url}/stores"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url, timeout=5)
    refused.value.close()
    assert refused.value.code == 401
    key = settings.openfga.preshared_key.get_secret_value()
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 200


def test_neo4j_requires_the_password(settings: Settings, first_up: list[stack.ServiceStatus]) -> None:
    neo = settings.neo4j
    with GraphDatabase.driver(neo.uri, auth=(neo.user, "not-the-password")) as driver:
        with pytest.raises(AuthError):
            driver.verify_connectivity()
    with GraphDatabase.driver(neo.uri, auth=(neo.user, neo.password.get_secret_value())) as driver:
        records, _, _ = driver.execute_query("RETURN 1 AS one", database_=neo.database)
    assert records[0]["one"] == 1


def test_a_port_held_by_a_foreign_process_raises_port_in_use(tmp_path: Path) -> None:
    foreign = socket.socket()
    foreign.bind(("127.0.0.1", 0))
    foreign.listen()
    port = foreign.getsockname()[1]
    # The Bolt port of the second service is taken: the check runs before anything starts.
    other = _settings(tmp_path, 28090, 28091, port, emulator_port=28191)
    try:
        with pytest.raises(PortInUse, match=rf"neo4j: port {port} \(Neo4j Bolt\)"):
            stack.up(other, notify=lambda message: None)
        assert not any(s.running for s in stack.status(other))
    finally:
        foreign.close()
        stack.down(other)


def test_down_stops_our_processes_and_frees_the_ports(
    settings: Settings, first_up: list[stack.ServiceStatus]
) -> None:
    stopped = stack.down(settings)
    assert [s.running for s in stopped] == [False, False, False]
    for service in first_up:
        assert service.pid is not None and not _alive(service.pid)
    for port in (28080, 28081, 27687, 28190):
        assert _port_is_free("127.0.0.1", port)
    assert not list(settings.services_dir.glob("*/*.pid"))
    assert [s.detail for s in stack.down(settings)] == ["was not running"] * 3
