"""Bring the local services up, down, or report on them. Used by the CLI; synchronous on purpose."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Protocol

from core.errors import ServiceError
from core.settings import Settings
from devstack import process
from devstack.atlassian.service import AtlassianEmulatorService
from devstack.neo4j import Neo4jService
from devstack.openfga import OpenFGAService
from devstack.postgres import PostgresService


@dataclass(frozen=True)
class ServiceStatus:
    """What one local service is doing, as the CLI prints it."""

    name: str
    running: bool
    pid: int | None
    address: str
    detail: str
    start_seconds: float | None = None  # launch → healthy, only for a service this call started


class LocalService(Protocol):
    """What the stack needs from one service module."""

    name: str
    files: process.ServiceFiles
    start_deadline_s: float
    stop_grace_s: float

    @property
    def address(self) -> str: ...

    def ports(self) -> list[process.Port]: ...

    def install(self, notify: Callable[[str], None]) -> None: ...

    def launch(self) -> int: ...

    def is_healthy(self) -> bool: ...


def services(settings: Settings, only: Collection[str] | None = None) -> list[LocalService]:
    """The services of the local stack (all, or those named in ``only``), in start order.
    PostgreSQL runs for the ``production`` storage profile; the Confluence emulator only when no
    real site is configured."""
    stack: list[LocalService] = [OpenFGAService(settings), Neo4jService(settings)]
    if settings.lightrag.storage == "production":
        stack.append(PostgresService.for_settings(settings))
    if settings.confluence.emulated:
        stack.append(AtlassianEmulatorService(settings))
    return [s for s in stack if only is None or s.name in only]


def up(
    settings: Settings, notify: Callable[[str], None] | None = None, only: Collection[str] | None = None
) -> list[ServiceStatus]:
    """Start every service that is not running; reuse the ones that are, after a health check."""
    say = notify or _to_stderr
    stack = services(settings, only)
    # Check every port before starting anything, so a conflict leaves nothing half up.
    for service in stack:
        if process.running_pid(service.files) is None:
            process.forget_stale_pid(service.files)
            for port in service.ports():
                process.ensure_port_free(port, service.name)
    return [ensure_up(service, say) for service in stack]


def down(settings: Settings, only: Collection[str] | None = None) -> list[ServiceStatus]:
    """Stop the services whose pid files we wrote, in reverse start order. Nothing else is touched."""
    statuses = []
    for service in reversed(services(settings, only)):
        pid = process.stop(service.files, service.stop_grace_s)
        detail = f"stopped (was pid {pid})" if pid is not None else "was not running"
        statuses.append(ServiceStatus(service.name, False, None, service.address, detail))
    return list(reversed(statuses))


def status(settings: Settings) -> list[ServiceStatus]:
    """Report each service: whether our process is alive and whether it answers."""
    statuses = []
    for service in services(settings):
        pid = process.running_pid(service.files)
        if pid is None:
            statuses.append(ServiceStatus(service.name, False, None, service.address, "stopped"))
            continue
        statuses.append(ServiceStatus(service.name, True, pid, service.address, _health(service)))
    return statuses


def ensure_up(service: LocalService, say: Callable[[str], None]) -> ServiceStatus:
    """Start ``service`` unless ours is running; either way, return once it is healthy."""
    pid = process.running_pid(service.files)
    if pid is not None:
        # Ours and alive: it may still be starting (another `up` a moment ago), so wait, don't restart.
        process.wait_healthy(service.files, service.is_healthy, service.start_deadline_s)
        return ServiceStatus(service.name, True, pid, service.address, "already running")
    service.install(say)
    started = time.monotonic()
    pid = service.launch()
    try:
        process.wait_healthy(service.files, service.is_healthy, service.start_deadline_s)
    except BaseException:
        # A half-started service would hold its ports and block the next attempt.
        process.stop(service.files, service.stop_grace_s)
        raise
    seconds = time.monotonic() - started
    return ServiceStatus(service.name, True, pid, service.address, f"started in {seconds:.1f} s", seconds)


def _health(service: LocalService) -> str:
    try:
        return "healthy" if service.is_healthy() else "running but not answering"
    except ServiceError as exc:  # e.g. Neo4j refusing the password: report it, `status` must not fail
        return str(exc).splitlines()[0]


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
