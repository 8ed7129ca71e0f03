"""The navigator over both trees on a stack of its own (real OpenFGA and Neo4j): the whole Hive
space and the HIVE Jira project synced over REST from the emulator by ``run_sync`` (the semantic
index is not needed here, so an in-memory one stands in). The dev set's navigation questions are
answered exactly, as bob with the real gate; Jira's paths stop at what each user may see, and a
level change reaches them with the next sync. Synced again from each deployment the emulator
plays (Cloud, Data Center 9.1+, Data Center 8.x; each found out from the site), everyone sees the
same documents and the same tree, and the Cloud sync reaches none of the v1 reads Cloud removed."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator

import neo4j
import pytest
from pydantic import SecretStr
from rich.console import Console

from authz.client import OpenFGAClient
from authz.gate import Gate
from authz.prefilter import ACL_FILE, AclKeys
from core.errors import NotFound
from core.ids import user_name
from core.models import Principal
from core.settings import JiraSettings, Settings
from devstack import stack
from devstack.atlassian.hive import SYNC_LOGIN, TOKENS, account_id, seed_hive
from devstack.atlassian.hive_jira import FIRST_STEPS, SECURITY_LEVEL, seed_hive_jira
from devstack.atlassian.runner import serving
from devstack.atlassian.server import Emulator
from devstack.atlassian.site import Site
from devstack.leaks import synced_from
from navigator.navigator import Navigator, TreeNode
from navigator.store import Neo4jStore
from pipeline.raw_store import RawStore
from pipeline.sources.confluence_rest import ConfluenceRestSource
from pipeline.sources.jira_rest import JiraRestSource
from pipeline.sync import run_sync
from retrievers.fake_index import FakeSemanticIndex
from tests.conftest import CORPUS
from tests.conftest import test_settings as settings_in

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

QUESTIONS = [json.loads(line) for line in (CORPUS / "questions_dev.jsonl").read_text().splitlines() if line.strip()]
NAVIGATION = [q for q in QUESTIONS if q["kind"] == "navigation"]
DEPLOYMENTS = ("cloud", "datacenter-9", "datacenter-8")
PEOPLE = ("alice", "bob", "carol")
THREAD = "HIVE-3056"


@pytest.fixture(scope="module")
async def whole_hive(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Settings, Site, str, Emulator]]:
    own = settings_in(tmp_path_factory.mktemp("whole-hive"))
    own = own.model_copy(
        update={
            "openfga": own.openfga.model_copy(update={"http_port": 29280, "grpc_port": 29281, "store_name": "wayfinder-test-nav"}),
            "neo4j": own.neo4j.model_copy(update={"bolt_port": 29787}),
        }
    )
    site = Site()
    await seed_hive(site, CORPUS)
    await seed_hive_jira(site, CORPUS)
    for n in range(25):  # a thread longer than Cloud's search carries, a few notes for the Committers only
        site.jira.add_comment(THREAD, f"Follow-up {n} on the metastore upgrade.", by=account_id("alice"), visibility=("role", "Committers") if n % 6 == 0 else None)
    emulator = Emulator(site, secrets.token_urlsafe(32))
    with serving(emulator) as url:
        synced = synced_from(own, url)
        try:
            stack.up(synced, notify=lambda _: None)
            index = FakeSemanticIndex()
            async with RawStore.for_settings(synced) as store:
                report = await run_sync(
                    synced, ConfluenceRestSource(synced.confluence, synced.confluence.url or ""), store, Console(quiet=True),
                    open_index=lambda _settings, _usage: index, jira=_jira(url),
                )
            assert not report.failed and report.jira is not None and len(report.jira.added) == len(site.jira.issues)
            # Issues and their restricted comments (each a document of its own, which the sync
            # account reads: it holds the role and the group) go to the semantic index beside the
            # pages, and the pre-filter keys hold them.
            notes = {f"comment:{c.id}" for issue in site.jira.issues.values() for c in issue.comments if c.visibility}
            documents = {f"issue:{key}" for key in site.jira.issues} | notes
            assert notes and documents <= await index.indexed_doc_ids()
            keys = AclKeys.load(synced.index_dir / ACL_FILE).by_space["project:HIVE"]
            assert keys["project:HIVE"] and {doc for docs in keys.values() for doc in docs} == documents
            # Notes on open issues share one anchor per audience (the Committers role, the reviewers group).
            assert len({anchor for anchor, docs in keys.items() for doc in docs if doc in notes}) == 2
            yield synced, site, url, emulator
        finally:
            stack.down(synced)


def _jira(url: str) -> JiraRestSource:
    """The emulator's Jira as a Data Center site, like the Confluence sync here."""
    return JiraRestSource(JiraSettings(username=SYNC_LOGIN, token=TOKENS[SYNC_LOGIN], page_size=100), url + "/jira")


def _preorder(node: TreeNode) -> list[str]:
    return [found for child in node.children for found in (child.id, *_preorder(child))]


@pytest.mark.parametrize("question", NAVIGATION, ids=[q["id"] for q in NAVIGATION])
async def test_a_navigation_question_is_answered_exactly(whole_hive, question: dict) -> None:
    settings = whole_hive[0]
    nav = question["nav"]
    expected = [f"page:{p}" for p in nav["expected"]]
    async with OpenFGAClient(settings.openfga) as authorizer, Neo4jStore(settings.neo4j) as store:
        gate = Gate(authorizer, Principal(user="bob"))
        navigator = Navigator(store)
        if nav["op"] == "children":
            tree = await navigator.get_tree(gate, f"page:{nav['node']}", depth=1, limit=200)
            assert [c.id for c in tree.root.children] == expected
            assert tree.root.child_count == len(expected)
        elif nav["op"] == "subtree":
            tree = await navigator.get_tree(gate, f"page:{nav['node']}", depth=2, limit=200)
            assert _preorder(tree.root) == expected
        elif nav["op"] == "resolve_path":
            resolved = await navigator.resolve_path(gate, nav["node"])
            assert [resolved.id] == expected
            breadcrumb = [c.id for c in await navigator.get_ancestors(gate, resolved.id)]
            assert breadcrumb[0] == "space:HIVE" and breadcrumb[1:] == [c["id"] for c in resolved.candidates[0]["breadcrumb"]]
        else:
            pytest.fail(f"unknown navigation op {nav['op']!r} in {question['id']}")
    assert len(NAVIGATION) >= 5


async def test_the_issue_tree_runs_project_epic_story_subtask_for_those_who_may_see_it(whole_hive) -> None:
    settings = whole_hive[0]
    story = f"issue:HIVE-{FIRST_STEPS}"
    async with OpenFGAClient(settings.openfga) as authorizer, Neo4jStore(settings.neo4j) as store:
        navigator = Navigator(store)

        def gate(user: str) -> Gate:
            return Gate(authorizer, Principal(user=user))

        ancestors = await navigator.get_ancestors(gate("carol"), story)
        assert [c.id for c in ancestors][0] == "project:HIVE" and len(ancestors) == 2  # project, then the story's epic
        epic = ancestors[1].id
        steps = await navigator.get_tree(gate("carol"), story, depth=1, limit=200)
        assert steps.root.child_count == len(steps.root.children) > 0 and not steps.truncated
        assert all(c.child_count == 0 for c in steps.root.children)  # sub-tasks have no children
        page = await navigator.list_children(gate("carol"), epic, None, 200)
        while story not in [c.id for c in page.items] and page.next_cursor:
            page = await navigator.list_children(gate("carol"), epic, page.next_cursor, 200)
        assert story in [c.id for c in page.items]
        top = await navigator.get_tree(gate("carol"), "project:HIVE", depth=1, limit=200)
        assert epic in [c.id for c in top.root.children]
        assert (await navigator.resolve_path(gate("carol"), "HIVE/HIVE-3056")).id == "issue:HIVE-3056"
        assert (await navigator.resolve_path(gate("carol"), "hive / hive-3056")).id == "issue:HIVE-3056"


async def test_secured_issues_and_their_sub_tasks_stop_the_path_for_those_outside_the_level(whole_hive) -> None:
    settings = whole_hive[0]
    async with OpenFGAClient(settings.openfga) as authorizer, Neo4jStore(settings.neo4j) as store:
        navigator = Navigator(store)

        def gate(user: str) -> Gate:
            return Gate(authorizer, Principal(user=user))

        top = await navigator.get_tree(gate("alice"), "project:HIVE", depth=1, limit=200)
        design_epic = next(c for c in top.root.children if c.title == "DesignDocs")
        epic_tree = await navigator.get_tree(gate("alice"), design_epic.id, depth=2, limit=200)
        secured_story = next(c for c in epic_tree.root.children if c.children)  # a story with sub-tasks, at level Security
        subtask = secured_story.children[0].id
        assert [c.id for c in await navigator.get_ancestors(gate("alice"), subtask)] == ["project:HIVE", design_epic.id, secured_story.id]
        bob_top = await navigator.get_tree(gate("bob"), "project:HIVE", depth=1, limit=200)
        assert design_epic.id not in [c.id for c in bob_top.root.children]
        assert bob_top.root.child_count == top.root.child_count - 1
        refused = []
        for call in (
            navigator.get_ancestors(gate("bob"), subtask),  # a sub-task of a secured story
            navigator.get_tree(gate("bob"), design_epic.id, depth=1, limit=10),
            navigator.resolve_path(gate("bob"), f"HIVE/{design_epic.title}"),  # never confirms a hidden title
            navigator.resolve_path(gate("bob"), "HIVE/No such epic anywhere"),
            navigator.resolve_path(gate("bob"), f"HIVE/{subtask.removeprefix('issue:')}"),
        ):
            with pytest.raises(NotFound) as caught:
                await call
            refused.append(str(caught.value).replace(design_epic.title, "X").replace("No such epic anywhere", "X").replace(subtask.removeprefix("issue:"), "X"))
        assert len(set(refused[2:])) == 1  # the three paths: one answer


async def test_a_level_change_reaches_the_tree_with_the_next_sync(whole_hive) -> None:
    settings, site, url, _ = whole_hive
    site.jira.set_security_level("HIVE-3056", SECURITY_LEVEL)
    try:
        report = await _sync_again(settings, url)
        assert "HIVE-3056" in report.jira.changed
        async with OpenFGAClient(settings.openfga) as authorizer, Neo4jStore(settings.neo4j) as store:
            navigator = Navigator(store)
            with pytest.raises(NotFound):
                await navigator.get_ancestors(Gate(authorizer, Principal(user="bob")), "issue:HIVE-3056")
            assert await navigator.get_ancestors(Gate(authorizer, Principal(user="alice")), "issue:HIVE-3056")
    finally:
        site.jira.set_security_level("HIVE-3056", None)
        await _sync_again(settings, url)


async def _sync_again(settings: Settings, url: str):
    async with RawStore.for_settings(settings) as store:
        return await run_sync(
            settings, ConfluenceRestSource(settings.confluence, settings.confluence.url or ""), store, Console(quiet=True),
            open_index=lambda _settings, _usage: FakeSemanticIndex(), jira=_jira(url),
        )


async def test_pages_mention_issues_and_issues_link_each_other_for_those_who_may_see_them(whole_hive) -> None:
    settings, site, _, _ = whole_hive
    async with OpenFGAClient(settings.openfga) as authorizer, Neo4jStore(settings.neo4j) as store:
        navigator = Navigator(store)

        def gate(user: str) -> Gate:
            return Gate(authorizer, Principal(user=user))

        metatool = await navigator.related(gate("bob"), "issue:HIVE-3056", 100)
        assert "page:55156221" in [p.id for p in metatool["mentioned_in"]]  # the Hive MetaTool page cites it
        page = await navigator.related(gate("bob"), "page:55156221", 100)
        assert {"issue:HIVE-3056", "issue:HIVE-3443"} <= {i.id for i in page["mentions"]}
        linked = next(i for i in site.jira.issues.values() if i.links and not site.jira.level_of(i))
        target = f"issue:{linked.links[0][1]}"
        out = await navigator.related(gate("alice"), f"issue:{linked.key}", 100)
        assert target in [i.id for i in out["links_to"]]
        assert f"issue:{linked.key}" in [i.id for i in (await navigator.related(gate("alice"), target, 100))["linked_from"]]
        # a page alice and bob both see that cites a Security issue: bob is not told of that issue
        secured = {i.key for i in site.jira.issues.values() if site.jira.level_of(i) is not None and site.jira.level_of(i).name == "Security"}
        for page_id, stored in site.pages.items():
            if stored.restricted or any(a.restricted for a in site.ancestors(stored)):
                continue
            cited = {k for k in secured if k in stored.body}
            if cited:
                for_alice = {i.id for i in (await navigator.related(gate("alice"), f"page:{page_id}", 100))["mentions"]}
                for_bob = {i.id for i in (await navigator.related(gate("bob"), f"page:{page_id}", 100))["mentions"]}
                assert {f"issue:{k}" for k in cited} & for_alice and not {f"issue:{k}" for k in secured} & for_bob
                break
        else:
            pytest.fail("no open page cites a Security issue")


async def test_an_issue_is_fetched_with_its_text_by_those_who_may_see_it(whole_hive) -> None:
    settings, site, _, _ = whole_hive
    secured = next(i.key for i in site.jira.issues.values() if i.security_level and i.hierarchy_level == 0)
    async with OpenFGAClient(settings.openfga) as authorizer, Neo4jStore(settings.neo4j) as store:
        navigator = Navigator(store)
        view = await navigator.read_page(Gate(authorizer, Principal(user="bob")), "issue:HIVE-3056")
        assert view.markdown.startswith("# HIVE-3056: ") and "MetaTool" in view.markdown
        assert [c.id for c in view.breadcrumb] == [site.jira.issues["HIVE-3056"].parent_key and f"issue:{site.jira.issues['HIVE-3056'].parent_key}"]
        assert (await navigator.read_page(Gate(authorizer, Principal(user="alice")), f"issue:{secured}")).id == f"issue:{secured}"
        with pytest.raises(NotFound):
            await navigator.read_page(Gate(authorizer, Principal(user="bob")), f"issue:{secured}")


@pytest.fixture(scope="module")
async def every_deployment(whole_hive, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    """The views of the sync above (Data Center 9.1+, asked again now), then of a sync from the
    Cloud face and from a Data Center 8.x site into stores of their own beside it (the tree into
    the same Neo4j, where it must come out the same)."""
    settings, site, url, emulator = whole_hive
    views = {"datacenter-9": await _views(settings, site, "datacenter-9")}
    with serving(Emulator(site, emulator.admin_token, data_center="8.9.0")) as url_8:
        roots = {"cloud": (url + "/wiki", url), "datacenter-8": (url_8 + "/confluence", url_8 + "/jira")}
        emulator.removed.clear()
        for deployment, (wiki, jira) in roots.items():
            own = _settings_for(settings, deployment, wiki, jira, tmp_path_factory)
            async with RawStore.for_settings(own) as store:
                report = await run_sync(
                    own, ConfluenceRestSource(own.confluence, wiki), store, Console(quiet=True),
                    open_index=lambda _settings, _usage: FakeSemanticIndex(), jira=JiraRestSource(own.jira, jira),
                )
            assert not report.failed and report.jira is not None and len(report.jira.added) == len(site.jira.issues), deployment
            views[deployment] = await _views(own, site, deployment)
            if deployment == "cloud":
                views[deployment]["removed"] = dict(emulator.removed)
    views["thread"] = {f"comment:{c.id}" for c in site.jira.issues[THREAD].comments if c.visibility}
    return views


def _settings_for(base: Settings, deployment: str, wiki: str, jira: str, tmp: pytest.TempPathFactory) -> Settings:
    """The stack of ``base`` with an OpenFGA store and a data directory of the deployment's own,
    which the sources ask the site for."""
    account = {"username": SYNC_LOGIN, "token": SecretStr(TOKENS[SYNC_LOGIN])}
    return base.model_copy(
        update={
            "data_dir": tmp.mktemp(deployment) / "run",
            "openfga": base.openfga.model_copy(update={"store_name": f"wayfinder-test-nav-{deployment}"}),
            "confluence": base.confluence.model_copy(update={"url": wiki, **account}),
            "jira": base.jira.model_copy(update={"url": jira, "page_size": 100, **account}),
        }
    )


def _sample(site: Site) -> list[str]:
    """Documents whose readers differ: the restricted pages and what lies under them, issues at a
    security level, restricted comments (a sixth of each, at most 100), and the home page."""
    restricted = [p for p in site.pages.values() if p.restricted]
    below = [d.id for p in restricted for d in site.descendants(p.id)]
    secured = sorted(k for k, i in site.jira.issues.items() if site.jira.level_of(i) is not None)
    notes = sorted(c.id for i in site.jira.issues.values() for c in i.comments if c.visibility)
    return (
        [f"page:{p.id}" for p in restricted] + [f"page:{p}" for p in below[::6][:100]] + [f"page:{p.id}" for p in site.pages.values() if p.parent_id is None]
        + [f"issue:{k}" for k in secured[::6][:100]] + [f"comment:{c}" for c in notes[::6][:100]]
    )  # fmt: skip


async def _views(settings: Settings, site: Site, deployment: str) -> dict[str, object]:
    """Every tuple (Cloud's account ids named as their people's Data Center usernames), every
    tree edge, and what each person may see of the sample, asked through the gate."""
    conf = settings.neo4j
    with neo4j.GraphDatabase.driver(conf.uri, auth=(conf.user, conf.password.get_secret_value())) as driver:
        rows, _, _ = driver.execute_query("MATCH (a)-[r]->(b) RETURN a.id AS a, type(r) AS r, b.id AS b", database_=conf.database)
    people = {f"user:{user_name(u.account_id)}": f"user:{user_name(u.username)}" for u in site.users.values()} if deployment == "cloud" else {}
    seen: dict[str, set[str]] = {}
    async with OpenFGAClient(settings.openfga) as fga:
        tuples = {(people.get(t.user, t.user), t.relation, t.object) for t in await fga.read_tuples()}
        sample = _sample(site)
        for person in PEOPLE:
            raw = account_id(person) if deployment == "cloud" else person
            seen[person] = set()
            for start in range(0, len(sample), 100):  # in requests of a size the gate's deadline allows
                seen[person] |= await Gate(fga, Principal(user=user_name(raw))).visible(sample[start : start + 100])
    return {"tuples": tuples, "edges": {(row["a"], row["r"], row["b"]) for row in rows}, "seen": seen}


async def test_every_deployment_gives_everyone_the_same_view(every_deployment) -> None:
    baseline = every_deployment["datacenter-9"]
    for deployment in DEPLOYMENTS:
        found = every_deployment[deployment]
        assert found["tuples"] == baseline["tuples"] and found["edges"] == baseline["edges"], deployment
        for person in PEOPLE:
            assert found["seen"][person] == baseline["seen"][person], (deployment, person)
    alice, bob, carol = (baseline["seen"][p] for p in PEOPLE)
    assert len(alice) > len(bob) > 0 and not any(doc.startswith("page:") for doc in carol)  # views differ by person only
    # Cloud's search carries 20 comments: the Committers' notes past them come from the comment endpoint.
    notes = every_deployment["thread"]
    assert len(notes) >= 4 and notes <= {t[2] for t in every_deployment["cloud"]["tuples"]}


async def test_the_cloud_sync_asks_no_read_cloud_removed(every_deployment) -> None:
    assert every_deployment["cloud"]["removed"] == {}
