"""The pre-filter's pieces (DESIGN.md A7): which documents a search may rank, and the masks the file
vector stores apply. Search with it end to end: test_semantic.py."""

from __future__ import annotations

from authz.base import Check
from authz.fake import FakeAuthorizer
from authz.gate import Gate
from authz.prefilter import MAX_ANCHOR_CHECKS, AclKeys, admissible
from core.models import Principal
from retrievers.lightrag_adapter import _RowDocuments

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
    )
    assert rows.admitted({"page:1"}).tolist() == [True, False, False, False]
    assert rows.admitted({"page:1", "page:2", "page:3"}).tolist() == [True, True, False, False]
    assert rows.admitted(set()).tolist() == [False, False, False, False]
    assert _RowDocuments.of([], docs.get).admitted({"page:1"}).tolist() == []
