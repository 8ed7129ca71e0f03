import pytest

from authz.base import Check
from authz.fake import FakeAuthorizer
from authz.gate import Gate
from core.errors import InvalidArgument, NotFound
from core.models import Image, Page, Principal, Project, Space
from navigator.fake import FakeNavigatorStore
from core.text import estimate_tokens
from navigator.navigator import Navigator

SPACE = Space(key="S", name="Space", url="u")


def page(pid: str, parent: str | None, position: int, markdown: str = "text\n") -> Page:
    return Page(page_id=pid, space_key="S", title=f"T{pid}", parent_id=parent, position=position, url=f"u/{pid}", markdown=markdown)


PAGES = [
    page("1", None, 0, "intro\n\n# Setup\n\nsteps\n\n## Setup\n\nmore\n\n```\n# not a heading\n```\n"),
    page("2", "1", 0),
    page("3", "1", 1),
    page("4", "1", 2),
    page("5", "1", 3),
    page("6", "3", 0),
]


async def navigator_for(*visible: str) -> tuple[Navigator, Gate]:
    store = FakeNavigatorStore()
    await store.sync_space(SPACE, PAGES)
    gate = Gate(FakeAuthorizer([Check("user:bob", "viewer", o) for o in visible]), Principal(user="bob"))
    return Navigator(store), gate


async def test_children_skip_hidden_pages_and_pages_never_end_empty():
    nav, gate = await navigator_for("space:S", "page:1", "page:2", "page:4")
    first = await nav.list_children(gate, "page:1", None, 1)
    assert [c.id for c in first.items] == ["page:2"] and first.next_cursor
    second = await nav.list_children(gate, "page:1", first.next_cursor, 1)
    assert [c.id for c in second.items] == ["page:4"]
    assert second.next_cursor is None  # page:5 is hidden: no cursor to an empty page
    assert {r.object for r in gate.records} >= {"page:1", "page:2", "page:3", "page:4", "page:5"}


async def test_children_of_hidden_and_missing_nodes_are_the_same_not_found():
    nav, gate = await navigator_for("space:S", "page:1")
    with pytest.raises(NotFound) as hidden:
        await nav.list_children(gate, "page:3", None, 10)
    with pytest.raises(NotFound) as missing:
        await nav.list_children(gate, "page:999", None, 10)
    assert type(hidden.value) is type(missing.value)


async def test_forged_or_foreign_cursors_are_rejected():
    nav, gate = await navigator_for("space:S", "page:1", "page:2", "page:4")
    good = (await nav.list_children(gate, "page:1", None, 1)).next_cursor
    for bad in ("garbage", good + "x"):
        with pytest.raises(InvalidArgument, match="invalid cursor"):
            await nav.list_children(gate, "page:1", bad, 1)
    with pytest.raises(InvalidArgument):
        await nav.list_children(gate, "space:S", good, 1)  # cursor of another node


async def test_limit_is_validated():
    nav, gate = await navigator_for("space:S")
    with pytest.raises(InvalidArgument, match="limit"):
        await nav.list_children(gate, "space:S", None, 0)


async def test_read_page_outline_sections_and_breadcrumb():
    nav, gate = await navigator_for("space:S", "page:1", "page:3", "page:6")
    view = await nav.read_page(gate, "page:6")
    assert [c.id for c in view.breadcrumb] == ["page:1", "page:3"]
    root = await nav.read_page(gate, "page:1")
    assert [o["slug"] for o in root.outline] == ["intro", "setup", "setup-2"]
    section = await nav.read_page(gate, "page:1", "setup-2")
    assert section.markdown.startswith("## Setup") and "# not a heading" in section.markdown
    with pytest.raises(InvalidArgument, match="no section"):
        await nav.read_page(gate, "page:1", "missing")


async def test_a_long_page_comes_in_parts_of_at_most_max_tokens_and_nothing_is_lost():
    long = "# Long\n\n" + "".join(f"Paragraph {n} says something about partition {n}.\n\n" for n in range(60))
    nav, gate = await navigator_for("space:S", "page:1", "page:3", "page:7")
    await nav._store.sync_space(SPACE, [*PAGES, page("7", "3", 0, long)])
    parts, cursor = [], None
    while True:
        view = await nav.read_page(gate, "page:7", max_tokens=50, cursor=cursor)
        parts.append(view)
        cursor = view.next_cursor
        if cursor is None:
            break
    assert len(parts) > 5 and "".join(p.markdown for p in parts) == long
    assert all(estimate_tokens(p.markdown) <= 50 for p in parts)
    assert all(p.markdown.endswith("\n\n") for p in parts[:-1])  # cut between paragraphs
    assert parts[0].outline and all(p.outline == [] for p in parts[1:])
    whole = await nav.read_page(gate, "page:7")
    assert whole.markdown == long and whole.next_cursor is None  # fits the default budget

    second = parts[0].next_cursor
    for wrong in (lambda: nav.read_page(gate, "page:1", cursor=second), lambda: nav.read_page(gate, "page:7", "long", cursor=second)):
        with pytest.raises(InvalidArgument, match="invalid cursor"):
            await wrong()  # another page's or section's cursor
    with pytest.raises(InvalidArgument, match="invalid cursor"):
        await nav.read_page(gate, "page:7", cursor=second[:-4] + "AAAA")
    await nav._store.sync_space(SPACE, [*PAGES, page("7", "3", 0, long.replace("Paragraph 0", "Paragraph zero"))])
    with pytest.raises(InvalidArgument, match="changed since"):
        await nav.read_page(gate, "page:7", max_tokens=50, cursor=second)


async def test_breadcrumb_stops_at_first_hidden_ancestor():
    nav, gate = await navigator_for("space:S", "page:6", "page:1")
    view = await nav.read_page(gate, "page:6")
    assert view.breadcrumb == ()


async def test_list_spaces_lists_only_the_visible_spaces_and_projects_in_one_batch():
    nav, gate = await navigator_for()
    await nav._store.sync_project(Project(key="P", name="Project P", url="u"), [])
    assert await nav.list_spaces(gate) == {"spaces": [], "projects": []}
    nav, gate = await navigator_for("space:S")
    await nav._store.sync_project(Project(key="P", name="Project P", url="u"), [])
    assert [s["id"] for s in (await nav.list_spaces(gate))["spaces"]] == ["space:S"]
    assert (await nav.list_spaces(gate))["projects"] == []
    nav, gate = await navigator_for("project:P")
    await nav._store.sync_project(Project(key="P", name="Project P", url="u"), [])
    assert await nav.list_spaces(gate) == {"spaces": [], "projects": [{"id": "project:P", "key": "P", "name": "Project P", "url": "u"}]}
    assert [r.object for r in gate.records] == ["space:S", "project:P"]


async def test_fetch_rejects_non_page_ids():
    nav, gate = await navigator_for("space:S")
    with pytest.raises(InvalidArgument):
        await nav.read_page(gate, "space:S")
    with pytest.raises(InvalidArgument):
        await nav.read_page(gate, "page:abc")


async def test_a_page_is_not_shown_when_its_space_is_hidden():
    nav, gate = await navigator_for("page:1")
    with pytest.raises(NotFound):
        await nav.read_page(gate, "page:1")
    assert (await nav.placed(["page:1"]))["page:1"].space_id == "space:S"  # placed, but not shown


async def test_navigation_takes_one_round_trip_to_the_authorizer():
    nav, gate = await navigator_for("space:S", "page:1", "page:2", "page:3", "page:4")
    first = await nav.list_children(gate, "page:1", None, 2)
    assert len(gate.authorizer.calls) == 1  # the node and its first children together
    assert [c.object for c in gate.authorizer.calls[0]][0] == "page:1"
    nav, gate = await navigator_for("space:S", "page:1", "page:2", "page:3", "page:4")
    await nav.list_children(gate, "page:1", first.next_cursor, 2)
    assert len(gate.authorizer.calls) == 1 and [c.object for c in gate.authorizer.calls[0]][:2] == ["page:1", "page:3"]
    nav, gate = await navigator_for("space:S", "page:1", "page:3", "page:6")
    await nav.read_page(gate, "page:6")
    # the page alone first (decided before its text is read), then its space, ancestors and link targets
    assert [[c.object for c in call] for call in gate.authorizer.calls][0] == ["page:6"] and len(gate.authorizer.calls) == 2
    assert {"space:S", "page:1", "page:3"} <= {c.object for c in gate.authorizer.calls[1]}


async def test_a_missing_page_is_asked_about_like_a_hidden_one():
    nav, gate = await navigator_for("space:S")
    with pytest.raises(NotFound):
        await nav.read_page(gate, "page:999")
    assert [r.object for r in gate.records] == ["page:999"]


class CountingStore:
    """A store that counts the reads made through it."""

    def __init__(self, inner: object) -> None:
        self.inner, self.reads = inner, []

    def __getattr__(self, name: str):
        method = getattr(self.inner, name)

        async def counted(*args, **kwargs):
            self.reads.append(name)
            return await method(*args, **kwargs)

        return counted


@pytest.mark.parametrize(
    ("tool", "hidden", "missing"),
    [
        ("read_page", "page:6", "page:999"),
        ("get_ancestors", "page:6", "page:999"),
        ("related", "page:6", "page:999"),
        ("read_image", "image:att900", "image:att999"),
    ],
)
async def test_a_hidden_id_and_a_missing_one_cost_the_same_reads_and_checks(tool, hidden, missing):
    """Issue 47 item 6 (DESIGN.md A6): before not_found, a hidden id gets exactly the work a missing
    one does — the same store reads and the same one-check batch — whatever the hidden node holds
    (its text, links, ancestors, an image's bytes)."""
    linking = page("6", "3", 0, "See [intro](page:1) and page:2.\n").model_copy(update={"links": ("1", "2")})
    image = Image(attachment_id="att900", page_id="6", filename="f.png", media_type="image/png", alt_text="a", sha256="0", data=b"x" * 4096)
    work = {}
    for wanted in (hidden, missing):
        store = FakeNavigatorStore()
        await store.sync_space(SPACE, [*PAGES[:-1], linking])
        await store.sync_images(SPACE, [image])
        counting = CountingStore(store)
        nav, gate = Navigator(counting), Gate(FakeAuthorizer([Check("user:bob", "viewer", "space:S")]), Principal(user="bob"))
        args = (5,) if tool == "related" else ()
        with pytest.raises(NotFound) as refused:
            await getattr(nav, tool)(gate, wanted, *args)
        work[wanted] = (counting.reads, [[c.object.split(":")[0] for c in call] for call in gate.authorizer.calls], str(refused.value).replace(wanted, "X"))
    assert work[hidden] == work[missing]


async def test_an_unavailable_authorizer_shows_nothing_read():
    from core.errors import AuthorizationUnavailable

    class Down:
        model_id = "m"

        async def batch_check(self, checks):
            raise AuthorizationUnavailable("down")

    store = FakeNavigatorStore()
    await store.sync_space(SPACE, PAGES)
    for call in (lambda n, g: n.read_page(g, "page:1"), lambda n, g: n.list_children(g, "page:1", None, 5)):
        with pytest.raises(AuthorizationUnavailable):
            await call(Navigator(store), Gate(Down(), Principal(user="bob")))


async def test_the_outline_names_no_hidden_page_and_slugs_are_the_same_for_everyone():
    store = FakeNavigatorStore()
    text = "intro\n\n## Notes from page:3 and https://w.example.com/wiki/spaces/S/pages/3/x\n\nsee [T3](page:3)\n"
    await store.sync_space(SPACE, [page("1", None, 0, text), page("3", None, 1)])
    viewer = Gate(FakeAuthorizer([Check("user:bob", "viewer", o) for o in ("space:S", "page:1", "page:3")]), Principal(user="bob"))
    outsider = Gate(FakeAuthorizer([Check("user:bob", "viewer", o) for o in ("space:S", "page:1")]), Principal(user="bob"))
    seen = await Navigator(store).read_page(viewer, "page:1")
    hidden = await Navigator(store).read_page(outsider, "page:1")
    assert [o["slug"] for o in seen.outline] == [o["slug"] for o in hidden.outline] == ["intro", "notes-from-link-and-link"]
    assert "3" not in str(hidden.outline) + hidden.markdown.replace("T3", "")
    assert "[T3](page:3)" in seen.markdown
    section = await Navigator(store).read_page(outsider, "page:1", "notes-from-link-and-link")
    assert "page:3" not in section.markdown and section.markdown.startswith("## Notes from (unavailable link)")
