"""The pre-filter's pieces (DESIGN.md A7): which documents a search may rank, and the masks the file
vector stores apply. Search with it end to end: test_semantic.py."""

from __future__ import annotations

from authz.base import Check
from authz.fake import FakeAuthorizer
from authz.gate import Gate
from authz.prefilter import MAX_ANCHOR_CHECKS, AclKeys, admissible
from core.models import Principal
from retrievers.lightrag_adapter import _digest, _headed, _RowDocuments

KEYS = AclKeys.of(
    {
        "space:A": {"page:1": "space:A", "page:2": "page:2", "page:3": "page:2", "page:4": "page:4"},
        "space:B": {"page:5": "space:B", "page:6": "page:6"},
    }
)


def gate(*allowed: str) -> Gate:
    return Gate(FakeAuthorizer([Check("user:bob", "viewer", o) for o in allowed]), Principal(user="bob"))


async def test_documents_behind_visible_anchors_of_visible_spaces_are_admitted():
    asked = gate("space:A", "page:2", "page:6")
    assert await admissible(asked, KEYS, ["space:A", "space:B", "space:missing"]) == {"page:1", "page:2", "page:3"}
    # spaces first, then the restricted anchors of space A only: page:6 is in a hidden space
    assert [[c.object for c in batch] for batch in asked.authorizer.calls] == [["space:A", "space:B"], ["page:2", "page:4"]]
    assert await admissible(gate("space:A", "page:2"), KEYS, ["space:B"]) == frozenset()


async def test_past_the_cap_the_visible_spaces_pages_are_admitted_unchecked():
    anchors = {f"page:{n}": f"page:{n}" for n in range(MAX_ANCHOR_CHECKS + 1)}
    asked = gate("space:A")
    admitted = await admissible(asked, AclKeys.of({"space:A": anchors}), ["space:A"])
    assert admitted == set(anchors) and len(asked.authorizer.calls) == 1  # the spaces' batch alone


def test_a_row_is_admitted_when_all_its_documents_are():
    docs = {"c1": "page:1", "c2": "page:2", "c3": "page:3"}
    rows = _RowDocuments.of(
        [
            {"full_doc_id": "page:1"},  # a chunk
            {"source_id": "c1<SEP>c2"},  # an entity from two documents
            {"source_id": "c3<SEP>c-unknown"},  # one of its chunks leads nowhere
            {"source_id": ""},  # nothing behind it
        ],
        docs.get,
        {},
        1,
    )
    assert rows.admitted({"page:1"}).tolist() == [True, False, False, False]
    assert rows.admitted({"page:1", "page:2", "page:3"}).tolist() == [True, True, False, False]
    assert rows.admitted(set()).tolist() == [False, False, False, False]
    assert _RowDocuments.of([], docs.get, {}, 1).admitted({"page:1"}).tolist() == []


def test_a_row_is_admitted_with_one_document_that_rebuilds_what_it_embeds():
    docs = {"c1": "page:1", "c2": "page:2", "c3": "page:3"}
    content = "Metastore\nthe service that keeps the tables<SEP>a database of tables"
    data = [
        {"__id__": "ent-a", "source_id": "c1<SEP>c2", "content": content},
        {"__id__": "ent-b", "source_id": "c1<SEP>c3", "content": content},  # its entry is for other text
        {"__id__": "ent-c", "source_id": "c2<SEP>c3", "content": content},  # no entry
    ]
    heads = {"ent-a": (_digest(_headed(content, 1)), frozenset({"page:2"})), "ent-b": (_digest("an older head"), frozenset({"page:3"}))}
    rows = _RowDocuments.of(data, docs.get, heads, 1)
    assert rows.admitted({"page:2"}).tolist() == [True, False, False]
    assert rows.admitted({"page:1"}).tolist() == [False, False, False]  # page:1 alone does not yield its vector
    assert rows.admitted({"page:3"}).tolist() == [False, False, False]  # a stale entry is not trusted
    assert rows.admitted({"page:2", "page:3"}).tolist() == [True, False, True]
    assert rows.rebuilders == {"ent-a": frozenset({"page:2"})}
