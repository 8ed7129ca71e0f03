"""The leak suite's categories for Jira, restricted comments, link spellings, colliding identities,
the Slack bot's readers, timing and a restriction that takes a large subtree from the sync
account, on the Hive slice and the HIVE issues it cites, synced over REST into a stack of this
module's own — and proof that they fail when the rules they guard are broken."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from rich.console import Console

from core import ids
from devstack import stack
from devstack.atlassian.hive import seed_hive
from devstack.atlassian.hive_jira import seed_hive_jira
from devstack.atlassian.runner import serving as serving_site
from devstack.atlassian.server import Emulator
from devstack.atlassian.site import Site
from devstack.atlassian.view import site_view
from devstack.leaks import jira_source, leak_target, plant_canaries, plant_fidelity, synced_from
from evals.leaks.fidelity import TIMED_TOOLS
from evals.leaks.suite import ACTORS, LeakSuite, NEEDS
from mcp_app import auth
from pipeline.raw_store import RawStore
from pipeline.sources.confluence_rest import ConfluenceRestSource
from pipeline.sync import run_sync
from tests.conftest import CORPUS, SLICE_ROOTS
from tests.conftest import test_settings as settings_in

pytestmark = pytest.mark.timeout(1500)
FIDELITY = sorted(NEEDS)


@pytest.fixture(scope="module")
async def synced(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, Any]]:
    own = settings_in(tmp_path_factory.mktemp("leak-fidelity"))
    own = own.model_copy(
        update={
            "openfga": own.openfga.model_copy(update={"http_port": 29880, "grpc_port": 29881, "store_name": "wayfinder-test-fidelity"}),
            "neo4j": own.neo4j.model_copy(update={"bolt_port": 29987}),
            "mcp": own.mcp.model_copy(update={"port": 29769}),
        }
    )
    site = Site()
    await seed_hive(site, CORPUS, roots=SLICE_ROOTS)
    await seed_hive_jira(site, CORPUS)
    plants = plant_fidelity(site, "HIVE")
    canaries = plant_canaries(site, ["HIVE"])
    with serving_site(Emulator(site, secrets.token_urlsafe(32))) as url:
        settings = synced_from(own, url)
        try:
            stack.up(settings, notify=lambda _: None)
            async with RawStore.for_settings(settings) as store:
                source = ConfluenceRestSource(settings.confluence, settings.confluence.url or "")
                report = await run_sync(settings, source, store, Console(quiet=True), jira=jira_source(settings))
            assert not report.failed and report.jira is not None and report.jira.restricted_comments > 0
            yield {"settings": settings, "site": site, "url": url, "plants": plants, "canaries": canaries}
        finally:
            stack.down(settings)


@asynccontextmanager
async def target_of(synced: dict[str, Any], services: Any = None) -> AsyncIterator[Any]:
    site = synced["site"]
    async with leak_target(
        synced["settings"], site_view(site, ["HIVE"]), synced["canaries"], services, site=site, site_url=synced["url"], plants=synced["plants"]
    ) as (target, environment):
        yield dataclasses.replace(target, timing_calls=40), environment


async def test_every_fidelity_category_finds_no_leak_and_no_false_denial(synced):
    async with target_of(synced) as (target, environment):
        suite = LeakSuite(target, environment)
        assert set(FIDELITY) <= set(suite.categories())
        report = await suite.run([c for c in suite.categories() if c in FIDELITY])
    summary = report.as_json()
    print(summary)
    assert report.passed, report.failures
    for category in FIDELITY:
        assert summary["by_category"][category]["probes"] > 0, category
    assert set(summary["timing"]) == set(TIMED_TOOLS)
    assert summary["by_category"]["jira_issues"]["probes"] >= len(ACTORS) * len(synced["site"].jira.issues)


@pytest.mark.parametrize(
    ("sabotage", "categories"),
    [
        ("a restricted comment joins its issue's text", ["jira_comments"]),
        ("a restricted comment is read by a wider role", ["jira_comments"]),
        ("a token's name is taken as an id", ["identity"]),
        ("links keep their targets", ["link_forms"]),
        ("the bot posts to its channel's members alone", ["slack_channels"]),
    ],
)
async def test_each_fidelity_category_fails_when_its_rule_is_broken(synced, monkeypatch, sabotage, categories):
    resynced = sabotage in ("a restricted comment joins its issue's text", "a restricted comment is read by a wider role")
    if resynced:
        from pipeline import jira_sync

        if sabotage == "a restricted comment joins its issue's text":
            monkeypatch.setattr(jira_sync, "_markdown_args", _with_every_comment)
            monkeypatch.setattr("pipeline.raw_store.JIRA_CONVERTER", 99)  # convert every issue again
        else:  # every note to the Developers role, which bob holds through hive-users and Jira does not show them to
            monkeypatch.setattr(jira_sync, "comment_audience", lambda project, visibility: f"project_role:{project}.Developers#member")
        async with RawStore.for_settings(synced["settings"]) as store:
            await run_sync(
                synced["settings"], ConfluenceRestSource(synced["settings"].confluence, synced["settings"].confluence.url or ""),
                store, Console(quiet=True), jira=jira_source(synced["settings"]),
            )
    elif sabotage == "a token's name is taken as an id":
        monkeypatch.setattr(auth.ids, "user_name", lambda raw: raw if ids.is_name(raw) else ids.safe_name(raw))
    elif sabotage == "links keep their targets":
        from authz import links

        monkeypatch.setattr(links, "render", lambda text, visible: text)
    else:
        from slackbot import bot

        monkeypatch.setattr(bot, "_scope", lambda conversation, team: "members")
    try:
        async with target_of(synced) as (target, environment):
            report = await LeakSuite(target, environment, [a for a in ACTORS if a.principal.agent is None]).run(categories)
        for category in categories:
            assert report.by_category[category].leaks >= 1, (sabotage, category, report.failures)
    finally:
        if resynced:
            monkeypatch.undo()
            async with RawStore.for_settings(synced["settings"]) as store:  # the issues' own text again
                await run_sync(
                    synced["settings"], ConfluenceRestSource(synced["settings"].confluence, synced["settings"].confluence.url or ""),
                    store, Console(quiet=True), jira=jira_source(synced["settings"]),
                )


def _with_every_comment(stored: Any) -> Any:
    body = stored.body or {}
    comments = [{**c, "visibility": None} for c in body.get("comments", [])]  # every comment read as open
    return stored.listed.key, stored.listed.summary, body.get("description"), comments
