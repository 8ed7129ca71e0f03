"""The ``wayfinder`` command: local services, the index job, the MCP server and the demo."""

from __future__ import annotations

import asyncio
import logging
from enum import Enum
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from core import ids
from core.errors import AuthorizationUnavailable, InvalidArgument, NavigatorUnavailable, WayfinderError
from core.settings import Settings

app = typer.Typer(no_args_is_help=True, help="Wayfinder: permission-aware GraphRAG over Confluence.")
services_app = typer.Typer(no_args_is_help=True, help="Local OpenFGA and Neo4j without Docker.")
app.add_typer(services_app, name="services")
grants_app = typer.Typer(no_args_is_help=True, help="Delegation: let an agent act for a user on one task, for a while.")
app.add_typer(grants_app, name="grants")
console = Console(stderr=True)


class Transport(str, Enum):
    http = "http"
    stdio = "stdio"


def _fail(exc: WayfinderError) -> typer.Exit:
    console.print(f"[red]error:[/red] {exc}")
    return typer.Exit(code=1)


def _print_services(statuses) -> None:
    table = Table("service", "running", "pid", "address", "start (s)", "detail")
    for s in statuses:
        started = f"{s.start_seconds:.1f}" if s.start_seconds is not None else ""
        table.add_row(s.name, "yes" if s.running else "no", str(s.pid or ""), s.address, started, s.detail)
    console.print(table)


@services_app.command("up")
def services_up() -> None:
    """Build (first time only) and start OpenFGA and Neo4j on loopback; reuse them if running."""
    from devstack import stack

    try:
        _print_services(stack.up(Settings()))
    except WayfinderError as exc:
        raise _fail(exc) from exc


@services_app.command("down")
def services_down() -> None:
    """Stop the services this checkout started (and only those)."""
    from devstack import stack

    _print_services(stack.down(Settings()))


@services_app.command("status")
def services_status() -> None:
    """Show whether the local services run."""
    from devstack import stack

    _print_services(stack.status(Settings()))


def _grants(action):
    """Run ``action(store)`` against the OpenFGA store, with the CLI's error handling."""
    from authz.client import OpenFGAClient

    async def run():
        async with OpenFGAClient(Settings().openfga) as store:
            return await action(store)

    try:
        return asyncio.run(run())
    except AuthorizationUnavailable as exc:
        console.print("[yellow]hint:[/yellow] is OpenFGA running and indexed? `wayfinder services status`")
        raise _fail(exc) from exc
    except WayfinderError as exc:
        raise _fail(exc) from exc


@grants_app.command("add")
def grants_add(
    user: str,
    agent: str,
    task: str,
    ttl: str = typer.Option("8h", help="How long the grant lives: 90s, 30m, 8h, 7d (at most 90 days)."),
) -> None:
    """Let AGENT act for USER on TASK until the lifetime ends (renews an existing grant)."""
    from authz import grants

    lifetime = _checked(lambda: grants.parse_ttl(ttl))
    grantor = _checked(lambda: ids.user_name(user))  # a user named as everywhere else (DESIGN.md A14)
    made = _grants(lambda store: grants.grant(store, grantor, agent, task, lifetime))
    console.print(f"granted: {made.agent} acts for {made.user} on {made.task} until {made.expires_at:%Y-%m-%d %H:%M:%S} UTC")


@grants_app.command("revoke")
def grants_revoke(
    user: str,
    agent: str = typer.Option(None, help="Only grants to this agent."),
    task: str = typer.Option(None, help="Only grants for this task."),
) -> None:
    """Delete USER's grants (all, or those matching --agent / --task). Takes effect on the next request."""
    from authz import grants

    grantor = _checked(lambda: ids.user_name(user))
    gone = _grants(lambda store: grants.revoke(store, grantor, agent, task))
    console.print(f"revoked {len(gone)} grant(s)")


@grants_app.command("list")
def grants_list() -> None:
    """Show every grant and whether it is still live."""
    from datetime import UTC, datetime

    from authz import grants

    now = datetime.now(UTC)
    table = Table("user", "agent", "task", "expires (UTC)", "live")
    for g in _grants(grants.list_grants):
        table.add_row(g.user, g.agent, g.task, f"{g.expires_at:%Y-%m-%d %H:%M:%S}", "yes" if g.live(now) else "no")
    console.print(table)


def _checked(make):
    try:
        return make()
    except WayfinderError as exc:
        raise _fail(exc) from exc


@app.command()
def sync(
    permissions_only: bool = typer.Option(
        False, "--permissions-only", help="Only restrictions, space permissions and group memberships → OpenFGA (cheap; run often)."
    ),
) -> None:
    """Sync Confluence over REST: changed pages → raw store → Markdown → OpenFGA, Neo4j, LightRAG."""
    from devstack.atlassian.service import sync_configured

    try:
        report = asyncio.run(sync_configured(Settings(), console, permissions_only=permissions_only))
    except (AuthorizationUnavailable, NavigatorUnavailable) as exc:
        console.print("[yellow]hint:[/yellow] are the services running? `wayfinder services status`")
        raise _fail(exc) from exc
    except WayfinderError as exc:
        raise _fail(exc) from exc
    if report.failed:
        raise typer.Exit(code=2)


@app.command()
def serve(transport: Transport = Transport.http) -> None:
    """Run the MCP server over streamable HTTP (bearer tokens) or stdio (the configured user)."""
    from core.memory import skip_unused_extras

    skip_unused_extras()  # before the server's modules import the libraries that would load them
    from functools import partial

    from authz.audit import audit_key
    from core.telemetry import Metrics, tracing
    from mcp_app.auth import fixed_identity, http_auth, http_identity
    from mcp_app.server import audit_receipts, create_server, http_guard, open_services

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    settings = Settings()
    telemetry = settings.mcp.telemetry
    tracer = tracing(telemetry)
    metrics: Metrics | None = None
    try:
        services, receipts = partial(open_services, settings, freeze=True), audit_receipts(audit_key(settings))
        if telemetry.metrics_port is not None:
            metrics = Metrics()
            metrics.serve(telemetry.metrics_host, telemetry.metrics_port)
        if transport is Transport.stdio:
            server = create_server(
                services, fixed_identity(settings.mcp.stdio_principal), observe=receipts, limits=settings.mcp.limits, metrics=metrics,
                not_found_floor_s=settings.mcp.not_found_floor_s,
            )
            server.run(transport="stdio", show_banner=False)
        else:
            server = create_server(
                services, http_identity, observe=receipts, auth=http_auth(settings.mcp), limits=settings.mcp.limits,
                tool_scopes=settings.mcp.oauth.tool_scopes, metrics=metrics, not_found_floor_s=settings.mcp.not_found_floor_s,
            )
            server.run(
                transport="http",
                host=settings.mcp.host,
                port=settings.mcp.port,
                path="/mcp",
                show_banner=False,
                **http_guard(settings.mcp),
            )
    except WayfinderError as exc:
        raise _fail(exc) from exc
    finally:
        if tracer is not None:
            tracer.shutdown()  # sends the spans still batched


@app.command()
def slackbot(
    socket_mode: bool = typer.Option(False, help="Connect out over Socket Mode instead of serving HTTP events."),
) -> None:
    """Run the Slack bot: it answers mentions and DMs as the Slack user who asks, through the MCP server."""
    from slackbot.app import run

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        asyncio.run(run(Settings(), socket_mode=socket_mode))
    except WayfinderError as exc:
        raise _fail(exc) from exc
    except KeyboardInterrupt:
        pass


@app.command()
def demo(
    external_services: bool = typer.Option(
        False, help="OpenFGA and Neo4j already run elsewhere (e.g. docker compose); do not start them."
    ),
) -> None:
    """Start the stack, index the Hive space, serve over HTTP and show what alice, bob and carol see."""
    from devstack.demo import run_demo

    try:
        run_demo(Settings(), console, start_services=not external_services)
    except WayfinderError as exc:
        raise _fail(exc) from exc


@app.command("bench-authz")
def bench_authz() -> None:
    """Measure the gate's cost per tool against an allow-all stand-in, side by side (demo stack)."""
    from devstack.bench_authz import run_bench_authz

    try:
        asyncio.run(run_bench_authz(Settings(), console))
    except WayfinderError as exc:
        raise _fail(exc) from exc


@app.command("bench-nav")
def bench_nav() -> None:
    """The navigator on 170,000 pages and 50,000 issues: each tool with the real gate and allow-all side by side."""
    from devstack.bench_nav import run_bench_nav

    try:
        asyncio.run(run_bench_nav(Settings(), console))
    except WayfinderError as exc:
        raise _fail(exc) from exc


@app.command("bench-incremental")
def bench_incremental(
    production: bool = typer.Option(False, help="On the production storage profile (PostgreSQL with pgvector, Neo4j)."),
) -> None:
    """Full sync, ~1% churn through the emulator, incremental sync: times, calls, and each change checked in every store."""
    from devstack.bench_incremental import run_bench_incremental

    try:
        report = asyncio.run(run_bench_incremental(Settings(), console, "production" if production else "files"))
    except WayfinderError as exc:
        raise _fail(exc) from exc
    if not report["all_changes_reached_every_store"]:
        raise typer.Exit(code=1)


@app.command("bench-index")
def bench_index(
    scale: bool = typer.Option(False, help="Also the 1,890 MuSiQue passages as a flat space (2,195 pages)."),
    production: bool = typer.Option(False, help="On the production storage profile (PostgreSQL with pgvector, Neo4j)."),
) -> None:
    """Index the Hive space from empty stores: pages/s, the ratio to embedding the chunks alone, server memory and search latency."""
    from devstack.bench_index import run_bench_index

    try:
        asyncio.run(run_bench_index(Settings(), console, scale=scale, storage="production" if production else "files"))
    except WayfinderError as exc:
        raise _fail(exc) from exc


@app.command("bench-mcp")
def bench_mcp(
    clients: int = typer.Option(50, min=1, help="MCP clients at once, each a user of its own."),
    seconds: float = typer.Option(60.0, min=1.0, help="How long they call."),
) -> None:
    """Many MCP clients over HTTP at once, each answer checked against the leak oracle: errors, leaks, latency, server memory."""
    from devstack.bench_mcp import run_bench_mcp

    try:
        report = asyncio.run(run_bench_mcp(Settings(), console, clients=clients, duration_s=seconds))
    except WayfinderError as exc:
        raise _fail(exc) from exc
    if report["errors"] or report["leaks"]:
        raise typer.Exit(code=1)


@app.command("bench-semantic")
def bench_semantic() -> None:
    """Recall when a user sees 5%, 1% or 0.3% of a 20,000-chunk corpus: pre-filter, post-filter and a per-user oracle side by side."""
    from devstack.bench_semantic import run_bench_semantic

    try:
        asyncio.run(run_bench_semantic(Settings(), console))
    except WayfinderError as exc:
        raise _fail(exc) from exc


@app.command("eval")
def eval_(
    dataset: list[Path] = typer.Option(
        None, "--dataset", help="Question file (questions_dev.jsonl or MuSiQue format); repeatable. Default: both dev sets."
    ),
    principal: list[str] = typer.Option(
        None, "--principal", help="A user whose view is scored (gold pages hidden from them are left out); repeatable. Default: alice and bob."
    ),
    k: str = typer.Option("1,5,10", help="Cut-offs for recall@k, comma-separated."),
) -> None:
    """Retrieval quality: Wayfinder beside plain BM25, dense and LightRAG, and the navigator's exactness, on a stack of its own (Hive + MuSiQue)."""
    from devstack.evaluation import default_datasets, run_eval
    from retrievers.semantic import MAX_TOP_K

    settings = Settings()
    try:
        ks = sorted({int(part) for part in k.split(",") if part.strip()})
    except ValueError:
        raise _fail(InvalidArgument(f"--k takes whole numbers separated by commas, got {k!r}")) from None
    if not ks or ks[0] < 1 or ks[-1] > MAX_TOP_K:
        raise _fail(InvalidArgument(f"--k takes cut-offs from 1 to {MAX_TOP_K} (the most hits search returns), got {k!r}"))
    try:
        asyncio.run(run_eval(settings, console, dataset or default_datasets(settings), principal or ["alice", "bob"], ks))
    except WayfinderError as exc:
        raise _fail(exc) from exc


@app.command("leak-suite")
def leak_suite() -> None:
    """Probe every page as every principal over MCP on a stack of its own; exit 1 on any leak."""
    from devstack.leaks import run_leak_suite

    # The probes provoke refusals by the thousand; the report counts them, the log need not.
    for noisy in ("mcp.server.streamable_http_manager", "wayfinder.mcp", "fastmcp"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    settings = Settings()
    try:
        report = asyncio.run(run_leak_suite(settings, console))
    except WayfinderError as exc:
        raise _fail(exc) from exc
    if not report.passed:
        raise typer.Exit(code=1)


if __name__ == "__main__":
    app()
