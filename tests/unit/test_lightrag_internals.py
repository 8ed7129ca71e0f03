"""How the adapter has LightRAG merge chunk ids and keep the vectors of its file stores."""

from __future__ import annotations

import logging
import random

import pytest

from retrievers import lightrag_adapter
from retrievers.lightrag_adapter import GRAPH_FIELD_SEP

merge_source_ids = lightrag_adapter._merge_source_ids  # LightRAG's own

IDS = ["page:1-chunk-000", " page:1-chunk-001", "page:2-chunk-000 ", "", "  ", "page:1-chunk-000", f"page:3-chunk-000{GRAPH_FIELD_SEP}page:3-chunk-001", 7, None]


def test_chunk_ids_merge_as_lightrag_merges_them(caplog: pytest.LogCaptureFixture) -> None:
    assert lightrag_adapter._lightrag_operate.merge_source_ids is lightrag_adapter._merge_plain_source_ids  # what LightRAG's merges call
    caplog.set_level(logging.ERROR)  # LightRAG warns of each id that is not a string
    rng = random.Random(5)
    for _ in range(3_000):
        old, new = ([rng.choice(IDS) for _ in range(rng.randint(0, 6))] if rng.random() > 0.1 else None for _ in range(2))
        assert lightrag_adapter._merge_plain_source_ids(old, new) == merge_source_ids(old, new), (old, new)
    # an iterator is read once, whichever path takes it
    joined = iter(["page:1-chunk-000", f"page:2-chunk-000{GRAPH_FIELD_SEP}page:2-chunk-001"])
    assert lightrag_adapter._merge_plain_source_ids(joined, iter(["page:1-chunk-000"])) == [
        "page:1-chunk-000", "page:2-chunk-000", "page:2-chunk-001"
    ]


def test_file_vector_stores_keep_their_rows_vectors_stored_not_compressed() -> None:
    import zlib

    import numpy as np

    vector = np.linspace(-1, 1, 512, dtype=np.float32).astype(np.float16).tobytes()
    kept = lightrag_adapter._lightrag_nano.zlib.compress(vector)
    assert kept == zlib.compress(vector, 0) != zlib.compress(vector)  # stored, in zlib's format
    assert lightrag_adapter._lightrag_nano.zlib.decompress(kept) == vector


def test_the_first_batches_are_smaller_and_every_document_goes_in_once_in_order() -> None:
    from retrievers.base import IndexDocument

    docs = [IndexDocument(f"page:{n}", "text") for n in range(200)]
    slices = lightrag_adapter._slices(docs, 48)
    assert [len(s) for s in slices] == [6, 12, 24, 48, 48, 48, 14]
    assert [doc for s in slices for doc in s] == docs
    assert [len(s) for s in lightrag_adapter._slices(docs[:5], 4)] == [1, 2, 2]  # 4 // 8 is none
    assert [len(s) for s in lightrag_adapter._slices(docs[:3], 1)] == [1, 1, 1]
    assert lightrag_adapter._slices([], 48) == []
