"""The visibility rules of authz.policy and authz.links, each tested once, here."""

from dataclasses import dataclass

import pytest

from authz import links, policy
from authz.base import Check
from authz.fake import FakeAuthorizer
from authz.gate import Gate
from core.models import Principal


@dataclass(frozen=True)
class Crumb:
    id: str


@dataclass(frozen=True)
class Placed:
    id: str
    space_id: str
    ancestors: tuple[Crumb, ...]


def gate_with(*allowed: str) -> Gate:
    return Gate(FakeAuthorizer([Check("user:bob", "viewer", o) for o in allowed]), Principal(user="bob"))


def test_a_breadcrumb_stops_below_the_first_hidden_ancestor():
    path = tuple(Crumb(f"page:{n}") for n in (1, 2, 3, 4))  # root first, parent last
    assert policy.visible_path_to(path, {"page:1", "page:3", "page:4"}) == path[2:]
    assert policy.visible_path_to(path, {"page:1", "page:2", "page:3"}) == ()
    assert policy.visible_path_to(path, {c.id for c in path}) == path


@pytest.mark.parametrize(
    ("evidence", "expected"),
    [({"page:1"}, True), ({"page:1", "page:2"}, True), ({"page:1", "page:9"}, False), (set(), False)],
)
def test_a_derived_item_needs_every_supporting_document(evidence, expected):
    assert policy.derived_visible(evidence, {"page:1", "page:2"}) is expected


async def test_visible_pages_need_the_page_and_its_space_and_cut_breadcrumbs_in_one_batch():
    pages = {
        "page:3": Placed("page:3", "space:S", (Crumb("page:1"), Crumb("page:2"))),
        "page:4": Placed("page:4", "space:T", ()),  # its space is hidden
        "page:5": Placed("page:5", "space:S", ()),  # hidden itself
    }
    gate = gate_with("space:S", "page:1", "page:3", "page:4")
    shown = await policy.visible_pages(gate, pages)
    assert shown == {"page:3": Placed("page:3", "space:S", ())}  # page:2 hidden cuts the crumbs
    assert len(gate.authorizer.calls) == 1


TEXT = (
    "See [Design](page:27362075#goals) and [Guide](page:1).\n"
    "![chart](https://wiki.example.com/confluence/download/attachments/27362075/chart.png \"c\")\n"
    "Bare page:27362075, page:1, <https://x.example.com/wiki/spaces/H/pages/27362075/Design>,\n"
    "https://wiki.example.com/confluence/pages/viewpage.action?pageId=27362075 and HIVE-27362075.\n"
)


def test_hidden_link_targets_are_removed_and_text_kept():
    shown = links.render(TEXT, {"page:1"})
    assert "27362075" not in shown.replace("HIVE-27362075", "")
    assert "See Design and [Guide](page:1)." in shown
    assert "\nchart\n" in shown
    assert shown.count(links.UNAVAILABLE) == 3 and "page:1," in shown


def test_a_hidden_target_and_a_missing_one_render_the_same():
    hidden = links.render("[Design](page:27362075) page:27362075", {"page:1"})
    missing = links.render("[Design](page:99999999) page:99999999", {"page:1"})
    assert hidden == missing == f"Design {links.UNAVAILABLE}"


def test_references_find_typed_ids_and_confluence_urls():
    assert links.references_in([TEXT]) == {"page:27362075", "page:1"}


@pytest.mark.parametrize(
    "spelling",
    [
        "https://x.example.com/wiki/spaces/HIVE/pages/27362075.",
        "https://x.example.com/wiki/spaces/HIVE/pages/27362075?focusedCommentId=5",
        "[t](/wiki/spaces/HIVE/pages/27362075/Design)",
        "cwiki.apache.org/confluence/pages/viewpage.action?pageId=27362075",
        "HTTPS://X/PAGES/VIEWPAGE.ACTION?PAGEID=27362075",
        "x/viewpage.action?a=1&amp;pageId=27362075",
        "login.action?os_destination=%2Fpages%2Fviewpage.action%3FpageId%3D27362075",
        "/download/attachments/27362075",
        "/download/attachments/27362075?version=2",
        "/download/thumbnails/27362075/x.png",
        "/rest/api/content/27362075",
        "/pages/edit-v2/27362075",
        "[t](viewpage.action?pageId=27362075)",
        "[t](?pageId=27362075)",
        "xpage:27362075",
        "page:27362075_",
        "…/fetch/page:27362075",
        '<a href="/pages/27362075">x</a>',
        "| [Design](page:27362075) |",
    ],
)
def test_no_spelling_of_a_hidden_reference_survives(spelling):
    shown = links.render(f"see {spelling} now", {"page:1"})
    assert "27362075" not in shown and shown.startswith("see ") and shown.endswith(" now")


async def test_redact_asks_the_gate_once_for_every_text():
    gate = gate_with("page:1")
    out = await links.redact(gate, ["[a](page:1) [b](page:2)", "page:3"])
    assert out == ["[a](page:1) b", links.UNAVAILABLE]
    (batch,) = gate.authorizer.calls
    assert {c.object for c in batch} == {"page:1", "page:2", "page:3"}


# Tiny links as Confluence writes them: the first two are in the Hive export, pointing at
# StatisticsAndDataMining and LanguageManual UDF; read with RFC 4648's URL-safe alphabet, which
# swaps "-" and "_", the second would name LanguageManual Sampling (27362042) instead.
@pytest.mark.parametrize(
    ("code", "page"),
    [("CoOhAQ", 27362058), ("-oKhAQ", 27362046), ("-I_hAQ", 27365372), ("OgAOBQ", 84803642), ("AwAbC", 135987203), ("2oEBfw", 2130805210)],
)
def test_a_tiny_link_names_the_page_its_code_encodes(code, page):
    for spelling in (f"https://x.atlassian.net/wiki/x/{code}", f"<https://cwiki.apache.org/confluence/x/{code}/>", f"%2Fx%2F{code}"):
        assert links.references_in([spelling]) == {f"page:{page}"}, spelling


@pytest.mark.parametrize(
    ("spelling", "target", "hidden"),
    [
        ("https://cwiki.apache.org/confluence/x/G4OhAQ", "page:27362075", links.UNAVAILABLE),
        ("[Design](/wiki/x/G4OhAQ)", "page:27362075", "Design"),
        ("https://issues.apache.org/jira/browse/HIVE-1397", "issue:HIVE-1397", links.UNAVAILABLE),
        ("[crash](https://jira.example.com/browse/hive-1397)", "issue:HIVE-1397", "crash"),
        ("issue:HIVE-1397", "issue:HIVE-1397", links.UNAVAILABLE),
        ("https://jira.example.com/rest/api/2/issue/HIVE-1397", "issue:HIVE-1397", links.UNAVAILABLE),
        ("https://x.atlassian.net/jira/software/projects/HIVE/boards/1?selectedIssue=HIVE-1397", "issue:HIVE-1397", links.UNAVAILABLE),
    ],
)
def test_tiny_links_and_issue_links_lose_a_hidden_target_and_keep_a_visible_one(spelling, target, hidden):
    assert links.render(f"see {spelling} now", {"page:1"}) == f"see {hidden} now"
    assert links.render(f"see {spelling} now", {target}) == f"see {spelling} now"


@pytest.mark.parametrize(
    ("spelling", "hidden"),
    [
        ("https://cwiki.apache.org/confluence/display/HIVE/Design+Docs", links.UNAVAILABLE),
        ("[Design](/display/HIVE/Design)", "Design"),
        ("https://wiki.example.com/display/~alice", links.UNAVAILABLE),
        ("https://wiki.example.com/pages/viewpage.action?spaceKey=HIVE&amp;title=Design", links.UNAVAILABLE),
        ("https://jira.example.com/rest/api/2/issue/10001", links.UNAVAILABLE),
        ("https://x.atlassian.net/wiki/x/AAAAAAAAAAAAAAAA", links.UNAVAILABLE),  # longer than any page id
    ],
)
def test_a_link_that_names_no_id_always_loses_its_target(spelling, hidden):
    everything = {"page:1", "issue:HIVE-1", "space:HIVE"}
    assert links.render(f"see {spelling} now", everything) == f"see {hidden} now"


def test_a_page_path_names_the_page_id_and_not_the_title_after_it():
    assert links.references_in(["https://x.example.com/wiki/spaces/H/pages/27362075/2024"]) == {"page:27362075"}


async def test_redact_asks_about_pages_and_issues_in_one_batch_and_never_about_titles():
    gate = gate_with("issue:HIVE-7")
    text = "[bug](https://jira.example.com/browse/HIVE-7), /x/G4OhAQ and [DDL](/display/HIVE/DDL)"
    assert await links.redact(gate, [text]) == ["[bug](https://jira.example.com/browse/HIVE-7), (unavailable link) and DDL"]
    (batch,) = gate.authorizer.calls
    assert {c.object for c in batch} == {"issue:HIVE-7", "page:27362075"}


def test_a_heading_slug_names_no_issue_it_links_to():
    from core.text import slugify

    assert slugify("Fix from https://jira.example.com/browse/SECRET-12") == "fix-from-link"
