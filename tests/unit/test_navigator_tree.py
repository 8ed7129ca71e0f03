"""get_ancestors, get_tree and resolve_path over the in-memory store: every node shown is visible,
counts come from the visible set, hidden and absent answer alike."""

import pytest

from authz.base import Check
from authz.fake import FakeAuthorizer
from authz.gate import Gate
from core.errors import InvalidArgument, NotFound
from core.models import Page, Principal, Space
from navigator.fake import FakeNavigatorStore
from navigator.navigator import Navigator, TreeNode

SPACE = Space(key="S", name="Space", url="u")
ALL = ("space:S", *(f"page:{n}" for n in range(1, 9)))


def page(pid: str, parent: str | None, position: int, title: str | None = None) -> Page:
    return Page(page_id=pid, space_key="S", title=title or f"T{pid}", parent_id=parent, position=position, url=f"u/{pid}", markdown="x\n")


# 1 → 2, 3, 4, 5; 3 → 6; 2 → 7 (titled like 6); 5 → 8 ("a/b", a slash in its title)
PAGES = [page("1", None, 0), page("2", "1", 0), page("3", "1", 1), page("4", "1", 2), page("5", "1", 3), page("6", "3", 0),
         page("7", "2", 0, "T6"), page("8", "5", 0, "a/b")]


async def navigator_for(*visible: str) -> tuple[Navigator, Gate]:
    store = FakeNavigatorStore()
    await store.sync_space(SPACE, PAGES)
    return Navigator(store), Gate(FakeAuthorizer([Check("user:bob", "viewer", o) for o in visible]), Principal(user="bob"))


def hidden(*ids: str) -> tuple[str, ...]:
    return tuple(o for o in ALL if o not in ids)


def flat(node: TreeNode) -> list[tuple[str, int | None]]:
    return [(c.id, c.child_count) for c in node.children] + [pair for c in node.children for pair in flat(c)]


async def test_ancestors_run_from_the_space_and_stop_below_a_hidden_page():
    nav, gate = await navigator_for(*ALL)
    assert [(c.id, c.title) for c in await nav.get_ancestors(gate, "page:6")] == [("space:S", "Space"), ("page:1", "T1"), ("page:3", "T3")]
    assert [c.id for c in await nav.get_ancestors(gate, "page:1")] == ["space:S"]
    assert await nav.get_ancestors(gate, "space:S") == []
    nav, gate = await navigator_for(*hidden("page:1"))
    assert [c.id for c in await nav.get_ancestors(gate, "page:6")] == ["page:3"]  # no gap: the path starts below page:1
    nav, gate = await navigator_for(*hidden("page:3"))
    assert await nav.get_ancestors(gate, "page:6") == []


async def test_ancestors_of_hidden_and_missing_pages_are_the_same_not_found():
    nav, gate = await navigator_for(*hidden("page:6"))
    with pytest.raises(NotFound) as secret:
        await nav.get_ancestors(gate, "page:6")
    with pytest.raises(NotFound) as missing:
        await nav.get_ancestors(gate, "page:99")
    assert str(secret.value).replace("6", "99") == str(missing.value)
    nav, gate = await navigator_for(*hidden("space:S"))
    with pytest.raises(NotFound):
        await nav.get_ancestors(gate, "page:6")  # a page in a hidden space is hidden
    with pytest.raises(InvalidArgument):
        await nav.get_ancestors(gate, "image:att1")


async def test_tree_counts_visible_children_and_leaves_hidden_subtrees_out():
    nav, gate = await navigator_for(*ALL)
    tree = await nav.get_tree(gate, "space:S", depth=2, limit=50)
    assert (tree.root.id, tree.root.title, tree.root.child_count) == ("space:S", "Space", 1)
    assert flat(tree.root) == [("page:1", 4), ("page:2", 1), ("page:3", 1), ("page:4", 0), ("page:5", 1)]
    assert not tree.truncated
    assert len(gate.authorizer.calls) == 3  # root with its children, the second level, the counts below it

    nav, gate = await navigator_for(*hidden("page:3"))
    tree = await nav.get_tree(gate, "page:1", depth=3, limit=50)
    assert flat(tree.root) == [("page:2", 1), ("page:4", 0), ("page:5", 1), ("page:7", 0), ("page:8", 0)]
    assert tree.root.child_count == 3  # page:6 is visible, but only through hidden page:3: never reached


async def test_tree_limit_keeps_shallow_levels_first():
    nav, gate = await navigator_for(*ALL)
    tree = await nav.get_tree(gate, "page:1", depth=2, limit=3)
    assert [c.id for c in tree.root.children] == ["page:2", "page:3", "page:4"] and tree.truncated
    assert tree.root.child_count == 4  # the count is of the visible children, not of those shown
    assert all(c.children == [] for c in tree.root.children)


async def test_tree_reads_at_most_tree_rows_children_per_call_and_leaves_the_rest_uncounted(monkeypatch):
    monkeypatch.setattr("navigator.navigator.TREE_ROWS", 6)
    nav, gate = await navigator_for(*ALL)
    tree = await nav.get_tree(gate, "page:1", depth=2, limit=50)
    # page:1's four children, then two of theirs (page:2's and page:3's, which may have had more:
    # page:3 and the parents after it are not counted), then none: the budget is spent.
    assert flat(tree.root) == [("page:2", 1), ("page:3", None), ("page:4", None), ("page:5", None), ("page:7", None), ("page:6", None)]
    assert tree.root.child_count == 4 and tree.truncated
    asked = [c.object for batch in gate.authorizer.calls for c in batch if c.object.startswith("page:")]
    assert len(asked) == 1 + 6  # the root and the six children read


async def test_tree_of_hidden_or_missing_node_and_bad_bounds():
    nav, gate = await navigator_for(*hidden("page:3"))
    for node in ("page:3", "page:99", "space:X"):
        with pytest.raises(NotFound):
            await nav.get_tree(gate, node, depth=1, limit=10)
    for depth, limit in ((0, 10), (4, 10), (1, 0), (1, 201)):
        with pytest.raises(InvalidArgument):
            await nav.get_tree(gate, "page:1", depth=depth, limit=limit)


async def test_resolve_path_by_titles_case_and_whitespace_insensitive():
    nav, gate = await navigator_for(*ALL)
    for path in ("S/T1/T3/T6", " s / t1/  T3 /t6 ", "T3/T6", "T1/T3/T6/"):
        resolved = await nav.resolve_path(gate, path)
        assert resolved.id == "page:6", path
    assert [c["id"] for c in resolved.candidates[0]["breadcrumb"]] == ["page:1", "page:3"]
    assert (await nav.resolve_path(gate, "S")).id == "space:S"
    assert (await nav.resolve_path(gate, r"T5/a\/b")).id == "page:8"
    both = await nav.resolve_path(gate, "T6")
    assert both.id is None and [c["id"] for c in both.candidates] == ["page:6", "page:7"]


async def test_resolve_path_never_confirms_a_hidden_title():
    nav, gate = await navigator_for(*hidden("page:3"))
    errors = []
    for path in ("T1/T3/T6", "T3", "T1/T9"):
        with pytest.raises(NotFound) as caught:
            await nav.resolve_path(gate, path)
        errors.append(type(caught.value))
    assert len(set(errors)) == 1
    # page:6 is visible itself, under hidden page:3: it is named, its breadcrumb cut above it
    assert [(c["id"], c["breadcrumb"]) for c in (await nav.resolve_path(gate, "T6")).candidates][0] == ("page:6", [])
    nav, gate = await navigator_for(*hidden("page:3", "page:6"))  # as a restriction on page:3 would be inherited
    assert (await nav.resolve_path(gate, "T6")).id == "page:7"
    nav, gate = await navigator_for(*hidden("page:3"))
    with pytest.raises(NotFound):
        await nav.resolve_path(gate, "T9")
    assert len(gate.authorizer.calls) == 1  # asked, like a path that names a hidden page


async def keyed_world(*, hidden_space: bool) -> tuple[Navigator, list[Gate]]:
    """Space V (visible) holds pages titled "S" and "Q", each with a child "Guide"; with
    ``hidden_space``, a space keyed S that the caller cannot see holds a "Guide" too."""
    store = FakeNavigatorStore()
    visible = Space(key="V", name="Visible", url="v")
    pages = [page("20", None, 0, "S"), page("21", "20", 0, "Guide"), page("30", None, 1, "Q"), page("31", "30", 0, "Guide")]
    await store.sync_space(visible, [p.model_copy(update={"space_key": "V"}) for p in pages])
    if hidden_space:
        await store.sync_space(Space(key="S", name="Hidden", url="s"), [page("10", None, 0, "Guide")])
    seen = ("space:V", "page:20", "page:21", "page:30", "page:31")
    gates = [Gate(FakeAuthorizer([Check("user:bob", "viewer", o) for o in seen]), Principal(user="bob")) for _ in range(2)]
    return Navigator(store), gates


async def test_a_hidden_space_key_is_read_as_a_title_like_an_absent_key():
    nav, (hidden_gate, absent_gate) = await keyed_world(hidden_space=True)
    hidden = await nav.resolve_path(hidden_gate, "S/Guide")  # S: a space the caller cannot see
    absent = await nav.resolve_path(absent_gate, "Q/Guide")  # Q: no space has this key
    assert (hidden.id, absent.id) == ("page:21", "page:31")
    assert [c["breadcrumb"] for c in (*hidden.candidates, *absent.candidates)] == [[{"id": "page:20", "title": "S"}], [{"id": "page:30", "title": "Q"}]]
    # The same checks, in the same order and round trips (the candidates, then their ancestors): the hidden key changed no work.
    assert hidden_gate.records == absent_gate.records and len(hidden_gate.authorizer.calls) == len(absent_gate.authorizer.calls) == 2
    assert (await nav.resolve_path(hidden_gate, "S")).id == "page:20"  # the key alone too


async def test_a_path_answers_byte_for_byte_alike_whether_its_key_is_hidden_or_absent():
    answers = []
    for hidden_space in (True, False):
        nav, (gate, _) = await keyed_world(hidden_space=hidden_space)
        answers.append([repr(await nav.resolve_path(gate, path)) for path in ("S/Guide", "S", "Guide")])
        with pytest.raises(NotFound) as missing:
            await nav.resolve_path(gate, "S/Nothing")
        answers[-1].append(repr(missing.value))
    assert answers[0] == answers[1]


async def test_resolve_path_rejects_malformed_paths():
    nav, gate = await navigator_for(*ALL)
    for bad in ("", "/", "T1//T3", "x" * 1001):
        with pytest.raises(InvalidArgument):
            await nav.resolve_path(gate, bad)


async def test_related_shows_visible_links_both_ways_in_two_round_trips():
    store = FakeNavigatorStore()
    linked = [page("1", None, 0), page("2", None, 1), page("3", None, 2), page("4", None, 3)]
    linked[0] = linked[0].model_copy(update={"links": ("2", "3", "99")})  # 99 is not held
    linked[3] = linked[3].model_copy(update={"links": ("1",)})
    await store.sync_space(SPACE, linked)
    gate = Gate(FakeAuthorizer([Check("user:bob", "viewer", o) for o in ("space:S", "page:1", "page:2", "page:4")]), Principal(user="bob"))
    found = await Navigator(store).related(gate, "page:1", 10)
    assert [p.id for p in found["links_to"]] == ["page:2"] and [p.id for p in found["linked_from"]] == ["page:4"]
    assert len(gate.authorizer.calls) == 2  # the node alone (decided before its links are read), then every linked node
    outsider = Gate(FakeAuthorizer([Check("user:bob", "viewer", o) for o in ("space:S", "page:1", "page:3")]), Principal(user="bob"))
    assert [p.id for p in (await Navigator(store).related(outsider, "page:1", 1))["links_to"]] == ["page:3"]  # hidden page:2 takes no place
    for node in ("page:3", "page:99"):
        with pytest.raises(NotFound):
            await Navigator(store).related(gate, node, 10)
    with pytest.raises(InvalidArgument):
        await Navigator(store).related(gate, "page:1", 0)


async def test_related_issues_and_mentions_are_authorized_like_pages():
    from core.models import Issue, Project

    store = FakeNavigatorStore()
    await store.sync_space(SPACE, [page("1", None, 0)])

    def issue(key: str, links: tuple[str, ...] = ()) -> Issue:
        return Issue(key=key, project_key="P", issue_type="Story", hierarchy_level=0, summary=key, parent_key=None, position=int(key[2:]), url="u", markdown="", links=links)

    await store.sync_project(Project(key="P", name="P", url="u"), [issue("P-1", ("P-2", "P-3")), issue("P-2"), issue("P-3")])
    await store.sync_mentions(SPACE, {"page:1": ["issue:P-1", "issue:P-3"]})
    seen = ("space:S", "page:1", "project:P", "issue:P-1", "issue:P-2")
    gate = Gate(FakeAuthorizer([Check("user:bob", "viewer", o) for o in seen]), Principal(user="bob"))
    nav = Navigator(store)
    assert [i.id for i in (await nav.related(gate, "page:1", 10))["mentions"]] == ["issue:P-1"]  # P-3 is hidden
    found = await nav.related(gate, "issue:P-1", 10)
    assert [i.id for i in found["links_to"]] == ["issue:P-2"] and [p.id for p in found["mentioned_in"]] == ["page:1"]
    with pytest.raises(NotFound):
        await nav.related(gate, "issue:P-3", 10)
    assert await nav.related(gate, "page:1", 10, kinds=["page"]) == {"links_to": [], "linked_from": []}
    fresh = Gate(FakeAuthorizer([Check("user:bob", "viewer", o) for o in seen]), Principal(user="bob"))
    only_pages = await nav.related(fresh, "issue:P-1", 10, kinds=["page"])
    assert list(only_pages) == ["mentioned_in"] and [p.id for p in only_pages["mentioned_in"]] == ["page:1"]
    assert "issue:P-2" not in {r.object for r in fresh.records}  # relations left out are not authorized either
    for bad in ([], ["blog"]):
        with pytest.raises(InvalidArgument):
            await nav.related(gate, "page:1", 10, kinds=bad)


async def test_an_issue_is_fetched_like_a_page_with_hidden_page_links_cut():
    from core.models import Issue, Project

    store = FakeNavigatorStore()
    await store.sync_space(SPACE, [page("1", None, 0), page("2", None, 1)])
    text = "# P-1: Crash\n\nSee [open](page:1) and [secret](page:2).\n"
    await store.sync_project(Project(key="P", name="P", url="u"), [
        Issue(key="P-1", project_key="P", issue_type="Bug", hierarchy_level=0, summary="Crash", parent_key=None, position=0, url="u/P-1", markdown=text),
    ])
    gate = Gate(FakeAuthorizer([Check("user:bob", "viewer", o) for o in ("space:S", "page:1", "project:P", "issue:P-1")]), Principal(user="bob"))
    view = await Navigator(store).read_page(gate, "issue:P-1")
    assert view.title == "Crash" and view.space_id == "project:P" and "[open](page:1)" in view.markdown and "page:2" not in view.markdown
    outsider = Gate(FakeAuthorizer([Check("user:bob", "viewer", o) for o in ("space:S", "page:1", "project:P")]), Principal(user="bob"))
    with pytest.raises(NotFound):
        await Navigator(store).read_page(outsider, "issue:P-1")
